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

}  // namespace quiver::engine::ops::internal
