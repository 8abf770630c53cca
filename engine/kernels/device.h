// Which compute devices this build and this host offer. The CUDA half lives in
// kernels/cuda/device_cuda.cu and exists only in builds with QUIVER_WITH_CUDA; callers never see
// CUDA headers.
#pragma once

#include <string>
#include <vector>

namespace quiver::engine {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  size_t memory_bytes = 0;
};

struct DeviceReport {
  bool cuda_compiled = false;        // this binary carries the CUDA backend
  std::string cuda_runtime_version;  // e.g. "13.0"; empty when not compiled
  std::string cuda_error;            // why no device is usable (no driver, no GPU), if so
  std::vector<CudaDeviceInfo> cuda_devices;
  // cuBLASLt, which the GPU runtime opens at run time (kernels/cuda/cublaslt_library.h), asked
  // for only where a device is usable: the file and its version, or why it cannot be opened.
  std::string cublaslt;
  std::string cublaslt_error;
};

// Never fails: a missing driver or GPU is reported in cuda_error.
DeviceReport QueryDevices();

}  // namespace quiver::engine
