// Every weight a model reads, declared by name and shape from its config before anything runs.
// A checkpoint is accepted only when each declared weight is present with that shape and a
// float dtype (F32/F16/BF16); the first mismatch fails the load naming the tensor and both
// shapes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/loader/safetensors.h"
#include "engine/model_config.h"

namespace quiver::engine {

struct WeightDecl {
  std::string name;  // without the checkpoint's module prefix ("bert.", "model.")
  std::vector<int64_t> shape;
};

// The weights `config`'s architecture reads, in load order. Names follow transformers'.
std::vector<WeightDecl> DeclareWeights(const ModelConfig& config);

// Declared name -> tensor in `store`. The checkpoint may or may not carry the architecture's
// module prefix ("bert.", "roberta.", "model."); both spellings are accepted.
using ResolvedWeights = std::map<std::string, const TensorInfo*>;
absl::StatusOr<ResolvedWeights> ResolveWeights(const ModelConfig& config,
                                               const WeightStore& store);

}  // namespace quiver::engine
