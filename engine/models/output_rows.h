// What a model needs to run its last layer's work after attention on ForwardContext::output_rows
// only (the CPU, f32): those rows of the residual stream and of the attention's output, gathered.
// Each op after attention computes a row from that row alone, so the rows get the same bits as
// over the whole batch; the model scatters its result rows back (ops::ScatterRows), and the
// others keep what an earlier layer left, which nothing reads.
#pragma once

#include <cstdint>

#include "engine/base/tensor.h"
#include "engine/models/model.h"
#include "engine/ops/pooling.h"

namespace quiver::engine {

struct OutputRows {
  Tensor x;         // f32 [n, x's width]: the residual stream's rows
  Tensor attended;  // f32 [n, attended's width]: the attention's output for them
};

// The rows of x and attended that ctx.output_rows names, in the model's workspace slots x_slot
// and attended_slot.
inline OutputRows GatherOutputRows(const ForwardContext& ctx, const Tensor& x,
                                   const Tensor& attended, int x_slot, int attended_slot) {
  const int64_t n = ctx.output_rows.dim(0);
  OutputRows rows{ctx.ws.F32(x_slot, {n, x.dim(1)}),
                  ctx.ws.F32(attended_slot, {n, attended.dim(1)})};
  ops::GatherRows(ctx.exec, x, ctx.output_rows, rows.x);
  ops::GatherRows(ctx.exec, attended, ctx.output_rows, rows.attended);
  return rows;
}

}  // namespace quiver::engine
