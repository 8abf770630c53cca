// sentence-transformers' view of a model folder: modules.json, the Pooling module's config.json
// and sentence_bert_config.json. Plain values; copy freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace quiver::engine {

enum class PoolingMode { kCls, kMean, kLastToken, kMax };
std::string_view PoolingModeName(PoolingMode mode);

// sentence-transformers' view of the model, or the family's default when the folder has none.
struct PoolingConfig {
  PoolingMode mode = PoolingMode::kMean;
  bool normalize = false;
  // sentence_bert_config.json's max_seq_length, else tokenizer_config.json's model_max_length
  // (where sentence-transformers takes it); consumers cap it at the engine's position limit.
  std::optional<int64_t> max_seq_length;
  bool from_sentence_transformers = false;
};

// Reads modules.json, <pooling dir>/config.json and sentence_bert_config.json under `dir` when
// present; otherwise `default_mode` (the architecture's, ModelInfo::default_pooling) without
// normalization.
absl::StatusOr<PoolingConfig> LoadPoolingConfig(const std::string& dir, PoolingMode default_mode);

}  // namespace quiver::engine
