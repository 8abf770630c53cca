#include "engine/kernels/cuda/context.h"

#include "common/status.h"
#include "engine/kernels/cuda/status.h"

namespace quiver::engine::cuda {

absl::StatusOr<std::unique_ptr<DeviceContext>> DeviceContext::Create(int device) {
  QUIVER_RETURN_IF_ERROR(CudaDeviceAllocator().status());
  QUIVER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  std::unique_ptr<DeviceContext> ctx(new DeviceContext());
  ctx->device_ = device;
  QUIVER_ASSIGN_OR_RETURN(ctx->stream_, Stream::Create());
  QUIVER_ASSIGN_OR_RETURN(ctx->blas_, BlasLt::Create());
  return ctx;
}

}  // namespace quiver::engine::cuda
