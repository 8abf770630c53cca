// Tensors are views: a pointer, a shape, a row stride, an element type and the device the memory
// lives on. A Tensor never owns memory (buffers come from an Allocator, base/allocator.h) and is
// cheap to copy; whoever made the buffer keeps it alive for as long as views of it are used.
//
// Layout: row-major. Dimensions after the first are contiguous; consecutive rows (dimension 0)
// are row_stride() elements apart, which lets a view select columns of a wider matrix (q, k and
// v inside one fused qkv projection) without a copy. Shapes are written in the axis vocabulary
// of docs/style.md: `f32 [num_tokens, hidden]`.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "engine/base/dtype.h"

namespace quiver::engine {

enum class Device { kCpu, kCuda };
std::string_view DeviceName(Device device);  // "cpu", "cuda"

class Tensor {
 public:
  static constexpr int kMaxRank = 4;

  Tensor() = default;
  // A contiguous tensor of `shape` at `data`.
  Tensor(const void* data, DType dtype, Device device, std::initializer_list<int64_t> shape);

  bool empty() const { return data_ == nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  // Elements between the starts of consecutive rows of dimension 0.
  int64_t row_stride() const { return row_stride_; }
  // Elements in one row (the product of the dimensions after the first).
  int64_t row_size() const;
  bool contiguous() const { return rank_ <= 1 || row_stride_ == row_size(); }

  // Typed access; the element type is not checked here (ops check it once, see ops/check.h).
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }
  float* f32() const { return data<float>(); }
  int32_t* i32() const { return data<int32_t>(); }

  // Rows [begin, end) of dimension 0: same row stride.
  Tensor Rows(int64_t begin, int64_t end) const;
  // Columns [begin, end) of a rank-2 tensor: same rows and row stride.
  Tensor Columns(int64_t begin, int64_t end) const;
  // The same memory seen with another shape (contiguous tensors only; numel unchanged).
  Tensor Reshape(std::initializer_list<int64_t> shape) const;

  // "f32 [7, 36] cpu" (with "stride 108" when not contiguous), for error messages.
  std::string Describe() const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  int rank_ = 0;
  std::array<int64_t, kMaxRank> shape_{};
  int64_t row_stride_ = 0;
};

}  // namespace quiver::engine
