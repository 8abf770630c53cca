#include "engine/ops/norm.h"

#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"
#ifdef QUIVER_WITH_CUDA
#include "engine/kernels/cuda/kernels.h"
#include "engine/ops/cuda.h"
#endif

namespace quiver::engine::ops {

using internal::ActDType;
using internal::Check;
using internal::CheckContiguous;

#ifdef QUIVER_WITH_CUDA
namespace {

// residual f32 [rows, n] (+= *add when given, of normed's type), then normed = RmsNorm(residual):
// the add-and-norm kernel, for AddRmsNorm and for RmsNorm from an f32 residual into bf16.
void CudaResidualRmsNorm(std::string_view op, const ExecContext& ctx, const Tensor& residual,
                         const Tensor* add, const Tensor& gamma, float eps, const Tensor& normed) {
  cuda::AddNormArgs a = internal::AddNormOver(
      residual.f32(), add != nullptr ? add->data<void>() : nullptr, cuda::NormKind::kRmsNorm,
      gamma.f32(), nullptr, eps, residual.dim(0), residual.dim(1), normed.dtype());
  a.normed = normed.data<void>();
  internal::LaunchAddNorm(op, ctx, a);
}

}  // namespace
#endif

// On the CPU every operand is f32. On CUDA x, out, add and y may be bf16 (the residual stream,
// io / residual, stays f32; norm weights are f32).

void LayerNorm(const ExecContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
               float eps, const Tensor& out) {
  const DType act = ActDType("LayerNorm", "x", ctx, x);
  CheckContiguous("LayerNorm", "x", ctx, x, act, {-1, -1});
  const int64_t rows = x.dim(0), n = x.dim(1);
  Check("LayerNorm", "gamma", ctx, gamma, DType::kF32, {n});
  Check("LayerNorm", "beta", ctx, beta, DType::kF32, {n});
  CheckContiguous("LayerNorm", "out", ctx, out, act, {rows, n});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::LayerNorm(*ctx.pool, x.f32(), gamma.f32(), beta.f32(), out.f32(), rows, n, eps);
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch(
          "LayerNorm",
          cuda::Norm(x.data<void>(), n, cuda::NormKind::kLayerNorm, gamma.f32(), beta.f32(), eps,
                     out.data<void>(), n, rows, n, act, internal::StreamOf("LayerNorm", ctx)));
      return;
#endif
      internal::NoKernel("LayerNorm", ctx);
  }
}

void AddLayerNorm(const ExecContext& ctx, const Tensor& io, const Tensor& add, const Tensor& gamma,
                  const Tensor& beta, float eps) {
  CheckContiguous("AddLayerNorm", "io", ctx, io, DType::kF32, {-1, -1});
  const int64_t rows = io.dim(0), n = io.dim(1);
  const DType act = ActDType("AddLayerNorm", "add", ctx, add);
  CheckContiguous("AddLayerNorm", "add", ctx, add, act, {rows, n});
  Check("AddLayerNorm", "gamma", ctx, gamma, DType::kF32, {n});
  Check("AddLayerNorm", "beta", ctx, beta, DType::kF32, {n});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::AddLayerNorm(*ctx.pool, io.f32(), add.f32(), gamma.f32(), beta.f32(), rows, n, eps);
      return;
    case Device::kCuda: {
#ifdef QUIVER_WITH_CUDA
      cuda::AddNormArgs a =
          internal::AddNormOver(io.f32(), add.data<void>(), cuda::NormKind::kLayerNorm, gamma.f32(),
                                beta.f32(), eps, rows, n, act);
      a.store_normed_in_residual = true;
      internal::LaunchAddNorm("AddLayerNorm", ctx, a);
      return;
#endif
      internal::NoKernel("AddLayerNorm", ctx);
    }
  }
}

void AddPreLayerNorm(const ExecContext& ctx, const Tensor& residual, const Tensor& y,
                     const Tensor& gamma, const Tensor& beta, float eps) {
  CheckContiguous("AddPreLayerNorm", "residual", ctx, residual, DType::kF32, {-1, -1});
  const int64_t rows = residual.dim(0), n = residual.dim(1);
  const DType act = ActDType("AddPreLayerNorm", "y", ctx, y);
  CheckContiguous("AddPreLayerNorm", "y", ctx, y, act, {rows, n});
  Check("AddPreLayerNorm", "gamma", ctx, gamma, DType::kF32, {n});
  Check("AddPreLayerNorm", "beta", ctx, beta, DType::kF32, {n});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::AddPreLayerNorm(*ctx.pool, residual.f32(), y.f32(), gamma.f32(), beta.f32(), rows, n,
                           eps);
      return;
    case Device::kCuda: {
#ifdef QUIVER_WITH_CUDA
      cuda::AddNormArgs a =
          internal::AddNormOver(residual.f32(), y.data<void>(), cuda::NormKind::kLayerNorm,
                                gamma.f32(), beta.f32(), eps, rows, n, act);
      a.normed = y.data<void>();
      internal::LaunchAddNorm("AddPreLayerNorm", ctx, a);
      return;
#endif
      internal::NoKernel("AddPreLayerNorm", ctx);
    }
  }
}

