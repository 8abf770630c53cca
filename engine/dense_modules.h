// sentence-transformers Dense modules (loader/pooling_config.h, DenseModule) applied to pooled
// rows: out = activation(W · row + b), one module after another, before Normalize. They run on
// the host after the device's pooled rows come back (a [rows, in] x [in, out] GEMM through the
// CPU ops layer: a small fraction of the model's work, whatever the device).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/base/exec_context.h"
#include "engine/loader/pooling_config.h"
#include "engine/loader/safetensors.h"
#include "engine/loader/weight_loader.h"
#include "engine/ops/linear.h"

namespace quiver::engine {

class DenseModules {
 public:
  DenseModules() = default;
  DenseModules(DenseModules&&) = default;
  DenseModules& operator=(DenseModules&&) = default;

  // Each module's weights, checked (kCheck: names and shapes only) or prepared for the CPU;
  // `hidden` is the pooled width the first module must take. Errors name the file and tensor.
  static absl::StatusOr<DenseModules> Load(const std::vector<DenseModule>& modules, int64_t hidden,
                                           WeightLoader::Mode mode);

  bool empty() const { return layers_.empty(); }
  // The width of the rows after the last module (`hidden` without any).
  int64_t out_features(int64_t hidden) const {
    return layers_.empty() ? hidden : layers_.back().config.out_features;
  }
  // rows f32 [n, in] through every module; returns the last module's rows (in one of `a`, `b`).
  const float* Apply(const ExecContext& cpu, const float* rows, int64_t n, std::vector<float>& a,
                     std::vector<float>& b) const;

 private:
  struct Layer {
    DenseModule config;
    std::unique_ptr<WeightStore> store;
    std::unique_ptr<WeightLoader> loader;
    ops::LinearWeights weights;
  };
  std::vector<Layer> layers_;
};

}  // namespace quiver::engine
