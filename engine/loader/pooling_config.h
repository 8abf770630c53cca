// sentence-transformers' view of a model folder: modules.json, the Pooling module's config.json
// and sentence_bert_config.json. Plain values; copy freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace quiver::engine {

enum class PoolingMode { kCls, kMean, kLastToken, kMax, kMeanSqrtLen, kWeightedMean };
std::string_view PoolingModeName(PoolingMode mode);
// A mode by sentence-transformers' name (cls, mean, lasttoken, max, mean_sqrt_len_tokens,
// weightedmean) or TEI's last-token; nullopt for anything else.
std::optional<PoolingMode> PoolingModeFromName(std::string_view name);

// A sentence-transformers Dense module: out = activation(W · pooled + b), after pooling and
// before Normalize. Weights: `weights_path` (its folder's model.safetensors), "linear.weight"
// [out_features, in_features] and, with bias, "linear.bias".
enum class DenseActivation { kIdentity, kTanh, kRelu, kGelu, kSigmoid };
struct DenseModule {
  std::string weights_path;
  int64_t in_features = 0, out_features = 0;
  bool bias = true;
  DenseActivation activation = DenseActivation::kTanh;  // sentence-transformers' default
  std::string activation_name;                          // as the config names it
};

// sentence-transformers' view of the model, or the family's default when the folder has none.
struct PoolingConfig {
  // One mode, or several whose rows are concatenated in this order (each hidden_size wide).
  std::vector<PoolingMode> modes = {PoolingMode::kMean};
  // The modes' names joined by '+' ("mean", "cls+max").
  std::string ModesName() const;
  // The Pooling module's include_prompt: false leaves each sequence's prompt tokens
  // (RaggedBatch::prompt_lengths) out of the pooled range, as sentence-transformers does.
  bool include_prompt = true;
  bool normalize = false;
  // sentence_bert_config.json's max_seq_length, else tokenizer_config.json's model_max_length
  // (where sentence-transformers takes it); consumers cap it at the engine's position limit.
  std::optional<int64_t> max_seq_length;
  bool from_sentence_transformers = false;
  std::vector<DenseModule> dense;  // in modules.json's order
  // sentence-transformers' SpladePooling "log1p_relu" activation: log(1 + log(1 + ReLU(x)))
  // instead of log(1 + ReLU(x)) (Opensearch's SPLADE models).
  bool splade_double_log = false;
};

// Reads modules.json, <pooling dir>/config.json and sentence_bert_config.json under `dir` when
// present; otherwise `default_mode` (the architecture's, ModelInfo::default_pooling) without
// normalization.
absl::StatusOr<PoolingConfig> LoadPoolingConfig(const std::string& dir, PoolingMode default_mode);

}  // namespace quiver::engine
