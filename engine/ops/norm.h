// Normalizations over the last axis, f32, contiguous rows unless said otherwise.
//
//   LayerNorm    out [rows, n] = (x - mean) / sqrt(var + eps) · gamma + beta (out may be x)
//   AddLayerNorm io [rows, n] = LayerNorm(io + add)
//   AddPreLayerNorm  residual += y, then y = LayerNorm(residual): AddRmsNorm with a LayerNorm
//                (pre-LN encoders: ModernBERT)
//   RmsNorm      out [rows, n] = x / sqrt(mean(x²) + eps) · gamma (out may be x)
//   AddRmsNorm   residual += y, then y = RmsNorm(residual): a pre-norm block's residual add and
//                the next block's norm in one pass
//   HeadRmsNorm  in place on each head_dim slice of x [num_tokens, heads · head_dim] (any row
//                stride: q or k inside a fused qkv), gamma [head_dim]: Qwen3's per-head q/k norm
#pragma once

#include "engine/base/exec_context.h"
#include "engine/base/tensor.h"

namespace quiver::engine::ops {

void LayerNorm(const ExecContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
               float eps, const Tensor& out);
void AddLayerNorm(const ExecContext& ctx, const Tensor& io, const Tensor& add, const Tensor& gamma,
                  const Tensor& beta, float eps);
void AddPreLayerNorm(const ExecContext& ctx, const Tensor& residual, const Tensor& y,
                     const Tensor& gamma, const Tensor& beta, float eps);
void RmsNorm(const ExecContext& ctx, const Tensor& x, const Tensor& gamma, float eps,
             const Tensor& out);
void AddRmsNorm(const ExecContext& ctx, const Tensor& residual, const Tensor& y,
                const Tensor& gamma, float eps);
void HeadRmsNorm(const ExecContext& ctx, const Tensor& x, int64_t heads, const Tensor& gamma,
                 float eps);

}  // namespace quiver::engine::ops
