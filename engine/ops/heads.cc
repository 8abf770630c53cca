#include "engine/ops/heads.h"

#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/activation.h"
#include "engine/ops/check.h"
#ifdef QUIVER_WITH_CUDA
#include "engine/kernels/cuda/kernels.h"
#include "engine/ops/cuda.h"
#endif

namespace quiver::engine::ops {

void ClassifierHead(const ExecContext& ctx, const Tensor& pooled, const LinearWeights& dense,
                    const LinearWeights& out_proj, const Tensor& scratch, const Tensor& scores,
                    HeadActivation activation) {
  Linear(ctx, pooled, dense, scratch);
  if (activation == HeadActivation::kRelu) {
    Relu(ctx, scratch);
  } else {
    Tanh(ctx, scratch);
  }
  Linear(ctx, scratch, out_proj, scores);
}

void LogitDifference(const ExecContext& ctx, const Tensor& pooled, const Tensor& yes,
                     const Tensor& no, const Tensor& scores) {
  internal::CheckContiguous("LogitDifference", "pooled", ctx, pooled, DType::kF32, {-1, -1});
  const int64_t rows = pooled.dim(0), n = pooled.dim(1);
  internal::Check("LogitDifference", "yes", ctx, yes, DType::kF32, {n});
  internal::Check("LogitDifference", "no", ctx, no, DType::kF32, {n});
  internal::CheckContiguous("LogitDifference", "scores", ctx, scores, DType::kF32, {rows, 1});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::LogitDifference(pooled.f32(), rows, n, yes.f32(), no.f32(), scores.f32());
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch(
          "LogitDifference",
          cuda::LogitDifference(pooled.f32(), rows, n, yes.f32(), no.f32(), scores.f32(),
                                internal::StreamOf("LogitDifference", ctx)));
      return;
#endif
      internal::NoKernel("LogitDifference", ctx);
  }
}

}  // namespace quiver::engine::ops
