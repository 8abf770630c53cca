#include "engine/ops/norm.h"

#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"

namespace quiver::engine::ops {

using internal::Check;
using internal::CheckContiguous;

void LayerNorm(const ExecContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
               float eps, const Tensor& out) {
  CheckContiguous("LayerNorm", "x", ctx, x, DType::kF32, {-1, -1});
  const int64_t rows = x.dim(0), n = x.dim(1);
  Check("LayerNorm", "gamma", ctx, gamma, DType::kF32, {n});
  Check("LayerNorm", "beta", ctx, beta, DType::kF32, {n});
  CheckContiguous("LayerNorm", "out", ctx, out, DType::kF32, {rows, n});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::LayerNorm(*ctx.pool, x.f32(), gamma.f32(), beta.f32(), out.f32(), rows, n, eps);
      return;
    case Device::kCuda:
      internal::NoKernel("LayerNorm", ctx);
  }
}

void AddLayerNorm(const ExecContext& ctx, const Tensor& io, const Tensor& add, const Tensor& gamma,
                  const Tensor& beta, float eps) {
  CheckContiguous("AddLayerNorm", "io", ctx, io, DType::kF32, {-1, -1});
  const int64_t rows = io.dim(0), n = io.dim(1);
  CheckContiguous("AddLayerNorm", "add", ctx, add, DType::kF32, {rows, n});
  Check("AddLayerNorm", "gamma", ctx, gamma, DType::kF32, {n});
  Check("AddLayerNorm", "beta", ctx, beta, DType::kF32, {n});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::AddLayerNorm(*ctx.pool, io.f32(), add.f32(), gamma.f32(), beta.f32(), rows, n, eps);
      return;
    case Device::kCuda:
      internal::NoKernel("AddLayerNorm", ctx);
  }
}

void RmsNorm(const ExecContext& ctx, const Tensor& x, const Tensor& gamma, float eps,
             const Tensor& out) {
  CheckContiguous("RmsNorm", "x", ctx, x, DType::kF32, {-1, -1});
  const int64_t rows = x.dim(0), n = x.dim(1);
  Check("RmsNorm", "gamma", ctx, gamma, DType::kF32, {n});
  CheckContiguous("RmsNorm", "out", ctx, out, DType::kF32, {rows, n});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::RmsNorm(x.f32(), gamma.f32(), out.f32(), rows, n, eps);
      return;
    case Device::kCuda:
      internal::NoKernel("RmsNorm", ctx);
  }
}

void AddRmsNorm(const ExecContext& ctx, const Tensor& residual, const Tensor& y,
                const Tensor& gamma, float eps) {
  CheckContiguous("AddRmsNorm", "residual", ctx, residual, DType::kF32, {-1, -1});
  const int64_t rows = residual.dim(0), n = residual.dim(1);
  CheckContiguous("AddRmsNorm", "y", ctx, y, DType::kF32, {rows, n});
  Check("AddRmsNorm", "gamma", ctx, gamma, DType::kF32, {n});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::AddRmsNorm(*ctx.pool, residual.f32(), y.f32(), gamma.f32(), rows, n, eps);
      return;
    case Device::kCuda:
      internal::NoKernel("AddRmsNorm", ctx);
  }
}

void HeadRmsNorm(const ExecContext& ctx, const Tensor& x, int64_t heads, const Tensor& gamma,
                 float eps) {
  Check("HeadRmsNorm", "gamma", ctx, gamma, DType::kF32, {-1});
  const int64_t head_dim = gamma.dim(0);
  Check("HeadRmsNorm", "x", ctx, x, DType::kF32, {-1, heads * head_dim});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::HeadRmsNorm(x.f32(), gamma.f32(), x.dim(0), heads, head_dim, x.row_stride(), eps);
      return;
    case Device::kCuda:
      internal::NoKernel("HeadRmsNorm", ctx);
  }
}

}  // namespace quiver::engine::ops
