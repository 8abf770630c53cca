#include <cstdio>

#include "app/commands.h"
#include "common/cpu_budget.h"
#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/device.h"

namespace quiver::app {

int RunVersion() {
  std::printf("quiver %s (%s build)\n", QUIVER_VERSION, QUIVER_BUILD_TYPE);
  std::printf("cpu: %s\n", engine::cpu::CpuSummary().c_str());
  std::printf("cpus usable: %s\n", ReadCpuBudget().ToString().c_str());
  engine::DeviceReport report = engine::QueryDevices();
  if (!report.cuda_compiled) {
    std::printf("cuda: not compiled in\n");
    return 0;
  }
  std::printf("cuda: compiled, runtime %s\n", report.cuda_runtime_version.c_str());
  if (!report.cuda_error.empty()) {
    std::printf("cuda devices: none (%s)\n", report.cuda_error.c_str());
  }
  for (const engine::CudaDeviceInfo& device : report.cuda_devices) {
    std::printf("cuda device %d: %s, sm_%d%d, %.1f GiB\n", device.index, device.name.c_str(),
                device.compute_major, device.compute_minor,
                static_cast<double>(device.memory_bytes) / (1ull << 30));
  }
  if (!report.cublaslt.empty()) std::printf("cublaslt: %s\n", report.cublaslt.c_str());
  if (!report.cublaslt_error.empty()) {
    std::printf("cublaslt: none (%s)\n", report.cublaslt_error.c_str());
  }
  return 0;
}

}  // namespace quiver::app
