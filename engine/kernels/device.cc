#include "engine/kernels/device.h"

namespace quiver::engine {

#ifdef QUIVER_WITH_CUDA
DeviceReport QueryCudaDevices();  // kernels/cuda/device_cuda.cu
#endif

DeviceReport QueryDevices() {
#ifdef QUIVER_WITH_CUDA
  return QueryCudaDevices();
#else
  return DeviceReport{};
#endif
}

}  // namespace quiver::engine
