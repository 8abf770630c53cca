// cuda_runtime.h in a build without QUIVER_WITH_CUDA: every call says so.
#include "engine/runtime/cuda_runtime.h"

namespace quiver::engine {
namespace {

absl::Status NotCompiled() {
  return absl::UnavailableError(
      "CUDA was asked for, but this quiver was not compiled with CUDA (build it where the CUDA "
      "toolkit is installed: QUIVER_CUDA=AUTO finds nvcc)");
}

}  // namespace

absl::Status CudaUseDevice(int /*device*/) { return NotCompiled(); }

absl::StatusOr<CudaMemory> CudaMemoryInfo() { return NotCompiled(); }

absl::StatusOr<std::unique_ptr<DeviceRuntime>> MakeCudaRuntime(const CudaRuntimeOptions&,
                                                               const Model&, Workspace&,
                                                               Workspace&) {
  return NotCompiled();
}

}  // namespace quiver::engine
