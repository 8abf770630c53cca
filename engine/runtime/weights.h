// The f32 view of a checkpoint's weights. F32 tensors are read in place from the memory map;
// F16 and BF16 are widened once at load (the CPU engine computes in f32). Fused copies (QKV,
// gate/up) are made here too, so the forward pass runs one GEMM where transformers runs several.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/model_folder.h"

namespace quiver::engine {

class Weights {
 public:
  // Every resolved weight of `folder` as f32. `folder` must outlive this object.
  static absl::StatusOr<Weights> Load(const ModelFolder& folder);

  // The weight with the declared name (see weight_spec.h); never null for a declared name.
  const float* Get(const std::string& name) const;
  // Rows of weights stacked into one new [sum rows, cols] matrix (e.g. Q, K, V -> QKV).
  const float* Concat(const std::string& key, const std::vector<std::string>& names);
  size_t owned_bytes() const;

 private:
  absl::flat_hash_map<std::string, const float*> views_;
  std::vector<std::unique_ptr<std::vector<float>>> owned_;
  const ModelFolder* folder_ = nullptr;
};

}  // namespace quiver::engine
