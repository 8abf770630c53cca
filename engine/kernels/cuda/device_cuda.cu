// CUDA device discovery. Compiled in every build with nvcc present (CI has no GPU, so it checks
// that the CUDA sources build); run only where a driver and device exist.
#include <cuda_runtime.h>

#include <string>

#include "engine/kernels/cuda/cublaslt_library.h"
#include "engine/kernels/device.h"

namespace quiver::engine {

DeviceReport QueryCudaDevices() {
  DeviceReport report;
  report.cuda_compiled = true;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    report.cuda_runtime_version =
        std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10);
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // Name the cause a user can act on; the runtime's own words follow.
    const char* cause = err == cudaErrorInsufficientDriver ? "no NVIDIA driver (or one too old) "
                        : err == cudaErrorNoDevice         ? "no NVIDIA GPU "
                                                           : "";
    report.cuda_error =
        std::string(cause) + "(cudaGetDeviceCount: " + cudaGetErrorString(err) + ")";
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return report;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    report.cuda_devices.push_back(
        {i, prop.name, prop.major, prop.minor, static_cast<size_t>(prop.totalGlobalMem)});
  }
  if (!report.cuda_devices.empty()) {
    const absl::StatusOr<const cuda::CublasLtLibrary*> lt = cuda::CublasLtLibrary::Process();
    if (lt.ok()) {
      report.cublaslt = (*lt)->path() + ", version " + std::to_string((*lt)->version());
    } else {
      report.cublaslt_error = std::string(lt.status().message());
    }
  }
  return report;
}

}  // namespace quiver::engine
