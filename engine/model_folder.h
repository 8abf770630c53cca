// A Hugging Face model folder, loaded and checked: config.json, the architecture that serves it
// (models/registry.h), pooling, tokenizer path, and the memory-mapped weights checked against the
// architecture's declarations (WeightLoader in check mode: names, shapes, dtypes; nothing is
// read). Everything a model needs is validated here, so a bad folder fails at start-up with a
// message naming the file, field or tensor, never at the first request.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "engine/loader/pooling_config.h"
#include "engine/loader/safetensors.h"
#include "engine/models/registry.h"

namespace quiver::engine {

struct ModelFolder {
  std::string dir;
  std::string tokenizer_path;                // dir/tokenizer.json
  JsonValue config;                          // config.json as read
  std::string architecture;                  // config.json's "architectures"[0]
  const ArchitectureEntry* entry = nullptr;  // the model file that serves it
  ModelInfo info;                            // what the architecture read from the config
  PoolingConfig pooling;
  WeightStore weights;                    // owns the maps
  std::vector<std::string> weight_names;  // the checkpoint's tensors the model reads

  ModelFolder() = default;
  ModelFolder(ModelFolder&&) = default;
  ModelFolder& operator=(ModelFolder&&) = default;
};

absl::StatusOr<ModelFolder> LoadModelFolder(const std::string& dir);

}  // namespace quiver::engine
