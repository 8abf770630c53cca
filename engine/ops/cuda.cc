#include "engine/ops/cuda.h"

#include <string>

#include "engine/kernels/cuda/status.h"
#include "engine/ops/check.h"

namespace quiver::engine::ops::internal {

cuda::DeviceContext& CudaOf(std::string_view op, const ExecContext& ctx) {
  if (ctx.cuda == nullptr) Fail(op, "the execution context has no CUDA device context");
  return *ctx.cuda;
}

cudaStream_t StreamOf(std::string_view op, const ExecContext& ctx) {
  return CudaOf(op, ctx).stream();
}

void CheckLaunch(std::string_view op, cudaError_t error) {
  CheckStatus(op, cuda::CudaStatus(error, "kernel launch"));
}

void CheckStatus(std::string_view op, const absl::Status& status) {
  if (!status.ok()) Fail(op, std::string(status.message()));
}

cuda::AddNormArgs AddNormOver(float* residual, const void* add, cuda::NormKind norm,
                              const float* gamma, const float* beta, float eps, int64_t rows,
                              int64_t n, DType act) {
  cuda::AddNormArgs a;
  a.residual = residual;
  a.add = add;
  a.add_stride = n;
  a.norm = norm;
  a.gamma = gamma;
  a.beta = beta;
  a.eps = eps;
  a.normed_stride = n;
  a.num_tokens = rows;
  a.hidden = n;
  a.act = act;
  return a;
}

void LaunchAddNorm(std::string_view op, const ExecContext& ctx, const cuda::AddNormArgs& args) {
  CheckLaunch(op, cuda::AddNorm(args, StreamOf(op, ctx)));
}

}  // namespace quiver::engine::ops::internal
