#include "engine/model_config.h"

#include <algorithm>
#include <filesystem>

#include "common/strings.h"
#include "common/file.h"
#include "common/status.h"

namespace quiver::engine {
namespace {

struct ArchitectureEntry {
  std::string_view name;
  Architecture arch;
};

constexpr ArchitectureEntry kArchitectures[] = {
    {"BertModel", Architecture::kBertModel},
    {"BertForSequenceClassification", Architecture::kBertForSequenceClassification},
    {"RobertaModel", Architecture::kRobertaModel},
    {"XLMRobertaModel", Architecture::kRobertaModel},
    {"RobertaForSequenceClassification", Architecture::kRobertaForSequenceClassification},
    {"XLMRobertaForSequenceClassification", Architecture::kRobertaForSequenceClassification},
    {"Qwen3Model", Architecture::kQwen3Model},
    {"Qwen3ForCausalLM", Architecture::kQwen3ForCausalLM},
};

std::string SupportedArchitectures() {
  std::vector<std::string_view> names;
  for (const ArchitectureEntry& entry : kArchitectures) names.push_back(entry.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

bool IsRoberta(Architecture arch) {
  return arch == Architecture::kRobertaModel ||
         arch == Architecture::kRobertaForSequenceClassification;
}

absl::Status Positive(std::string_view field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("field '", field, "' must be positive, got ", value));
}

absl::StatusOr<BertConfig> ParseBert(const JsonValue& json, Architecture arch) {
  BertConfig c;
  QUIVER_ASSIGN_OR_RETURN(c.vocab_size, JsonInt(json, "vocab_size"));
  QUIVER_ASSIGN_OR_RETURN(c.hidden, JsonInt(json, "hidden_size"));
  QUIVER_ASSIGN_OR_RETURN(c.num_layers, JsonInt(json, "num_hidden_layers"));
  QUIVER_ASSIGN_OR_RETURN(c.num_heads, JsonInt(json, "num_attention_heads"));
  QUIVER_ASSIGN_OR_RETURN(c.intermediate, JsonInt(json, "intermediate_size"));
  QUIVER_ASSIGN_OR_RETURN(c.max_position_embeddings, JsonInt(json, "max_position_embeddings"));
  QUIVER_ASSIGN_OR_RETURN(c.type_vocab_size, JsonInt(json, "type_vocab_size", 2));
  QUIVER_ASSIGN_OR_RETURN(c.pad_token_id, JsonInt(json, "pad_token_id", 0));
  QUIVER_ASSIGN_OR_RETURN(c.layer_norm_eps, JsonDouble(json, "layer_norm_eps", 1e-12));
  QUIVER_ASSIGN_OR_RETURN(c.hidden_act, JsonString(json, "hidden_act", "gelu"));
  QUIVER_ASSIGN_OR_RETURN(std::string position_type,
                          JsonString(json, "position_embedding_type", "absolute"));
  if (position_type != "absolute") {
    return absl::InvalidArgumentError(StrCat(
        "field 'position_embedding_type': only 'absolute' is supported, got '", position_type,
        "'"));
  }
  if (c.hidden_act != "gelu" && c.hidden_act != "gelu_new" &&
      c.hidden_act != "gelu_pytorch_tanh") {
    return absl::InvalidArgumentError(StrCat(
        "field 'hidden_act': unsupported activation '", c.hidden_act,
        "' (gelu, gelu_new, gelu_pytorch_tanh)"));
  }
  c.position_offset = IsRoberta(arch) ? c.pad_token_id + 1 : 0;
  if (arch == Architecture::kBertForSequenceClassification ||
      arch == Architecture::kRobertaForSequenceClassification) {
    int64_t labels = 2;
    if (const JsonValue* id2label = json.Find("id2label"); id2label && id2label->is_object()) {
      labels = static_cast<int64_t>(id2label->members().size());
    }
    QUIVER_ASSIGN_OR_RETURN(c.num_labels, JsonInt(json, "num_labels", labels));
    QUIVER_RETURN_IF_ERROR(Positive("num_labels", c.num_labels));
  }
  QUIVER_RETURN_IF_ERROR(Positive("vocab_size", c.vocab_size));
  QUIVER_RETURN_IF_ERROR(Positive("hidden_size", c.hidden));
  QUIVER_RETURN_IF_ERROR(Positive("num_hidden_layers", c.num_layers));
  QUIVER_RETURN_IF_ERROR(Positive("num_attention_heads", c.num_heads));
  QUIVER_RETURN_IF_ERROR(Positive("intermediate_size", c.intermediate));
  QUIVER_RETURN_IF_ERROR(Positive("max_position_embeddings", c.max_position_embeddings));
  if (c.hidden % c.num_heads != 0) {
    return absl::InvalidArgumentError(StrCat("hidden_size ", c.hidden,
                                                   " is not a multiple of num_attention_heads ",
                                                   c.num_heads));
  }
  return c;
}

absl::StatusOr<Qwen3Config> ParseQwen3(const JsonValue& json) {
  Qwen3Config c;
  QUIVER_ASSIGN_OR_RETURN(c.vocab_size, JsonInt(json, "vocab_size"));
  QUIVER_ASSIGN_OR_RETURN(c.hidden, JsonInt(json, "hidden_size"));
  QUIVER_ASSIGN_OR_RETURN(c.num_layers, JsonInt(json, "num_hidden_layers"));
  QUIVER_ASSIGN_OR_RETURN(c.num_heads, JsonInt(json, "num_attention_heads"));
  QUIVER_ASSIGN_OR_RETURN(c.num_kv_heads, JsonInt(json, "num_key_value_heads", c.num_heads));
  QUIVER_RETURN_IF_ERROR(Positive("hidden_size", c.hidden));
  QUIVER_RETURN_IF_ERROR(Positive("num_attention_heads", c.num_heads));
  QUIVER_ASSIGN_OR_RETURN(c.head_dim, JsonInt(json, "head_dim", c.hidden / c.num_heads));
  QUIVER_ASSIGN_OR_RETURN(c.intermediate, JsonInt(json, "intermediate_size"));
  QUIVER_ASSIGN_OR_RETURN(c.max_position_embeddings, JsonInt(json, "max_position_embeddings"));
  QUIVER_ASSIGN_OR_RETURN(c.rms_norm_eps, JsonDouble(json, "rms_norm_eps", 1e-6));
  // transformers 5 moved rope_theta under rope_parameters; accept both spellings.
  double rope_theta = 1e6;
  if (const JsonValue* rope = json.Find("rope_parameters"); rope && rope->is_object()) {
    QUIVER_ASSIGN_OR_RETURN(rope_theta, JsonDouble(*rope, "rope_theta", rope_theta));
  }
  QUIVER_ASSIGN_OR_RETURN(c.rope_theta, JsonDouble(json, "rope_theta", rope_theta));
  QUIVER_ASSIGN_OR_RETURN(c.attention_bias, JsonBool(json, "attention_bias", false));
  QUIVER_ASSIGN_OR_RETURN(c.tie_word_embeddings, JsonBool(json, "tie_word_embeddings", false));
  QUIVER_ASSIGN_OR_RETURN(bool bidirectional,
                          JsonBool(json, "use_bidirectional_attention", false));
  QUIVER_ASSIGN_OR_RETURN(bool is_causal, JsonBool(json, "is_causal", true));
  c.bidirectional = bidirectional || !is_causal;
  QUIVER_RETURN_IF_ERROR(Positive("vocab_size", c.vocab_size));
  QUIVER_RETURN_IF_ERROR(Positive("num_hidden_layers", c.num_layers));
  QUIVER_RETURN_IF_ERROR(Positive("num_key_value_heads", c.num_kv_heads));
  QUIVER_RETURN_IF_ERROR(Positive("head_dim", c.head_dim));
  QUIVER_RETURN_IF_ERROR(Positive("intermediate_size", c.intermediate));
  QUIVER_RETURN_IF_ERROR(Positive("max_position_embeddings", c.max_position_embeddings));
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        StrCat("num_attention_heads ", c.num_heads,
                     " is not a multiple of num_key_value_heads ", c.num_kv_heads));
  }
  return c;
}

// sentence-transformers writes the pooling mode two ways: before v5 as one boolean per mode
// ("pooling_mode_mean_tokens": true), since then as "pooling_mode": "mean".
absl::StatusOr<PoolingMode> ParsePoolingModule(const JsonValue& pool, const std::string& path) {
  struct Mode {
    std::string_view name;      // "pooling_mode" value
    std::string_view flag;      // older boolean field
    std::optional<PoolingMode> mode;  // nullopt: a mode sentence-transformers has, we do not
  };
  const Mode modes[] = {
      {"cls", "pooling_mode_cls_token", PoolingMode::kCls},
      {"mean", "pooling_mode_mean_tokens", PoolingMode::kMean},
      {"lasttoken", "pooling_mode_lasttoken", PoolingMode::kLastToken},
      {"max", "pooling_mode_max_tokens", std::nullopt},
      {"mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens", std::nullopt},
      {"weightedmean", "pooling_mode_weightedmean_tokens", std::nullopt},
  };
  auto unsupported = [&](std::string_view what) {
    return absl::InvalidArgumentError(
        StrCat(path, ": pooling mode '", what, "' is not supported (cls, mean, lasttoken)"));
  };
  if (const JsonValue* name = pool.Find("pooling_mode"); name != nullptr) {
    if (!name->is_string()) {
      return absl::InvalidArgumentError(StrCat(path, ": field 'pooling_mode' must be a "
                                                     "string"));
    }
    for (const Mode& mode : modes) {
      if (mode.name != name->as_string()) continue;
      if (!mode.mode) return unsupported(mode.name);
      return *mode.mode;
    }
    return unsupported(name->as_string());
  }
  std::optional<PoolingMode> chosen;
  int enabled = 0;
  for (const Mode& mode : modes) {
    absl::StatusOr<bool> on = JsonBool(pool, mode.flag, false);
    if (!on.ok()) return WithContext(on.status(), path);
    if (!*on) continue;
    ++enabled;
    if (!mode.mode) return unsupported(mode.name);
    chosen = mode.mode;
  }
  if (enabled != 1) {
    return absl::InvalidArgumentError(
        StrCat(path, ": exactly one pooling mode must be enabled, found ", enabled));
  }
  return *chosen;
}

}  // namespace

