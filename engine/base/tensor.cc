#include "engine/base/tensor.h"

#include <stdexcept>

#include "common/strings.h"

namespace quiver::engine {

std::string_view DeviceName(Device device) {
  switch (device) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
  }
  return "?";
}

Tensor::Tensor(const void* data, DType dtype, Device device, std::initializer_list<int64_t> shape)
    : data_(const_cast<void*>(data)),
      dtype_(dtype),
      device_(device),
      rank_(static_cast<int>(shape.size())) {
  if (shape.size() > kMaxRank) throw std::invalid_argument("Tensor: rank above 4");
  size_t i = 0;
  for (int64_t d : shape) shape_[i++] = d;
  row_stride_ = row_size();
}

int64_t Tensor::numel() const {
  if (rank_ == 0) return data_ ? 1 : 0;
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= shape_[static_cast<size_t>(i)];
  return n;
}

int64_t Tensor::row_size() const {
  int64_t n = 1;
  for (int i = 1; i < rank_; ++i) n *= shape_[static_cast<size_t>(i)];
  return n;
}

Tensor Tensor::Rows(int64_t begin, int64_t end) const {
  if (rank_ < 1 || begin < 0 || end < begin || end > shape_[0]) {
    throw std::invalid_argument(StrCat("Tensor::Rows(", begin, ", ", end, ") of ", Describe()));
  }
  Tensor t = *this;
  t.data_ =
      static_cast<char*>(data_) + static_cast<size_t>(begin * row_stride_) * DTypeSizeBytes(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::Columns(int64_t begin, int64_t end) const {
  if (rank_ != 2 || begin < 0 || end < begin || end > shape_[1]) {
    throw std::invalid_argument(StrCat("Tensor::Columns(", begin, ", ", end, ") of ", Describe()));
  }
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin) * DTypeSizeBytes(dtype_);
  t.shape_[1] = end - begin;
  return t;
}

Tensor Tensor::Reshape(std::initializer_list<int64_t> shape) const {
  Tensor t(data_, dtype_, device_, shape);
  if (!contiguous() || t.numel() != numel()) {
    throw std::invalid_argument(StrCat("Tensor::Reshape of ", Describe(), " to ", t.Describe()));
  }
  return t;
}

std::string Tensor::Describe() const {
  std::string dims;
  for (int i = 0; i < rank_; ++i) {
    dims += (i ? ", " : "") + std::to_string(shape_[static_cast<size_t>(i)]);
  }
  std::string out = StrCat(DTypeShortName(dtype_), " [", dims, "] ", DeviceName(device_));
  if (!contiguous()) out += StrCat(" stride ", row_stride_);
  return out;
}

}  // namespace quiver::engine
