#include "engine/kernels/cuda/status.h"

#include "common/strings.h"

namespace quiver::engine::cuda {

absl::Status CudaStatus(cudaError_t error, std::string_view call) {
  if (error == cudaSuccess) return absl::OkStatus();
  // A handled error must not resurface as the next launch's (cudaGetLastError); a sticky one
  // (the context is lost) stays whatever this does.
  cudaGetLastError();
  const std::string message =
      StrCat(call, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return absl::UnavailableError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status LaunchStatus(std::string_view kernel) {
  return CudaStatus(cudaGetLastError(), StrCat("launching ", kernel));
}

}  // namespace quiver::engine::cuda
