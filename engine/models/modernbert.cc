// ModernBERT (transformers' ModernBertModel, ModernBertForSequenceClassification): pre-LN
// encoder layers with fused Wqkv, rotary positions (one theta for the global layers, another for
// the local ones), attention that alternates global and a bidirectional sliding window (every
// `global_attn_every_n_layers`-th layer global, the rest seeing keys within local_attention / 2),
// a GeGLU MLP, LayerNorms without bias and no linear biases unless the config asks; a final norm.
// The classifier pools (CLS or mean, classifier_pooling), then dense, activation, LayerNorm and
// the classifier.
#include <string>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "engine/models/labels.h"
#include "engine/models/layer_types.h"
#include "engine/models/output_rows.h"
#include "engine/models/registry.h"
#include "engine/ops/activation.h"
#include "engine/ops/attention.h"
#include "engine/ops/embedding.h"
#include "engine/ops/linear.h"
#include "engine/ops/norm.h"
#include "engine/ops/pooling.h"
#include "engine/ops/rotary.h"

namespace quiver::engine {
namespace {

struct ModernBertConfig {
  int64_t vocab_size = 0, hidden = 0, intermediate = 0, num_layers = 0, num_heads = 0;
  int64_t max_position_embeddings = 0;
  int64_t window = 64;  // local_attention / 2: a local layer's query sees keys this far away
  double norm_eps = 1e-5;
  bool norm_bias = false, attention_bias = false, mlp_bias = false, classifier_bias = false;
  double global_theta = 160000.0, local_theta = 10000.0;
  std::vector<bool> global;  // per layer: full attention (true) or the sliding window
  ops::GeluForm activation = ops::GeluForm::kErf;
  ops::GeluForm classifier_activation = ops::GeluForm::kErf;
  bool classifier_mean = false;  // classifier_pooling "mean" (else "cls")
  int64_t num_labels = 0;
};

absl::StatusOr<ops::GeluForm> ParseGelu(const JsonValue& json, const char* field) {
  QUIVER_ASSIGN_OR_RETURN(std::string act, JsonString(json, field, "gelu"));
  if (act == "gelu") return ops::GeluForm::kErf;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") return ops::GeluForm::kTanh;
  return absl::InvalidArgumentError(StrCat("field '", field, "': unsupported activation '", act,
                                           "' (gelu, gelu_new, gelu_pytorch_tanh)"));
}

absl::StatusOr<ModernBertConfig> ParseConfig(const JsonValue& json, bool classifier) {
  ModernBertConfig c;
  QUIVER_ASSIGN_OR_RETURN(c.vocab_size, JsonInt(json, "vocab_size"));
  QUIVER_ASSIGN_OR_RETURN(c.hidden, JsonInt(json, "hidden_size"));
  QUIVER_ASSIGN_OR_RETURN(c.intermediate, JsonInt(json, "intermediate_size"));
  QUIVER_ASSIGN_OR_RETURN(c.num_layers, JsonInt(json, "num_hidden_layers"));
  QUIVER_ASSIGN_OR_RETURN(c.num_heads, JsonInt(json, "num_attention_heads"));
  QUIVER_ASSIGN_OR_RETURN(c.max_position_embeddings,
                          JsonInt(json, "max_position_embeddings", 8192));
  QUIVER_ASSIGN_OR_RETURN(c.norm_eps, JsonDouble(json, "norm_eps", 1e-5));
  QUIVER_ASSIGN_OR_RETURN(c.norm_bias, JsonBool(json, "norm_bias", false));
  QUIVER_ASSIGN_OR_RETURN(c.attention_bias, JsonBool(json, "attention_bias", false));
  QUIVER_ASSIGN_OR_RETURN(c.mlp_bias, JsonBool(json, "mlp_bias", false));
  QUIVER_ASSIGN_OR_RETURN(c.activation, ParseGelu(json, "hidden_activation"));
  QUIVER_ASSIGN_OR_RETURN(int64_t local_attention, JsonInt(json, "local_attention", 128));
  for (const auto& [field, value] : {std::pair{"vocab_size", c.vocab_size},
                                     {"hidden_size", c.hidden},
                                     {"intermediate_size", c.intermediate},
                                     {"num_hidden_layers", c.num_layers},
                                     {"num_attention_heads", c.num_heads},
                                     {"max_position_embeddings", c.max_position_embeddings},
                                     {"local_attention", local_attention}}) {
    QUIVER_RETURN_IF_ERROR(RequirePositive(field, value));
  }
  if (c.hidden % c.num_heads != 0 || (c.hidden / c.num_heads) % 2 != 0) {
    return absl::InvalidArgumentError(StrCat("hidden_size ", c.hidden,
                                             " must split into num_attention_heads ", c.num_heads,
                                             " heads of an even size (rotary)"));
  }
  c.window = local_attention / 2;
  if (json.Find("rope_scaling") != nullptr && !json.Find("rope_scaling")->is_null()) {
    return absl::InvalidArgumentError(
        "field 'rope_scaling': scaled rotary is not supported (it moves every position)");
  }
  QUIVER_ASSIGN_OR_RETURN(
      c.global_theta, LayerTypeRopeTheta(json, "full_attention", "global_rope_theta", 160000.0));
  // transformers 4 read a null local_rope_theta as "the global one".
  const JsonValue* local = json.Find("local_rope_theta");
  const double local_fallback = local != nullptr && local->is_null() ? c.global_theta : 10000.0;
  QUIVER_ASSIGN_OR_RETURN(c.local_theta, LayerTypeRopeTheta(json, "sliding_attention",
                                                            "local_rope_theta", local_fallback));
  // layer_types (transformers 5), else every global_attn_every_n_layers-th layer from 0.
  QUIVER_ASSIGN_OR_RETURN(c.global, GlobalLayersFromTypes(json, c.num_layers));
  if (c.global.empty()) {
    QUIVER_ASSIGN_OR_RETURN(int64_t every, JsonInt(json, "global_attn_every_n_layers", 3));
    QUIVER_RETURN_IF_ERROR(RequirePositive("global_attn_every_n_layers", every));
    for (int64_t i = 0; i < c.num_layers; ++i) c.global.push_back(i % every == 0);
  }
  if (classifier) {
    QUIVER_ASSIGN_OR_RETURN(std::string pooling, JsonString(json, "classifier_pooling", "cls"));
    if (pooling != "cls" && pooling != "mean") {
      return absl::InvalidArgumentError(
          StrCat("field 'classifier_pooling': '", pooling, "' is not cls or mean"));
    }
    c.classifier_mean = pooling == "mean";
    QUIVER_ASSIGN_OR_RETURN(c.classifier_bias, JsonBool(json, "classifier_bias", false));
    QUIVER_ASSIGN_OR_RETURN(c.classifier_activation, ParseGelu(json, "classifier_activation"));
    QUIVER_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(json));
  }
  return c;
}

class ModernBertModel final : public Model {
 public:
  ModernBertModel(ModernBertConfig c, bool classifier, WeightLoader& w) : config_(std::move(c)) {
    const int64_t hidden = config_.hidden, inter = config_.intermediate;
    // A LayerNorm's weight and, with norm_bias, its bias (else zeros).
    auto norm = [&](const std::string& name, WeightLoader::Scope scope) {
      Norm n;
      n.gamma = w.Get(name + ".weight", {hidden}, scope);
      n.beta = config_.norm_bias ? w.Get(name + ".bias", {hidden}, scope) : zeros_;
      return n;
    };
    using Scope = WeightLoader::Scope;
    if (!config_.norm_bias) zeros_ = w.Constant({hidden}, 0.0f);
    tok_ = w.Get("embeddings.tok_embeddings.weight", {config_.vocab_size, hidden});
    emb_norm_ = norm("embeddings.norm", Scope::kBase);
    for (int64_t i = 0; i < config_.num_layers; ++i) {
      const std::string p = StrCat("layers.", i, ".");
      Layer l;
      if (i > 0) l.attn_norm = norm(p + "attn_norm", Scope::kBase);  // layer 0: identity
      l.qkv = w.Linear(p + "attn.Wqkv", 3 * hidden, hidden, config_.attention_bias);
      l.o = w.Linear(p + "attn.Wo", hidden, hidden, config_.attention_bias);
      l.mlp_norm = norm(p + "mlp_norm", Scope::kBase);
      l.wi = w.Linear(p + "mlp.Wi", 2 * inter, hidden, config_.mlp_bias);
      l.wo = w.Linear(p + "mlp.Wo", hidden, inter, config_.mlp_bias);
      layers_.push_back(std::move(l));
    }
    final_norm_ = norm("final_norm", Scope::kBase);
    if (classifier) {
      head_dense_ = w.Linear("head.dense", hidden, hidden, config_.classifier_bias, Scope::kHead);
      head_norm_ = norm("head.norm", Scope::kHead);
      classifier_ = w.Linear("classifier", config_.num_labels, hidden, true, Scope::kHead);
    }
    info_.family = "modernbert";
    info_.hidden_size = hidden;
    info_.num_heads = info_.num_kv_heads = config_.num_heads;
    info_.head_dim = hidden / config_.num_heads;
    info_.causal = false;
    info_.vocab_size = config_.vocab_size;
    info_.type_vocab_size = 0;
    info_.max_input_tokens = config_.max_position_embeddings;
    info_.num_labels = classifier ? config_.num_labels : 0;
    info_.default_pooling = PoolingMode::kCls;
    info_.attention_masks = true;  // the local layers' sliding window
    std::string types;
    for (bool g : config_.global) types += g ? 'G' : 'L';
    info_.settings = {
        {"hidden_size", StrCat(hidden)},
        {"num_hidden_layers", StrCat(config_.num_layers)},
        {"num_attention_heads", StrCat(config_.num_heads)},
        {"intermediate_size", StrCat(inter)},
        {"vocab_size", StrCat(config_.vocab_size)},
        {"max_position_embeddings", StrCat(config_.max_position_embeddings)},
        {"local_attention", StrCat(2 * config_.window)},
        {"layer_types", types},
        {"global_rope_theta", fmt::format("{}", config_.global_theta)},
        {"local_rope_theta", fmt::format("{}", config_.local_theta)},
        {"norm_eps", fmt::format("{}", config_.norm_eps)},
        {"norm_bias", config_.norm_bias ? "true" : "false"},
    };
    if (classifier) {
      info_.settings.emplace_back("num_labels", StrCat(config_.num_labels));
      info_.settings.emplace_back("classifier_pooling", config_.classifier_mean ? "mean" : "cls");
    }
  }

