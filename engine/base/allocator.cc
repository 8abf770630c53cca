#include "engine/base/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#include "common/strings.h"

namespace quiver::engine {

#ifdef QUIVER_WITH_CUDA
namespace cuda {
// kernels/cuda/memory.cc: base cannot include the kernels level, so the one CUDA allocator is
// declared here, as kernels/device.cc declares QueryCudaDevices.
absl::StatusOr<Allocator*> CudaDeviceAllocator();
}  // namespace cuda
#endif

namespace {

constexpr size_t kAlignment = 64;  // a cache line; also what AVX-512 loads like

class HostAllocator final : public Allocator {
 public:
  Device device() const override { return Device::kCpu; }
  void* Allocate(size_t bytes) override {
    // At least one line, so that even an empty buffer has an address (a view of it is not empty).
    const size_t rounded = std::max<size_t>(1, (bytes + kAlignment - 1) / kAlignment) * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void Free(void* data, size_t /*bytes*/) override {
    if (data == nullptr) return;
    std::free(data);
  }
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
};

}  // namespace

Allocator& CpuAllocator() {
  static HostAllocator* allocator = new HostAllocator();  // never destroyed: outlives all buffers
  return *allocator;
}

absl::StatusOr<Allocator*> AllocatorFor(Device device) {
  switch (device) {
    case Device::kCpu:
      return &CpuAllocator();
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      return cuda::CudaDeviceAllocator();
#else
      return absl::UnavailableError("no CUDA allocator: this build has no CUDA backend");
#endif
  }
  return absl::InvalidArgumentError("unknown device");
}

Buffer::Buffer(Allocator& allocator, size_t bytes)
    : allocator_(&allocator), data_(allocator.Allocate(bytes)), bytes_(bytes) {}

Buffer::~Buffer() {
  if (allocator_ != nullptr) allocator_->Free(data_, bytes_);
}

Buffer::Buffer(Buffer&& other) noexcept
    : allocator_(std::exchange(other.allocator_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (allocator_ != nullptr) allocator_->Free(data_, bytes_);
    allocator_ = std::exchange(other.allocator_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Tensor Buffer::View(DType dtype, std::initializer_list<int64_t> shape) const {
  Tensor t(data_, dtype, allocator_ ? allocator_->device() : Device::kCpu, shape);
  if (static_cast<size_t>(t.numel()) * DTypeSizeBytes(dtype) > bytes_) {
    throw std::invalid_argument(
        StrCat("Buffer::View: ", t.Describe(), " does not fit in ", bytes_, " bytes"));
  }
  return t;
}

}  // namespace quiver::engine
