// What every CUDA op of one compute thread enqueues on: its stream and its cuBLASLt instance
// (with the persistent workspace). Made once per engine (or test) on the current device and
// passed to ops through ExecContext::cuda; owned by that one thread.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "absl/status/statusor.h"
#include "engine/kernels/cuda/blaslt.h"
#include "engine/kernels/cuda/memory.h"

namespace quiver::engine::cuda {

class DeviceContext {
 public:
  // On device `device` (cudaSetDevice); UNAVAILABLE naming the reason without one.
  static absl::StatusOr<std::unique_ptr<DeviceContext>> Create(int device = 0);

  cudaStream_t stream() const { return stream_.get(); }
  BlasLt& blas() const { return *blas_; }
  int device() const { return device_; }
  // Waits for everything enqueued so far.
  absl::Status Synchronize() const { return stream_.Synchronize(); }

 private:
  DeviceContext() = default;
  int device_ = 0;
  Stream stream_;
  std::unique_ptr<BlasLt> blas_;
};

}  // namespace quiver::engine::cuda