  double FlopsPerToken(int64_t seq_len) const override {
    const double hidden = static_cast<double>(config_.hidden),
                 inter = static_cast<double>(config_.intermediate);
    double flops = 0;
    for (bool g : config_.global) {
      const double keys =
          g ? static_cast<double>(seq_len)
            : std::min<double>(static_cast<double>(seq_len), 2.0 * config_.window + 1);
      flops += 2.0 * (4 * hidden * hidden + 3 * hidden * inter) + 4.0 * keys * hidden;
    }
    return flops;
  }

  // x is the residual stream (f32 on every device); y each block's normed input, then its output
  // (the device's activation type).
  Tensor Forward(const ForwardContext& ctx) const override {
    const ExecContext& exec = ctx.exec;
    const int64_t num_tokens = ctx.num_tokens();
    const int64_t hidden = config_.hidden, head_dim = hidden / config_.num_heads;
    const float eps = static_cast<float>(config_.norm_eps);
    const DType dtype = exec.act_dtype();
    const Tensor x = ctx.ws.F32(kResidual, {num_tokens, hidden});
    const Tensor y = ctx.ws.Get(kNormed, dtype, {num_tokens, hidden});
    const Tensor qkv = ctx.ws.Get(kQkv, dtype, {num_tokens, 3 * hidden});
    const Tensor attended = ctx.ws.Get(kAttended, dtype, {num_tokens, hidden});
    const Tensor gate_up = ctx.ws.Get(kGateUp, dtype, {num_tokens, 2 * config_.intermediate});
    const Tensor act = ctx.ws.Get(kAct, dtype, {num_tokens, config_.intermediate});
    const Tensor q = qkv.Columns(0, hidden), k = qkv.Columns(hidden, 2 * hidden),
                 v = qkv.Columns(2 * hidden, 3 * hidden);
    ops::Embedding(exec, ctx.token_ids, {}, {},
                   ops::EmbeddingTables{tok_, {}, {}, emb_norm_.gamma, emb_norm_.beta, eps}, x);
    ops::Convert(exec, x, y);  // layer 0 has no attention norm
    AttentionPlan local = ctx.plan;
    local.window = config_.window;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      const bool global = config_.global[i];
      const double theta = global ? config_.global_theta : config_.local_theta;
      ops::Linear(exec, y, l.qkv, qkv);
      ops::Rotary(exec, q, ctx.positions, config_.num_heads, head_dim, theta,
                  ops::RotaryLayout::kNeox);
      ops::Rotary(exec, k, ctx.positions, config_.num_heads, head_dim, theta,
                  ops::RotaryLayout::kNeox);
      ops::Attention(exec, ctx.attention, global ? ctx.plan : local, q, k, v, attended);
      if (i + 1 == layers_.size() && !ctx.output_rows.empty()) {
        OutputRowsAfterAttention(ctx, l, x, attended, y);
        break;
      }
      // The next layer's attention norm after the residual add (the final norm after the last).
      AfterAttention(exec, l, attended, x, y, gate_up, act,
                     i + 1 < layers_.size() ? layers_[i + 1].attn_norm : final_norm_);
    }
    return y;
  }