std::string_view ArchitectureName(Architecture arch) {
  for (const ArchitectureEntry& entry : kArchitectures) {
    if (entry.arch == arch) return entry.name;
  }
  return "?";
}

int64_t ModelConfig::hidden() const { return is_bert() ? bert().hidden : qwen3().hidden; }

int64_t ModelConfig::max_input_tokens() const {
  if (is_bert()) return bert().max_position_embeddings - bert().position_offset;
  return qwen3().max_position_embeddings;
}

absl::StatusOr<ModelConfig> ParseModelConfig(const JsonValue& json) {
  if (!json.is_object()) return absl::InvalidArgumentError("config is not a JSON object");
  const JsonValue* architectures = json.Find("architectures");
  if (architectures == nullptr || !architectures->is_array() || architectures->items().empty() ||
      !architectures->items()[0].is_string()) {
    return absl::InvalidArgumentError(
        "field 'architectures' must be a non-empty list of names (e.g. [\"BertModel\"])");
  }
  ModelConfig config;
  config.architecture_name = architectures->items()[0].as_string();
  const ArchitectureEntry* found = nullptr;
  for (const ArchitectureEntry& entry : kArchitectures) {
    if (entry.name == config.architecture_name) found = &entry;
  }
  if (found == nullptr) {
    return absl::InvalidArgumentError(StrCat("unknown architecture '",
                                                   config.architecture_name,
                                                   "'; supported: ", SupportedArchitectures()));
  }
  config.architecture = found->arch;
  if (config.architecture == Architecture::kQwen3Model ||
      config.architecture == Architecture::kQwen3ForCausalLM) {
    QUIVER_ASSIGN_OR_RETURN(config.family, ParseQwen3(json));
  } else {
    QUIVER_ASSIGN_OR_RETURN(config.family, ParseBert(json, config.architecture));
  }
  return config;
}

