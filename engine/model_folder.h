// A Hugging Face model folder, loaded and checked: config, pooling, tokenizer path, and the
// memory-mapped weights resolved against the architecture's declaration. Everything a model
// needs is validated here, so a bad folder fails at start-up with a message naming the file,
// field or tensor, never at the first request.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/loader/safetensors.h"
#include "engine/model_config.h"
#include "engine/models/weight_spec.h"

namespace quiver::engine {

struct ModelFolder {
  std::string dir;
  std::string tokenizer_path;  // dir/tokenizer.json
  ModelConfig config;
  PoolingConfig pooling;
  WeightStore weights;         // owns the maps that `resolved` points into
  ResolvedWeights resolved;

  ModelFolder() = default;
  ModelFolder(ModelFolder&&) = default;
  ModelFolder& operator=(ModelFolder&&) = default;
};

absl::StatusOr<ModelFolder> LoadModelFolder(const std::string& dir);

}  // namespace quiver::engine