  bool ScoresFirstTokens() const override { return !config_.classifier_mean; }

  // Pooled rows (CLS or mean) through head.dense, the activation, head.norm and the classifier;
  // the GEMMs read the device's activation type.
  void Score(const ForwardContext& ctx, const Tensor& hidden, const Tensor& scores) const override {
    const ExecContext& exec = ctx.exec;
    const int64_t num_seqs = ctx.seq_bounds.dim(0);
    const DType dtype = exec.act_dtype();
    const float eps = static_cast<float>(config_.norm_eps);
    const Tensor pooled = ctx.ws.F32(kPooled, {num_seqs, config_.hidden});
    ops::Pool(exec, hidden, ctx.seq_bounds,
              config_.classifier_mean ? ops::PoolMode::kMean : ops::PoolMode::kCls, pooled,
              ctx.device_seq_bounds);
    const Tensor pooled_act = ctx.ws.Get(kPooledAct, dtype, {num_seqs, config_.hidden});
    ops::Convert(exec, pooled, pooled_act);
    const Tensor dense = ctx.ws.Get(kDense, dtype, {num_seqs, config_.hidden});
    ops::Linear(exec, pooled_act, head_dense_, dense);
    ops::Gelu(exec, dense, config_.classifier_activation);
    ops::LayerNorm(exec, dense, head_norm_.gamma, head_norm_.beta, eps, dense);
    if (dtype == DType::kF32) {
      ops::Linear(exec, dense, classifier_, scores);
      return;
    }
    const Tensor logits = ctx.ws.Get(kLogits, dtype, {num_seqs, config_.num_labels});
    ops::Linear(exec, dense, classifier_, logits);
    ops::Convert(exec, logits, scores);
  }

