#include "engine/kernels/cuda/memory.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include "engine/kernels/cuda/status.h"

namespace quiver::engine::cuda {

template <Memory kMemory>
absl::StatusOr<OwnedMemory<kMemory>> OwnedMemory<kMemory>::Allocate(size_t bytes) {
  OwnedMemory b;
  // At least one byte, so that an empty buffer still has an address.
  const size_t n = std::max<size_t>(bytes, 1);
  if constexpr (kMemory == Memory::kDevice) {
    QUIVER_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.data_, n));
  } else {
    QUIVER_CUDA_RETURN_IF_ERROR(cudaMallocHost(&b.data_, n));
  }
  b.bytes_ = bytes;
  return b;
}

template <Memory kMemory>
void OwnedMemory<kMemory>::Reset() {
  if (data_ != nullptr) {
    if constexpr (kMemory == Memory::kDevice) {
      cudaFree(data_);
    } else {
      cudaFreeHost(data_);
    }
  }
  data_ = nullptr;
  bytes_ = 0;
}

template class OwnedMemory<Memory::kDevice>;
template class OwnedMemory<Memory::kPinned>;

absl::StatusOr<Stream> Stream::Create() {
  Stream s;
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  return s;
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    Reset();
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}

absl::Status Stream::Synchronize() const {
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void Stream::Reset() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

absl::StatusOr<Event> Event::Create(Kind kind) {
  Event e;
  const unsigned flags = kind == Kind::kTiming ? cudaEventBlockingSync
                                               : (cudaEventDisableTiming | cudaEventBlockingSync);
  QUIVER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e.event_, flags));
  return e;
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    Reset();
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

absl::Status Event::Record(cudaStream_t stream) const {
  return CudaStatus(cudaEventRecord(event_, stream), "cudaEventRecord");
}

absl::StatusOr<bool> Event::Query() const {
  const cudaError_t e = cudaEventQuery(event_);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  return CudaStatus(e, "cudaEventQuery");
}

absl::Status Event::Synchronize() const {
  return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

absl::StatusOr<float> Event::MillisecondsSince(const Event& start) const {
  float ms = 0;
  QUIVER_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

void Event::Reset() {
  if (event_ != nullptr) cudaEventDestroy(event_);
  event_ = nullptr;
}

namespace {

class DeviceAllocator final : public Allocator {
 public:
  Device device() const override { return Device::kCuda; }
  void* Allocate(size_t bytes) override {
    void* p = nullptr;
    // 256-byte aligned by cudaMalloc; at least one byte so that an empty buffer has an address.
    if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) {
      cudaGetLastError();
      throw std::bad_alloc();
    }
    return p;
  }
  void Free(void* data, size_t /*bytes*/) override {
    if (data != nullptr) cudaFree(data);
  }
  // Synchronous as the host's memcpy is: the copy waits for all work already on the device
  // (kernels on non-blocking streams included) and is complete when it returns. Load time and
  // tests only; the serving path copies asynchronously through pinned slot buffers.
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    Check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    Check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  }

 private:
  // The Allocator interface has no Status: a failed copy is a broken device, reported as an
  // exception the engine's compute thread turns into an INTERNAL answer.
  static void Check(cudaError_t e, const char* call) {
    const absl::Status s = CudaStatus(e, call);
    if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  }
};

}  // namespace

absl::StatusOr<Allocator*> CudaDeviceAllocator() {
  static absl::Status* status = nullptr;
  static Allocator* allocator = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      status = new absl::Status(
          absl::UnavailableError(std::string("no CUDA device usable: ") + cudaGetErrorString(e)));
    } else if (count == 0) {
      status = new absl::Status(absl::UnavailableError("no CUDA device usable: none found"));
    } else {
      allocator = new DeviceAllocator();  // never destroyed: outlives all buffers
    }
  });
  if (allocator == nullptr) return *status;
  return allocator;
}

}  // namespace quiver::engine::cuda