void RmsNorm(const ExecContext& ctx, const Tensor& x, const Tensor& gamma, float eps,
             const Tensor& out) {
  const DType act = ActDType("RmsNorm", "x", ctx, x);
  CheckContiguous("RmsNorm", "x", ctx, x, act, {-1, -1});
  const int64_t rows = x.dim(0), n = x.dim(1);
  Check("RmsNorm", "gamma", ctx, gamma, DType::kF32, {n});
  // CUDA: an f32 x (the residual stream) may be normed into a bf16 out (the next GEMM's input).
  const DType out_dtype = ActDType("RmsNorm", "out", ctx, out);
  if (out_dtype != act && act != DType::kF32) {
    internal::Fail("RmsNorm", StrCat("x is ", x.Describe(), " and out ", out.Describe(),
                                     ": only an f32 x may be normed into another type"));
  }
  CheckContiguous("RmsNorm", "out", ctx, out, out_dtype, {rows, n});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::RmsNorm(x.f32(), gamma.f32(), out.f32(), rows, n, eps);
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      if (out_dtype != act) {  // the add-and-norm kernel with nothing to add: x is only read
        CudaResidualRmsNorm("RmsNorm", ctx, x, nullptr, gamma, eps, out);
        return;
      }
      internal::CheckLaunch(
          "RmsNorm",
          cuda::Norm(x.data<void>(), n, cuda::NormKind::kRmsNorm, gamma.f32(), nullptr, eps,
                     out.data<void>(), n, rows, n, act, internal::StreamOf("RmsNorm", ctx)));
      return;
#endif
      internal::NoKernel("RmsNorm", ctx);
  }
}

void AddRmsNorm(const ExecContext& ctx, const Tensor& residual, const Tensor& y,
                const Tensor& gamma, float eps) {
  CheckContiguous("AddRmsNorm", "residual", ctx, residual, DType::kF32, {-1, -1});
  const int64_t rows = residual.dim(0), n = residual.dim(1);
  const DType act = ActDType("AddRmsNorm", "y", ctx, y);
  CheckContiguous("AddRmsNorm", "y", ctx, y, act, {rows, n});
  Check("AddRmsNorm", "gamma", ctx, gamma, DType::kF32, {n});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::AddRmsNorm(*ctx.pool, residual.f32(), y.f32(), gamma.f32(), rows, n, eps);
      return;
    case Device::kCuda: {
#ifdef QUIVER_WITH_CUDA
      // y is read (the addend) and then overwritten with the norm, row by row in one kernel.
      CudaResidualRmsNorm("AddRmsNorm", ctx, residual, &y, gamma, eps, y);
      return;
#endif
      internal::NoKernel("AddRmsNorm", ctx);
    }
  }
}

void HeadRmsNorm(const ExecContext& ctx, const Tensor& x, int64_t heads, const Tensor& gamma,
                 float eps) {
  Check("HeadRmsNorm", "gamma", ctx, gamma, DType::kF32, {-1});
  const int64_t head_dim = gamma.dim(0);
  const DType act = ActDType("HeadRmsNorm", "x", ctx, x);
  Check("HeadRmsNorm", "x", ctx, x, act, {-1, heads * head_dim});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::HeadRmsNorm(x.f32(), gamma.f32(), x.dim(0), heads, head_dim, x.row_stride(), eps);
      return;
    case Device::kCuda: {
#ifdef QUIVER_WITH_CUDA
      cuda::HeadNormRotaryArgs a;
      a.x = x.data<void>();
      a.x_stride = x.row_stride();
      a.num_tokens = x.dim(0);
      a.heads = heads;
      a.head_dim = head_dim;
      a.gamma = gamma.f32();
      a.eps = eps;
      a.act = act;
      internal::CheckLaunch("HeadRmsNorm",
                            cuda::HeadNormRotary(a, internal::StreamOf("HeadRmsNorm", ctx)));
      return;
#endif
      internal::NoKernel("HeadRmsNorm", ctx);
    }
  }
}

}  // namespace quiver::engine::ops