std::string_view PoolingModeName(PoolingMode mode) {
  switch (mode) {
    case PoolingMode::kCls: return "cls";
    case PoolingMode::kMean: return "mean";
    case PoolingMode::kLastToken: return "lasttoken";
  }
  return "?";
}

absl::StatusOr<PoolingConfig> LoadPoolingConfig(const std::string& dir,
                                                const ModelConfig& model) {
  namespace fs = std::filesystem;
  PoolingConfig pooling;
  if (model.is_bert()) {
    pooling.mode = PoolingMode::kCls;
  } else {
    pooling.mode = model.qwen3().bidirectional ? PoolingMode::kMean : PoolingMode::kLastToken;
  }
  fs::path modules_path = fs::path(dir) / "modules.json";
  if (!fs::exists(modules_path)) return pooling;

  auto read_json = [](const fs::path& path) -> absl::StatusOr<JsonValue> {
    QUIVER_ASSIGN_OR_RETURN(std::string text, ReadFile(path.string()));
    absl::StatusOr<JsonValue> json = JsonValue::Parse(text);
    if (!json.ok()) return WithContext(json.status(), path.string());
    return json;
  };
  QUIVER_ASSIGN_OR_RETURN(JsonValue modules, read_json(modules_path));
  if (!modules.is_array()) {
    return absl::InvalidArgumentError(StrCat(modules_path.string(), ": expected a list"));
  }
  pooling.from_sentence_transformers = true;
  for (const JsonValue& module : modules.items()) {
    absl::StatusOr<std::string> type = JsonString(module, "type");
    if (!type.ok()) return WithContext(type.status(), modules_path.string());
    std::string_view kind(*type);
    if (kind.ends_with(".Normalize")) {
      pooling.normalize = true;
    } else if (kind.ends_with(".Pooling")) {
      QUIVER_ASSIGN_OR_RETURN(std::string sub, JsonString(module, "path", ""));
      fs::path pool_path = fs::path(dir) / sub / "config.json";
      QUIVER_ASSIGN_OR_RETURN(JsonValue pool, read_json(pool_path));
      QUIVER_ASSIGN_OR_RETURN(pooling.mode, ParsePoolingModule(pool, pool_path.string()));
    } else if (!kind.ends_with(".Transformer")) {
      return absl::InvalidArgumentError(
          StrCat(modules_path.string(), ": unsupported module type '", kind, "'"));
    }
  }
  fs::path bert_config = fs::path(dir) / "sentence_bert_config.json";
  if (fs::exists(bert_config)) {
    QUIVER_ASSIGN_OR_RETURN(JsonValue json, read_json(bert_config));
    absl::StatusOr<int64_t> max_len = JsonInt(json, "max_seq_length", -1);
    if (!max_len.ok()) return WithContext(max_len.status(), bert_config.string());
    if (*max_len > 0) pooling.max_seq_length = *max_len;
  }
  return pooling;
}

}  // namespace quiver::engine
