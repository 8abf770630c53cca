#include "engine/dense_modules.h"

#include <cmath>

#include "common/status.h"
#include "common/strings.h"
#include "engine/ops/activation.h"

namespace quiver::engine {

absl::StatusOr<DenseModules> DenseModules::Load(const std::vector<DenseModule>& modules,
                                                int64_t hidden, WeightLoader::Mode mode) {
  DenseModules out;
  int64_t width = hidden;
  for (const DenseModule& m : modules) {
    if (m.in_features != width) {
      return absl::InvalidArgumentError(StrCat(m.weights_path, ": Dense in_features ",
                                               m.in_features, " does not match the ", width,
                                               " values per row it follows"));
    }
    Layer l;
    l.config = m;
    QUIVER_ASSIGN_OR_RETURN(WeightStore store, WeightStore::OpenFile(m.weights_path));
    l.store = std::make_unique<WeightStore>(std::move(store));
    l.loader = std::make_unique<WeightLoader>(*l.store, "Dense", "", mode, Device::kCpu);
    l.weights = l.loader->Linear("linear", m.out_features, m.in_features, m.bias);
    if (!l.loader->status().ok()) return WithContext(l.loader->status(), m.weights_path);
    width = m.out_features;
    out.layers_.push_back(std::move(l));
  }
  return out;
}

const float* DenseModules::Apply(const ExecContext& cpu, const float* rows, int64_t n,
                                 std::vector<float>& a, std::vector<float>& b) const {
  const float* in = rows;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    std::vector<float>& out = i % 2 == 0 ? a : b;
    out.resize(static_cast<size_t>(n * l.config.out_features));
    const Tensor x(in, DType::kF32, Device::kCpu, {n, l.config.in_features});
    const Tensor y(out.data(), DType::kF32, Device::kCpu, {n, l.config.out_features});
    ops::Linear(cpu, x, l.weights, y);
    switch (l.config.activation) {
      case DenseActivation::kIdentity:
        break;
      case DenseActivation::kTanh:
        ops::Tanh(cpu, y);
        break;
      case DenseActivation::kRelu:
        ops::Relu(cpu, y);
        break;
      case DenseActivation::kGelu:
        ops::Gelu(cpu, y, ops::GeluForm::kErf);
        break;
      case DenseActivation::kSigmoid:
        for (float& v : out) v = 1.0f / (1.0f + std::exp(-v));
        break;
    }
    in = out.data();
  }
  return in;
}

}  // namespace quiver::engine
