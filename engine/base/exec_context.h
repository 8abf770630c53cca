// Where an op runs and with what: the device, and on the CPU the compute thread pool that
// parallel kernels spread over. Built once by the engine and passed to every op; the CUDA
// backend adds its stream here without touching the ops' callers.
#pragma once

#include "engine/base/tensor.h"

namespace quiver::engine {

class ThreadPool;
namespace cuda {
class DeviceContext;  // kernels/cuda/context.h: the stream and cuBLASLt handle ops enqueue on
}

struct ExecContext {
  Device device = Device::kCpu;
  ThreadPool* pool = nullptr;           // CPU: the engine's pool (never null for Device::kCpu)
  cuda::DeviceContext* cuda = nullptr;  // CUDA: never null for Device::kCuda

  // The element type of a model's activations here (what GEMMs and attention take): f32 on the
  // CPU, bf16 on CUDA. The residual stream, pooled rows and scores stay f32 on every device.
  DType act_dtype() const { return device == Device::kCuda ? DType::kBF16 : DType::kF32; }
};

}  // namespace quiver::engine
