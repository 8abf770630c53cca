// Rotary position embedding, in place on x [num_tokens, heads · head_dim] (any row stride: q or
// k inside a fused qkv), f32, with positions i32 [num_tokens]. inv_freq = 1 / theta^(2i /
// head_dim) in f32, as transformers computes it; head_dim even.
#pragma once

#include <cstdint>

#include "engine/base/exec_context.h"
#include "engine/base/op_types.h"
#include "engine/base/tensor.h"

namespace quiver::engine::ops {

using ::quiver::engine::RotaryLayout;  // base/op_types.h

void Rotary(const ExecContext& ctx, const Tensor& x, const Tensor& positions, int64_t heads,
            int64_t head_dim, double theta, RotaryLayout layout);

}  // namespace quiver::engine::ops
