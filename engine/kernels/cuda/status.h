// CUDA, cuBLASLt and launch errors as absl::Status naming the call that failed. Host code of the
// CUDA backend only (includes CUDA headers; never included by a CPU-only build).
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "absl/status/status.h"

namespace quiver::engine::cuda {

// OK for cudaSuccess; otherwise INTERNAL (UNAVAILABLE for no driver / no device, RESOURCE_EXHAUSTED
// for out of memory) "`call`: <cudaGetErrorName>: <cudaGetErrorString>".
absl::Status CudaStatus(cudaError_t error, std::string_view call);

// The error of the last kernel launch on this thread (cudaGetLastError), named after `kernel`.
absl::Status LaunchStatus(std::string_view kernel);

}  // namespace quiver::engine::cuda

// Evaluates a cudaError_t expression; returns its Status from the enclosing function on failure.
#define QUIVER_CUDA_RETURN_IF_ERROR(expr)                                                   \
  do {                                                                                      \
    ::absl::Status _quiver_cuda_status = ::quiver::engine::cuda::CudaStatus((expr), #expr); \
    if (!_quiver_cuda_status.ok()) return _quiver_cuda_status;                              \
  } while (0)
