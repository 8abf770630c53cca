#include "engine/models/weight_spec.h"

#include "common/strings.h"

namespace quiver::engine {
namespace {

void DeclareBert(const ModelConfig& config, std::vector<WeightDecl>& out) {
  const BertConfig& c = config.bert();
  const int64_t h = c.hidden;
  auto linear = [&](const std::string& name, int64_t rows, int64_t cols) {
    out.push_back({name + ".weight", {rows, cols}});
    out.push_back({name + ".bias", {rows}});
  };
  auto layer_norm = [&](const std::string& name) {
    out.push_back({name + ".weight", {h}});
    out.push_back({name + ".bias", {h}});
  };
  out.push_back({"embeddings.word_embeddings.weight", {c.vocab_size, h}});
  out.push_back({"embeddings.position_embeddings.weight", {c.max_position_embeddings, h}});
  if (c.type_vocab_size > 0) {
    out.push_back({"embeddings.token_type_embeddings.weight", {c.type_vocab_size, h}});
  }
  layer_norm("embeddings.LayerNorm");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = StrCat("encoder.layer.", i, ".");
    linear(p + "attention.self.query", h, h);
    linear(p + "attention.self.key", h, h);
    linear(p + "attention.self.value", h, h);
    linear(p + "attention.output.dense", h, h);
    layer_norm(p + "attention.output.LayerNorm");
    linear(p + "intermediate.dense", c.intermediate, h);
    linear(p + "output.dense", h, c.intermediate);
    layer_norm(p + "output.LayerNorm");
  }
  if (config.architecture == Architecture::kBertForSequenceClassification) {
    linear("pooler.dense", h, h);
    linear("classifier", c.num_labels, h);
  } else if (config.architecture == Architecture::kRobertaForSequenceClassification) {
    linear("classifier.dense", h, h);
    linear("classifier.out_proj", c.num_labels, h);
  }
}

void DeclareQwen3(const ModelConfig& config, std::vector<WeightDecl>& out) {
  const Qwen3Config& c = config.qwen3();
  const int64_t h = c.hidden;
  const int64_t q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;
  auto proj = [&](const std::string& name, int64_t rows, int64_t cols, bool bias) {
    out.push_back({name + ".weight", {rows, cols}});
    if (bias) out.push_back({name + ".bias", {rows}});
  };
  out.push_back({"embed_tokens.weight", {c.vocab_size, h}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = StrCat("layers.", i, ".");
    out.push_back({p + "input_layernorm.weight", {h}});
    proj(p + "self_attn.q_proj", q_dim, h, c.attention_bias);
    proj(p + "self_attn.k_proj", kv_dim, h, c.attention_bias);
    proj(p + "self_attn.v_proj", kv_dim, h, c.attention_bias);
    proj(p + "self_attn.o_proj", h, q_dim, c.attention_bias);
    out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
    out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    proj(p + "mlp.gate_proj", c.intermediate, h, false);
    proj(p + "mlp.up_proj", c.intermediate, h, false);
    proj(p + "mlp.down_proj", h, c.intermediate, false);
  }
  out.push_back({"norm.weight", {h}});
}

// The prefix transformers puts before the base model's weights in a task model.
std::string_view ModulePrefix(Architecture arch) {
  switch (arch) {
    case Architecture::kBertModel:
    case Architecture::kBertForSequenceClassification: return "bert.";
    case Architecture::kRobertaModel:
    case Architecture::kRobertaForSequenceClassification: return "roberta.";
    case Architecture::kQwen3Model:
    case Architecture::kQwen3ForCausalLM: return "model.";
  }
  return "";
}

bool IsHeadWeight(const std::string& name) {
  return name.starts_with("classifier") || name.starts_with("lm_head");
}

}  // namespace

std::vector<WeightDecl> DeclareWeights(const ModelConfig& config) {
  std::vector<WeightDecl> out;
  if (config.is_bert()) {
    DeclareBert(config, out);
  } else {
    DeclareQwen3(config, out);
    if (config.architecture == Architecture::kQwen3ForCausalLM &&
        !config.qwen3().tie_word_embeddings) {
      out.push_back({"lm_head.weight", {config.qwen3().vocab_size, config.qwen3().hidden}});
    }
  }
  return out;
}

absl::StatusOr<ResolvedWeights> ResolveWeights(const ModelConfig& config,
                                               const WeightStore& store) {
  const std::vector<WeightDecl> decls = DeclareWeights(config);
  // Decide the prefix once, from the first (embedding) weight, so that a half-prefixed
  // checkpoint is reported rather than silently mixed.
  const std::string prefix(ModulePrefix(config.architecture));
  const bool prefixed = store.Find(decls.front().name) == nullptr &&
                        store.Find(prefix + decls.front().name) != nullptr;
  ResolvedWeights resolved;
  for (const WeightDecl& decl : decls) {
    const std::string name = (prefixed && !IsHeadWeight(decl.name)) ? prefix + decl.name
                                                                      : decl.name;
    const TensorInfo* info = store.Find(name);
    if (info == nullptr) {
      return absl::NotFoundError(StrCat("weight '", name, "' ", ShapeString(decl.shape),
                                              " that ", ArchitectureName(config.architecture),
                                              " needs is not in the checkpoint"));
    }
    if (info->shape != decl.shape) {
      return absl::InvalidArgumentError(StrCat(
          "weight '", name, "' has shape ", ShapeString(info->shape), " in ", info->file,
          " but the config needs ", ShapeString(decl.shape)));
    }
    if (info->dtype != DType::kF32 && info->dtype != DType::kF16 && info->dtype != DType::kBF16) {
      return absl::InvalidArgumentError(StrCat("weight '", name, "' has dtype ",
                                                     DTypeName(info->dtype),
                                                     "; expected F32, F16 or BF16"));
    }
    resolved.emplace(decl.name, info);
  }
  return resolved;
}

}  // namespace quiver::engine