 private:
  enum Slot {
    kResidual,
    kNormed,
    kQkv,
    kAttended,
    kGateUp,
    kAct,
    kPooled,
    kPooledAct,
    kDense,
    kLogits,
    kPicked,  // OutputRowsAfterAttention's
    kPickedAttended,
    kPickedOut,
    kPickedGateUp,
    kPickedAct
  };
  struct Norm {
    Tensor gamma, beta;
  };
  struct Layer {
    Norm attn_norm, mlp_norm;
    ops::LinearWeights qkv, o, wi, wo;
  };

  // A layer after its attention: y = the output projection of attended, added to the residual
  // x and normed, the MLP (gate_up and act its intermediates), added to x and normed by `next`.
  void AfterAttention(const ExecContext& exec, const Layer& l, const Tensor& attended,
                      const Tensor& x, const Tensor& y, const Tensor& gate_up, const Tensor& act,
                      const Norm& next) const {
    const float eps = static_cast<float>(config_.norm_eps);
    ops::Linear(exec, attended, l.o, y);
    ops::AddPreLayerNorm(exec, x, y, l.mlp_norm.gamma, l.mlp_norm.beta, eps);
    ops::Linear(exec, y, l.wi, gate_up);
    ops::GeluMul(exec, gate_up, act, config_.activation);
    ops::Linear(exec, act, l.wo, y);
    ops::AddPreLayerNorm(exec, x, y, next.gamma, next.beta, eps);
  }

  // The last layer after attention on ctx.output_rows only (output_rows.h): AfterAttention on
  // their rows, and the final normed rows scattered into y, Forward's output (its other rows
  // keep the last layer's normed input).
  void OutputRowsAfterAttention(const ForwardContext& ctx, const Layer& l, const Tensor& x,
                                const Tensor& attended, const Tensor& y) const {
    const OutputRows picked = GatherOutputRows(ctx, x, attended, kPicked, kPickedAttended);
    const int64_t n = picked.x.dim(0);
    const Tensor out = ctx.ws.F32(kPickedOut, {n, config_.hidden});
    AfterAttention(ctx.exec, l, picked.attended, picked.x, out,
                   ctx.ws.F32(kPickedGateUp, {n, 2 * config_.intermediate}),
                   ctx.ws.F32(kPickedAct, {n, config_.intermediate}), final_norm_);
    ops::ScatterRows(ctx.exec, out, ctx.output_rows, y);
  }

  ModernBertConfig config_;
  Tensor zeros_;
  Tensor tok_;
  Norm emb_norm_, final_norm_, head_norm_;
  std::vector<Layer> layers_;
  ops::LinearWeights head_dense_, classifier_;
};

template <bool kClassifier>
absl::StatusOr<std::unique_ptr<Model>> MakeModernBert(const ModelArgs& args) {
  QUIVER_ASSIGN_OR_RETURN(ModernBertConfig config, ParseConfig(args.config, kClassifier));
  auto model = std::make_unique<ModernBertModel>(config, kClassifier, args.weights);
  if (!args.weights.status().ok()) return args.weights.status();
  return model;
}

}  // namespace

void RegisterModernBertModels(ModelRegistry& registry) {
  registry.Add({"ModernBertModel", "model.", MakeModernBert<false>});
  registry.Add({"ModernBertForSequenceClassification", "model.", MakeModernBert<true>});
}

}  // namespace quiver::engine
