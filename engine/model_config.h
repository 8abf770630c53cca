// Typed model configuration read from a Hugging Face folder: config.json (architecture and
// sizes) and the sentence-transformers files (modules.json, 1_Pooling/config.json,
// sentence_bert_config.json). Plain values; copy freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "common/json.h"

namespace quiver::engine {

// What the checkpoint's top module is; picks the weight layout and the output head.
enum class Architecture {
  kBertModel,                    // BERT/MiniLM/BGE/E5 encoder, pooled by sentence-transformers
  kBertForSequenceClassification,  // cross-encoder: pooler + classifier
  kRobertaModel,                 // RoBERTa/XLM-R encoder (positions offset by pad_token_id + 1)
  kRobertaForSequenceClassification,
  kQwen3Model,                   // Qwen3 decoder stack without LM head (embedding models)
  kQwen3ForCausalLM,             // with LM head (rerankers read two of its rows)
};

std::string_view ArchitectureName(Architecture arch);

struct BertConfig {
  int64_t vocab_size = 0;
  int64_t hidden = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;
  int64_t pad_token_id = 0;
  int64_t position_offset = 0;  // 0 for BERT, pad_token_id + 1 for RoBERTa/XLM-R
  int64_t num_labels = 0;       // classification heads only
  double layer_norm_eps = 1e-12;
  std::string hidden_act;       // "gelu" (erf) or "gelu_new"/"gelu_pytorch_tanh" (tanh)
};

struct Qwen3Config {
  int64_t vocab_size = 0;
  int64_t hidden = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  bool attention_bias = false;
  bool tie_word_embeddings = false;
  bool bidirectional = false;  // config "use_bidirectional_attention" or "is_causal": false
};

struct ModelConfig {
  std::string architecture_name;  // as written in config.json
  Architecture architecture = Architecture::kBertModel;
  std::variant<BertConfig, Qwen3Config> family;

  bool is_bert() const { return std::holds_alternative<BertConfig>(family); }
  bool is_qwen3() const { return std::holds_alternative<Qwen3Config>(family); }
  const BertConfig& bert() const { return std::get<BertConfig>(family); }
  const Qwen3Config& qwen3() const { return std::get<Qwen3Config>(family); }
  int64_t hidden() const;
  // Longest input the position table allows, in tokens.
  int64_t max_input_tokens() const;
};

// Parses config.json's text. An unknown architecture is INVALID_ARGUMENT naming it and the ones
// supported; a missing or mistyped field names the field.
absl::StatusOr<ModelConfig> ParseModelConfig(const JsonValue& config);

enum class PoolingMode { kCls, kMean, kLastToken };
std::string_view PoolingModeName(PoolingMode mode);

// sentence-transformers' view of the model, or the family's default when the folder has none.
struct PoolingConfig {
  PoolingMode mode = PoolingMode::kMean;
  bool normalize = false;
  std::optional<int64_t> max_seq_length;  // sentence_bert_config.json
  bool from_sentence_transformers = false;
};

// Reads modules.json, <pooling dir>/config.json and sentence_bert_config.json under `dir` when
// present; otherwise CLS pooling for BERT, last-token for causal Qwen3, mean for bidirectional.
absl::StatusOr<PoolingConfig> LoadPoolingConfig(const std::string& dir, const ModelConfig& model);

}  // namespace quiver::engine
