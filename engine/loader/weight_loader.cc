#include "engine/loader/weight_loader.h"

#include <cstring>
#include <utility>

#include "common/strings.h"
#include "engine/base/half.h"

namespace quiver::engine {

WeightLoader::WeightLoader(const WeightStore& store, std::string architecture,
                           std::string module_prefix, Mode mode, Device device)
    : store_(store),
      architecture_(std::move(architecture)),
      prefix_(std::move(module_prefix)),
      mode_(mode),
      device_(device) {
  if (mode_ == Mode::kPrepare) {
    absl::StatusOr<Allocator*> allocator = AllocatorFor(device_);
    if (allocator.ok()) {
      allocator_ = *allocator;
    } else {
      status_ = allocator.status();
    }
  }
}

const TensorInfo* WeightLoader::Find(const std::string& declared, const std::vector<int64_t>& shape,
                                     Scope scope) {
  if (!status_.ok()) return nullptr;
  if (scope == Scope::kBase && prefixed_ < 0) {
    prefixed_ = store_.Find(declared) == nullptr && store_.Find(prefix_ + declared) != nullptr;
  }
  const std::string name =
      (scope == Scope::kBase && prefixed_ == 1) ? prefix_ + declared : declared;
  const TensorInfo* info = store_.Find(name);
  if (info == nullptr) {
    status_ = absl::NotFoundError(StrCat("weight '", name, "' ", ShapeString(shape), " that ",
                                         architecture_, " needs is not in the checkpoint"));
    return nullptr;
  }
  if (info->shape != shape) {
    status_ = absl::InvalidArgumentError(StrCat("weight '", name, "' has shape ",
                                                ShapeString(info->shape), " in ", info->file,
                                                " but the config needs ", ShapeString(shape)));
    return nullptr;
  }
  if (info->dtype != DType::kF32 && info->dtype != DType::kF16 && info->dtype != DType::kBF16) {
    status_ = absl::InvalidArgumentError(StrCat(
        "weight '", name, "' has dtype ", DTypeName(info->dtype), "; expected F32, F16 or BF16"));
    return nullptr;
  }
  names_.push_back(name);
  return info;
}

const float* WeightLoader::F32(const TensorInfo& info, std::vector<float>& scratch) const {
  const int64_t n = info.num_elements();
  const bool aligned = reinterpret_cast<uintptr_t>(info.data) % alignof(float) == 0;
  if (info.dtype == DType::kF32 && aligned) return reinterpret_cast<const float*>(info.data);
  scratch.resize(static_cast<size_t>(n));
  if (info.dtype == DType::kF32) {
    std::memcpy(scratch.data(), info.data, static_cast<size_t>(n) * sizeof(float));
    return scratch.data();
  }
  for (int64_t i = 0; i < n; ++i) {
    uint16_t raw;
    std::memcpy(&raw, info.data + 2 * i, 2);
    scratch[static_cast<size_t>(i)] =
        info.dtype == DType::kF16 ? HalfToFloat(raw) : Bf16ToFloat(raw);
  }
  return scratch.data();
}

Tensor WeightLoader::Own(const float* values, std::initializer_list<int64_t> shape) {
  Tensor view(values, DType::kF32, Device::kCpu, shape);
  const size_t bytes = static_cast<size_t>(view.numel()) * sizeof(float);
  owned_.emplace_back(*allocator_, bytes);
  allocator_->CopyFromHost(owned_.back().data(), values, bytes);
  return owned_.back().View(DType::kF32, shape);
}

Tensor WeightLoader::Get(const std::string& name, std::initializer_list<int64_t> shape,
                         Scope scope) {
  const TensorInfo* info = Find(name, shape, scope);
  if (info == nullptr || mode_ == Mode::kCheck) return {};
  std::vector<float> scratch;
  const float* values = F32(*info, scratch);
  // F32 in the map stays there on the CPU: the map lives as long as the store.
  if (device_ == Device::kCpu && scratch.empty()) {
    return Tensor(values, DType::kF32, device_, shape);
  }
  return Own(values, shape);
}

ops::LinearWeights WeightLoader::Linear(const std::string& name, int64_t out, int64_t in, bool bias,
                                        Scope scope, bool task_head, const std::string& bias_name) {
  ops::LinearWeights none;
  none.out_features = out;
  none.in_features = in;
  none.device = device_;
  const TensorInfo* info = Find(name + ".weight", {out, in}, scope);
  Tensor b;
  if (bias) {
    b = bias_name.empty() ? Get(name + ".bias", {out}, scope) : Get(bias_name, {out}, Scope::kHead);
  }
  if (info == nullptr || mode_ == Mode::kCheck || !status_.ok()) return none;
  std::vector<float> scratch;  // the widened weight lives only until it is packed
  const float* values = F32(*info, scratch);
  return ops::PrepareLinear(
      device_, Tensor(values, DType::kF32, Device::kCpu, {out, in}), b,
      scope == Scope::kHead || task_head ? ops::WeightPrecision::kF32 : precision_);
}

ops::LinearWeights WeightLoader::FusedLinear(const std::vector<std::string>& names,
                                             const std::vector<int64_t>& outs, int64_t in,
                                             bool bias) {
  int64_t total = 0;
  for (int64_t rows : outs) total += rows;
  ops::LinearWeights none;
  none.out_features = total;
  none.in_features = in;
  none.device = device_;
  std::vector<const TensorInfo*> weights, biases;
  for (size_t i = 0; i < names.size(); ++i) {
    weights.push_back(Find(names[i] + ".weight", {outs[i], in}, Scope::kBase));
    if (bias) biases.push_back(Find(names[i] + ".bias", {outs[i]}, Scope::kBase));
  }
  if (mode_ == Mode::kCheck || !status_.ok()) return none;
  std::vector<float> stacked, stacked_bias, scratch;
  for (const TensorInfo* info : weights) {
    const float* values = F32(*info, scratch);
    stacked.insert(stacked.end(), values, values + info->num_elements());
  }
  Tensor b;
  if (bias) {
    for (const TensorInfo* info : biases) {
      const float* values = F32(*info, scratch);
      stacked_bias.insert(stacked_bias.end(), values, values + info->num_elements());
    }
    b = Own(stacked_bias.data(), {total});
  }
  return ops::PrepareLinear(device_, Tensor(stacked.data(), DType::kF32, Device::kCpu, {total, in}),
                            b, precision_);
}

}  // namespace quiver::engine
