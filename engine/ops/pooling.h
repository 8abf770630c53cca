// Pooling token rows into one row per range: per sequence (bounds from cu_seqlens) or per
// late-chunking span.
//
//   hidden  f32 [num_tokens, hidden]
//   bounds  i32 [num_rows, 2]: (begin, end) token offsets, non-empty, inside hidden; host memory;
//           or [num_rows, 3]: (begin, end, origin), the weighted mean weighing token t by
//           t - origin + 1 (origin <= begin: a range that leaves out its sequence's prompt)
//   out     f32 [num_rows, hidden], contiguous
//   device_bounds  the same bounds in ctx.device memory, for devices other than the CPU (the
//                  kernel reads them there; the host copy is what is checked)
//
// On CUDA hidden may be bf16 (sums are f32 either way).
//   MaxRows  out f32 [1, m] = the elementwise max over the rows of x [n, m] (act), and over out
//            itself when `accumulate`: a running max over chunks of a sequence (SPLADE)
//   GatherRows   out [n, m] = the rows `rows` (i32 [n], host memory, each in [0, x rows)) of x
//   ScatterRows  out's rows `rows` = x [n, m]; the others unchanged (rows distinct)
//            Both CPU only, f32: the models' last layer over the rows pooling reads
//            (ForwardContext::output_rows).
#pragma once

#include "engine/base/exec_context.h"
#include "engine/base/op_types.h"
#include "engine/base/tensor.h"

namespace quiver::engine::ops {

using ::quiver::engine::PoolMode;  // base/op_types.h: kCls, kMean, kLastToken, kMax, ...

void Pool(const ExecContext& ctx, const Tensor& hidden, const Tensor& bounds, PoolMode mode,
          const Tensor& out, const Tensor& device_bounds = {});

void MaxRows(const ExecContext& ctx, const Tensor& x, const Tensor& out, bool accumulate);

void GatherRows(const ExecContext& ctx, const Tensor& x, const Tensor& rows, const Tensor& out);
void ScatterRows(const ExecContext& ctx, const Tensor& x, const Tensor& rows, const Tensor& out);

}  // namespace quiver::engine::ops
