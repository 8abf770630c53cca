// The requested form of pooled vectors: Matryoshka truncation to `dimensions`, optional L2
// normalization (x / max(||x||, 1e-12), as sentence-transformers' Normalize), then an encoding:
// f32, f16 (round to nearest even), int8 (clamp(round(tanh(x) · 127)), the pplx-embed
// convention) or packed sign bits (most significant first, ceil(dimensions / 8) bytes a row).
//
//   pooled  f32 [num_rows, hidden]
//   out     u8 [num_rows, EncodedRowBytes(encoding, dimensions)], host memory: the engine's
//           little-endian wire format
#pragma once

#include <cstdint>

#include "engine/base/exec_context.h"
#include "engine/base/op_types.h"
#include "engine/base/tensor.h"

namespace quiver::engine::ops {

using ::quiver::engine::Encoding;  // base/op_types.h

int64_t EncodedRowBytes(Encoding encoding, int64_t dimensions);

// 0 < dimensions <= hidden.
void FormatOutput(const ExecContext& ctx, const Tensor& pooled, int64_t dimensions, bool normalize,
                  Encoding encoding, const Tensor& out);

}  // namespace quiver::engine::ops
