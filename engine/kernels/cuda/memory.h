// RAII owners of the CUDA runtime's resources, each freeing what it holds exactly once: device
// buffers (cudaMalloc, never managed memory), page-locked host buffers (cudaMallocHost, what
// asynchronous copies need), streams and events. Creation returns absl::Status naming the call
// that failed; owners are moved, never copied. Host code of the CUDA backend only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "engine/base/allocator.h"

namespace quiver::engine::cuda {

enum class Memory {
  kDevice,  // cudaMalloc on the current device
  kPinned,  // cudaMallocHost: page-locked host memory, the source or destination of async copies
};

// `bytes` of `kMemory`, freed once by its owner.
template <Memory kMemory>
class OwnedMemory {
 public:
  OwnedMemory() = default;
  static absl::StatusOr<OwnedMemory> Allocate(size_t bytes);
  ~OwnedMemory() { Reset(); }
  OwnedMemory(OwnedMemory&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  OwnedMemory& operator=(OwnedMemory&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  void Reset();

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = OwnedMemory<Memory::kDevice>;
using PinnedBuffer = OwnedMemory<Memory::kPinned>;

// A non-blocking stream (does not synchronize with the legacy default stream).
class Stream {
 public:
  Stream() = default;
  static absl::StatusOr<Stream> Create();
  ~Stream() { Reset(); }
  Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  absl::Status Synchronize() const;
  void Reset();

 private:
  cudaStream_t stream_ = nullptr;
};

// An event. kBlockingSync events make Synchronize() sleep instead of spinning a core (the
// tokenizer and the scheduler share the host's cores with the thread that waits); kTiming events
// measure elapsed time between two records.
class Event {
 public:
  enum class Kind { kBlockingSync, kTiming };
  Event() = default;
  static absl::StatusOr<Event> Create(Kind kind = Kind::kBlockingSync);
  ~Event() { Reset(); }
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  absl::Status Record(cudaStream_t stream) const;
  // True once all work recorded before it completed; an error of that work is returned.
  absl::StatusOr<bool> Query() const;
  absl::Status Synchronize() const;
  // Milliseconds from `start` to this event (both kTiming and completed).
  absl::StatusOr<float> MillisecondsSince(const Event& start) const;
  void Reset();

 private:
  cudaEvent_t event_ = nullptr;
};

// The engine's Allocator for Device::kCuda (base/allocator.h): cudaMalloc on the current device,
// synchronous copies. UNAVAILABLE, naming the reason (no driver, no device), where CUDA cannot
// run; created once.
absl::StatusOr<Allocator*> CudaDeviceAllocator();

}  // namespace quiver::engine::cuda
