#include "engine/runtime/weights.h"

#include <cstring>

#include "common/strings.h"

namespace quiver::engine {
namespace {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3FF;
      bits = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1F) {
    bits = sign | 0x7F800000 | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace

absl::StatusOr<Weights> Weights::Load(const ModelFolder& folder) {
  Weights w;
  w.folder_ = &folder;
  for (const auto& [name, info] : folder.resolved) {
    const int64_t n = info->num_elements();
    const bool aligned = reinterpret_cast<uintptr_t>(info->data) % alignof(float) == 0;
    if (info->dtype == DType::kF32 && aligned) {
      w.views_[name] = reinterpret_cast<const float*>(info->data);
      continue;
    }
    auto buffer = std::make_unique<std::vector<float>>(static_cast<size_t>(n));
    float* out = buffer->data();
    switch (info->dtype) {
      case DType::kF32:
        std::memcpy(out, info->data, static_cast<size_t>(n) * sizeof(float));
        break;
      case DType::kF16:
      case DType::kBF16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t raw;
          std::memcpy(&raw, info->data + 2 * i, 2);
          out[i] = info->dtype == DType::kF16 ? HalfToFloat(raw) : Bf16ToFloat(raw);
        }
        break;
      default:
        return absl::InvalidArgumentError(
            StrCat("weight '", name, "': dtype ", DTypeName(info->dtype), " is not a float type"));
    }
    w.views_[name] = out;
    w.owned_.push_back(std::move(buffer));
  }
  return w;
}

const float* Weights::Get(const std::string& name) const {
  auto it = views_.find(name);
  return it == views_.end() ? nullptr : it->second;
}

const float* Weights::Concat(const std::string& key, const std::vector<std::string>& names) {
  auto buffer = std::make_unique<std::vector<float>>();
  for (const std::string& name : names) {
    const TensorInfo* info = folder_->resolved.at(name);
    const float* src = Get(name);
    buffer->insert(buffer->end(), src, src + info->num_elements());
  }
  const float* data = buffer->data();
  views_[key] = data;
  owned_.push_back(std::move(buffer));
  return data;
}

size_t Weights::owned_bytes() const {
  size_t total = 0;
  for (const auto& b : owned_) total += b->size() * sizeof(float);
  return total;
}

}  // namespace quiver::engine
