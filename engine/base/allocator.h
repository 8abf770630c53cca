// Memory for tensors, per device. A Buffer owns one allocation and frees it through the allocator
// that made it; tensors are views over buffers (base/tensor.h).
//
// Thread-safety: allocators may be called from any thread. A Buffer is moved, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "absl/status/statusor.h"
#include "engine/base/tensor.h"

namespace quiver::engine {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // `bytes` of device memory (never null, also for 0), 64-byte aligned; throws std::bad_alloc
  // when there is none.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* data, size_t bytes) = 0;
  // Copies between host memory and this device's memory (plain memcpy on the CPU).
  virtual void CopyFromHost(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void CopyToHost(void* host_dst, const void* device_src, size_t bytes) = 0;
};

// The host allocator; lives for the whole process.
Allocator& CpuAllocator();
// The allocator of `device`: UNAVAILABLE naming the reason when this build or host has none.
absl::StatusOr<Allocator*> AllocatorFor(Device device);

class Buffer {
 public:
  Buffer() = default;
  Buffer(Allocator& allocator, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // A contiguous view of the buffer's start; the shape must fit in bytes().
  Tensor View(DType dtype, std::initializer_list<int64_t> shape) const;

 private:
  Allocator* allocator_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace quiver::engine
