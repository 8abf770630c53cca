#include "engine/loader/pooling_config.h"

#include <filesystem>

#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "common/strings.h"

namespace quiver::engine {
namespace {

// sentence-transformers writes the pooling modes two ways: before v5 as one boolean per mode
// ("pooling_mode_mean_tokens": true; several concatenate in its fixed order, none is mean), since
// then as "pooling_mode": "mean" or a list of modes, concatenated in the list's order.
absl::StatusOr<std::vector<PoolingMode>> ParsePoolingModule(const JsonValue& pool,
                                                            const std::string& path) {
  struct Mode {
    std::string_view name;  // "pooling_mode" value
    std::string_view flag;  // older boolean field
    PoolingMode mode;
  };
  // In the order sentence-transformers concatenates the older booleans.
  static constexpr Mode kModes[] = {
      {"cls", "pooling_mode_cls_token", PoolingMode::kCls},
      {"max", "pooling_mode_max_tokens", PoolingMode::kMax},
      {"mean", "pooling_mode_mean_tokens", PoolingMode::kMean},
      {"mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens", PoolingMode::kMeanSqrtLen},
      {"weightedmean", "pooling_mode_weightedmean_tokens", PoolingMode::kWeightedMean},
      {"lasttoken", "pooling_mode_lasttoken", PoolingMode::kLastToken},
  };
  const auto by_name = [&](const JsonValue& name,
                           std::string_view field) -> absl::StatusOr<PoolingMode> {
    if (name.is_string()) {
      for (const Mode& mode : kModes) {
        if (mode.name == name.as_string()) return mode.mode;
      }
    }
    return absl::InvalidArgumentError(
        StrCat(path, ": ", field, ": ",
               name.is_string() ? StrCat("pooling mode '", name.as_string(), "' is not supported")
                                : std::string("must be a mode's name"),
               " (cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken)"));
  };
  std::vector<PoolingMode> modes;
  if (const JsonValue* names = pool.Find("pooling_mode"); names != nullptr) {
    if (names->is_array()) {
      size_t i = 0;
      for (const JsonValue& name : names->items()) {
        QUIVER_ASSIGN_OR_RETURN(PoolingMode mode,
                                by_name(name, StrCat("field 'pooling_mode[", i++, "]'")));
        modes.push_back(mode);
      }
      if (modes.empty()) {
        return absl::InvalidArgumentError(StrCat(path, ": field 'pooling_mode' is an empty list"));
      }
      return modes;
    }
    QUIVER_ASSIGN_OR_RETURN(PoolingMode mode, by_name(*names, "field 'pooling_mode'"));
    return std::vector<PoolingMode>{mode};
  }
  for (const Mode& mode : kModes) {
    absl::StatusOr<bool> on = JsonBool(pool, mode.flag, false);
    if (!on.ok()) return WithContext(on.status(), path);
    if (*on) modes.push_back(mode.mode);
  }
  if (modes.empty()) modes.push_back(PoolingMode::kMean);  // sentence-transformers' default
  return modes;
}

}  // namespace

std::optional<PoolingMode> PoolingModeFromName(std::string_view name) {
  for (PoolingMode mode :
       {PoolingMode::kCls, PoolingMode::kMean, PoolingMode::kLastToken, PoolingMode::kMax,
        PoolingMode::kMeanSqrtLen, PoolingMode::kWeightedMean}) {
    if (name == PoolingModeName(mode)) return mode;
  }
  if (name == "last-token") return PoolingMode::kLastToken;  // TEI's spelling
  return std::nullopt;
}

std::string PoolingConfig::ModesName() const {
  std::string out;
  for (PoolingMode mode : modes) out += StrCat(out.empty() ? "" : "+", PoolingModeName(mode));
  return out;
}

std::string_view PoolingModeName(PoolingMode mode) {
  switch (mode) {
    case PoolingMode::kCls:
      return "cls";
    case PoolingMode::kMean:
      return "mean";
    case PoolingMode::kLastToken:
      return "lasttoken";
    case PoolingMode::kMax:
      return "max";
    case PoolingMode::kMeanSqrtLen:
      return "mean_sqrt_len_tokens";
    case PoolingMode::kWeightedMean:
      return "weightedmean";
  }
  return "?";
}

namespace {

absl::StatusOr<JsonValue> ReadJson(const std::filesystem::path& path) {
  QUIVER_ASSIGN_OR_RETURN(std::string text, ReadFile(path.string()));
  absl::StatusOr<JsonValue> json = JsonValue::Parse(text);
  if (!json.ok()) return WithContext(json.status(), path.string());
  return json;
}

// tokenizer_config.json's model_max_length where it is a real limit (transformers writes about
// 1e30 for a tokenizer without one); nullopt when absent.
absl::StatusOr<std::optional<int64_t>> TokenizerMaxLength(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tokenizer_config.json";
  if (!std::filesystem::exists(path)) return std::optional<int64_t>();
  QUIVER_ASSIGN_OR_RETURN(JsonValue json, ReadJson(path));
  const JsonValue* v = json.Find("model_max_length");
  if (v == nullptr || !v->is_int() || v->as_int() <= 0 || v->as_int() > (int64_t{1} << 30)) {
    return std::optional<int64_t>();
  }
  return std::optional<int64_t>(v->as_int());
}

}  // namespace

namespace {

// A Dense module's config.json (sentence-transformers' Dense.get_config_dict).
absl::StatusOr<DenseModule> ParseDenseModule(const std::filesystem::path& dir) {
  const std::string path = (dir / "config.json").string();
  QUIVER_ASSIGN_OR_RETURN(JsonValue json, ReadJson(path));
  DenseModule d;
  absl::Status status = [&]() -> absl::Status {
    QUIVER_ASSIGN_OR_RETURN(d.in_features, JsonInt(json, "in_features"));
    QUIVER_ASSIGN_OR_RETURN(d.out_features, JsonInt(json, "out_features"));
    QUIVER_RETURN_IF_ERROR(RequirePositive("in_features", d.in_features));
    QUIVER_RETURN_IF_ERROR(RequirePositive("out_features", d.out_features));
    QUIVER_ASSIGN_OR_RETURN(d.bias, JsonBool(json, "bias", true));
    QUIVER_ASSIGN_OR_RETURN(d.activation_name, JsonString(json, "activation_function",
                                                          "torch.nn.modules.activation.Tanh"));
    const std::string& a = d.activation_name;
    if (a == "torch.nn.modules.linear.Identity") {
      d.activation = DenseActivation::kIdentity;
    } else if (a == "torch.nn.modules.activation.Tanh") {
      d.activation = DenseActivation::kTanh;
    } else if (a == "torch.nn.modules.activation.ReLU") {
      d.activation = DenseActivation::kRelu;
    } else if (a == "torch.nn.modules.activation.GELU") {
      d.activation = DenseActivation::kGelu;
    } else if (a == "torch.nn.modules.activation.Sigmoid") {
      d.activation = DenseActivation::kSigmoid;
    } else {
      return absl::InvalidArgumentError(
          StrCat("field 'activation_function': unsupported activation '", a,
                 "' (Identity, Tanh, ReLU, GELU, Sigmoid of torch.nn)"));
    }
    QUIVER_ASSIGN_OR_RETURN(bool residual, JsonBool(json, "use_residual", false));
    if (residual) {
      return absl::InvalidArgumentError("field 'use_residual': residual Dense is not supported");
    }
    QUIVER_ASSIGN_OR_RETURN(std::string input,
                            JsonString(json, "module_input_name", "sentence_embedding"));
    QUIVER_ASSIGN_OR_RETURN(std::string output, JsonString(json, "module_output_name", input));
    if (input != "sentence_embedding" || output != "sentence_embedding") {
      return absl::InvalidArgumentError(
          StrCat("fields 'module_input_name' / 'module_output_name': only the sentence embedding "
                 "is supported, got '",
                 input, "' -> '", output, "'"));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) return WithContext(status, path);
  const std::filesystem::path weights = dir / "model.safetensors";
  if (!std::filesystem::exists(weights)) {
    return absl::InvalidArgumentError(
        StrCat(dir.string(),
               ": no model.safetensors (a Dense module saved as pytorch_model.bin "
               "cannot be read: save it again with safe_serialization)"));
  }
  d.weights_path = weights.string();
  return d;
}

// modules.json and what it points to; the family default when absent.
absl::StatusOr<PoolingConfig> LoadSentenceTransformersConfig(const std::string& dir,
                                                             PoolingMode default_mode) {
  namespace fs = std::filesystem;
  PoolingConfig pooling;
  pooling.modes = {default_mode};
  fs::path modules_path = fs::path(dir) / "modules.json";
  if (!fs::exists(modules_path)) return pooling;
  QUIVER_ASSIGN_OR_RETURN(JsonValue modules, ReadJson(modules_path));
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
      QUIVER_ASSIGN_OR_RETURN(JsonValue pool, ReadJson(pool_path));
      QUIVER_ASSIGN_OR_RETURN(pooling.modes, ParsePoolingModule(pool, pool_path.string()));
      absl::StatusOr<bool> include_prompt = JsonBool(pool, "include_prompt", true);
      if (!include_prompt.ok()) return WithContext(include_prompt.status(), pool_path.string());
      pooling.include_prompt = *include_prompt;
    } else if (kind.ends_with(".SpladePooling")) {
      QUIVER_ASSIGN_OR_RETURN(std::string sub, JsonString(module, "path", ""));
      const fs::path splade_path = fs::path(dir) / sub / "config.json";
      QUIVER_ASSIGN_OR_RETURN(JsonValue splade, ReadJson(splade_path));
      QUIVER_ASSIGN_OR_RETURN(std::string strategy, JsonString(splade, "pooling_strategy", "max"));
      QUIVER_ASSIGN_OR_RETURN(std::string activation,
                              JsonString(splade, "activation_function", "relu"));
      if (strategy != "max") {
        return absl::InvalidArgumentError(StrCat(splade_path.string(),
                                                 ": field 'pooling_strategy': only 'max' is "
                                                 "supported, got '",
                                                 strategy, "'"));
      }
      if (activation != "relu" && activation != "log1p_relu") {
        return absl::InvalidArgumentError(StrCat(splade_path.string(),
                                                 ": field 'activation_function': '", activation,
                                                 "' is not relu or log1p_relu"));
      }
      pooling.splade_double_log = activation == "log1p_relu";
    } else if (kind.ends_with(".Dense")) {
      QUIVER_ASSIGN_OR_RETURN(std::string sub, JsonString(module, "path", ""));
      QUIVER_ASSIGN_OR_RETURN(DenseModule dense, ParseDenseModule(fs::path(dir) / sub));
      if (pooling.normalize) {
        return absl::InvalidArgumentError(
            StrCat(modules_path.string(), ": a Dense module after Normalize is not supported"));
      }
      pooling.dense.push_back(std::move(dense));
    } else if (!kind.ends_with(".Transformer") && !kind.ends_with(".MLMTransformer")) {
      return absl::InvalidArgumentError(
          StrCat(modules_path.string(), ": unsupported module type '", kind, "'"));
    }
  }
  fs::path bert_config = fs::path(dir) / "sentence_bert_config.json";
  if (fs::exists(bert_config)) {
    QUIVER_ASSIGN_OR_RETURN(JsonValue json, ReadJson(bert_config));
    absl::StatusOr<int64_t> max_len = JsonInt(json, "max_seq_length", -1);
    if (!max_len.ok()) return WithContext(max_len.status(), bert_config.string());
    if (*max_len > 0) pooling.max_seq_length = *max_len;
  }
  return pooling;
}

}  // namespace

absl::StatusOr<PoolingConfig> LoadPoolingConfig(const std::string& dir, PoolingMode default_mode) {
  QUIVER_ASSIGN_OR_RETURN(PoolingConfig pooling, LoadSentenceTransformersConfig(dir, default_mode));
  // Where sentence-transformers takes the length: max_seq_length, else the tokenizer's
  // model_max_length (its Transformer module then takes the smaller of that and the position
  // table, as every consumer here does with the engine's limit).
  if (!pooling.max_seq_length) {
    QUIVER_ASSIGN_OR_RETURN(pooling.max_seq_length, TokenizerMaxLength(dir));
  }
  return pooling;
}

}  // namespace quiver::engine
