// Gemma 3's text model (transformers' Gemma3TextModel: EmbeddingGemma and the Gemma 3 text
// encoders): embeddings scaled by sqrt(hidden_size), grouped-query attention with per-head q/k
// RMS norms, rotary with one theta for the global layers and another for the local ones, scores
// scaled by query_pre_attn_scalar^-1/2, a sliding window on the local layers (every
// layer_types "sliding_attention" layer; bidirectional where use_bidirectional_attention says
// so, as EmbeddingGemma does, LocalWindow), sandwich norms (input,
// post-attention, pre- and post-feedforward), a GeGLU MLP (gelu_pytorch_tanh on the gate), a final
// norm. Gemma's RMS norms scale by (1 + weight): the loader adds the one once.
#include <cmath>
#include <string>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "engine/models/layer_types.h"
#include "engine/models/registry.h"
#include "engine/ops/activation.h"
#include "engine/ops/attention.h"
#include "engine/ops/embedding.h"
#include "engine/ops/linear.h"
#include "engine/ops/norm.h"
#include "engine/ops/rotary.h"

namespace quiver::engine {
namespace {

struct Gemma3Config {
  int64_t vocab_size = 0, hidden = 0, intermediate = 0, num_layers = 0, num_heads = 0;
  int64_t num_kv_heads = 0, head_dim = 0, max_position_embeddings = 0;
  int64_t sliding_window = 0;
  double rms_norm_eps = 1e-6, query_pre_attn_scalar = 256;
  double global_theta = 1e6, local_theta = 1e4;
  bool bidirectional = false, attention_bias = false;
  std::vector<bool> global;  // per layer: full attention, else the sliding window
};

absl::StatusOr<Gemma3Config> ParseGemma3Config(const JsonValue& json) {
  Gemma3Config c;
  QUIVER_ASSIGN_OR_RETURN(c.vocab_size, JsonInt(json, "vocab_size"));
  QUIVER_ASSIGN_OR_RETURN(c.hidden, JsonInt(json, "hidden_size"));
  QUIVER_ASSIGN_OR_RETURN(c.intermediate, JsonInt(json, "intermediate_size"));
  QUIVER_ASSIGN_OR_RETURN(c.num_layers, JsonInt(json, "num_hidden_layers"));
  QUIVER_ASSIGN_OR_RETURN(c.num_heads, JsonInt(json, "num_attention_heads"));
  QUIVER_ASSIGN_OR_RETURN(c.num_kv_heads, JsonInt(json, "num_key_value_heads", c.num_heads));
  QUIVER_ASSIGN_OR_RETURN(c.head_dim, JsonInt(json, "head_dim", 256));
  QUIVER_ASSIGN_OR_RETURN(c.max_position_embeddings,
                          JsonInt(json, "max_position_embeddings", 131072));
  QUIVER_ASSIGN_OR_RETURN(c.sliding_window, JsonInt(json, "sliding_window", 4096));
  QUIVER_ASSIGN_OR_RETURN(c.rms_norm_eps, JsonDouble(json, "rms_norm_eps", 1e-6));
  QUIVER_ASSIGN_OR_RETURN(c.query_pre_attn_scalar, JsonDouble(json, "query_pre_attn_scalar", 256));
  QUIVER_ASSIGN_OR_RETURN(c.bidirectional, JsonBool(json, "use_bidirectional_attention", false));
  QUIVER_ASSIGN_OR_RETURN(c.attention_bias, JsonBool(json, "attention_bias", false));
  QUIVER_ASSIGN_OR_RETURN(std::string act,
                          JsonString(json, "hidden_activation", "gelu_pytorch_tanh"));
  for (const auto& [field, value] : {std::pair{"vocab_size", c.vocab_size},
                                     {"hidden_size", c.hidden},
                                     {"intermediate_size", c.intermediate},
                                     {"num_hidden_layers", c.num_layers},
                                     {"num_attention_heads", c.num_heads},
                                     {"num_key_value_heads", c.num_kv_heads},
                                     {"head_dim", c.head_dim},
                                     {"max_position_embeddings", c.max_position_embeddings},
                                     {"sliding_window", c.sliding_window}}) {
    QUIVER_RETURN_IF_ERROR(RequirePositive(field, value));
  }
  if (c.num_heads % c.num_kv_heads != 0 || c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        StrCat("num_attention_heads ", c.num_heads, " must be a multiple of num_key_value_heads ",
               c.num_kv_heads, " and head_dim ", c.head_dim, " even"));
  }
  if (!(c.query_pre_attn_scalar > 0)) {
    return absl::InvalidArgumentError("field 'query_pre_attn_scalar' must be positive");
  }
  if (act != "gelu_pytorch_tanh" && act != "gelu_new") {
    return absl::InvalidArgumentError(StrCat("field 'hidden_activation': unsupported activation '",
                                             act, "' (gelu_pytorch_tanh)"));
  }
  for (const char* field : {"attn_logit_softcapping", "rope_scaling"}) {
    if (const JsonValue* v = json.Find(field); v != nullptr && !v->is_null()) {
      return absl::InvalidArgumentError(StrCat("field '", field, "': not supported (",
                                               field == std::string("rope_scaling")
                                                   ? "scaled rotary moves every position"
                                                   : "no softcapped attention kernel",
                                               ")"));
    }
  }
  QUIVER_ASSIGN_OR_RETURN(c.global_theta,
                          LayerTypeRopeTheta(json, "full_attention", "rope_theta", 1e6));
  QUIVER_ASSIGN_OR_RETURN(
      c.local_theta, LayerTypeRopeTheta(json, "sliding_attention", "rope_local_base_freq", 1e4));
  QUIVER_ASSIGN_OR_RETURN(c.global, GlobalLayersFromTypes(json, c.num_layers));
  if (c.global.empty()) {  // every sliding_window_pattern-th layer, counting from 1, is global
    QUIVER_ASSIGN_OR_RETURN(int64_t pattern, JsonInt(json, "sliding_window_pattern", 6));
    QUIVER_RETURN_IF_ERROR(RequirePositive("sliding_window_pattern", pattern));
    for (int64_t i = 0; i < c.num_layers; ++i) c.global.push_back((i + 1) % pattern == 0);
  }
  return c;
}

class Gemma3Model final : public Model {
 public:
  Gemma3Model(Gemma3Config c, WeightLoader& w) : config_(std::move(c)) {
    const int64_t hidden = config_.hidden, inter = config_.intermediate;
    q_dim_ = config_.num_heads * config_.head_dim;
    kv_dim_ = config_.num_kv_heads * config_.head_dim;
    // Gemma's RMS norm: x / rms(x) · (1 + weight), the one added here.
    auto norm = [&](const std::string& name, int64_t n) {
      return w.Derived(name, {n}, {n}, [n](const float* weight) {
        std::vector<float> out(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = 1.0f + weight[i];
        return out;
      });
    };
    // The embedding's scale, as transformers applies it: the f32 sqrt(hidden_size) times each row.
    const float scale = static_cast<float>(std::sqrt(static_cast<double>(hidden)));
    const int64_t vocab = config_.vocab_size;
    embed_ = w.Derived("embed_tokens.weight", {vocab, hidden}, {vocab, hidden},
                       [vocab, hidden, scale](const float* weight) {
                         std::vector<float> out(static_cast<size_t>(vocab * hidden));
                         for (size_t i = 0; i < out.size(); ++i) out[i] = weight[i] * scale;
                         return out;
                       });
    for (int64_t i = 0; i < config_.num_layers; ++i) {
      const std::string p = StrCat("layers.", i, ".");
      Layer l;
      l.input_norm = norm(p + "input_layernorm.weight", hidden);
      l.qkv =
          w.FusedLinear({p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"},
                        {q_dim_, kv_dim_, kv_dim_}, hidden, config_.attention_bias);
      l.q_norm = norm(p + "self_attn.q_norm.weight", config_.head_dim);
      l.k_norm = norm(p + "self_attn.k_norm.weight", config_.head_dim);
      l.o = w.Linear(p + "self_attn.o_proj", hidden, q_dim_, config_.attention_bias);
      l.post_attn_norm = norm(p + "post_attention_layernorm.weight", hidden);
      l.pre_ff_norm = norm(p + "pre_feedforward_layernorm.weight", hidden);
      l.gate_up =
          w.FusedLinear({p + "mlp.gate_proj", p + "mlp.up_proj"}, {inter, inter}, hidden, false);
      l.down = w.Linear(p + "mlp.down_proj", hidden, inter, false);
      l.post_ff_norm = norm(p + "post_feedforward_layernorm.weight", hidden);
      layers_.push_back(std::move(l));
    }
    final_norm_ = norm("norm.weight", hidden);
    info_.family = "gemma3";
    info_.hidden_size = hidden;
    info_.num_heads = config_.num_heads;
    info_.num_kv_heads = config_.num_kv_heads;
    info_.head_dim = config_.head_dim;
    info_.causal = !config_.bidirectional;
    info_.vocab_size = config_.vocab_size;
    info_.type_vocab_size = 0;
    info_.max_input_tokens = config_.max_position_embeddings;
    info_.default_pooling = config_.bidirectional ? PoolingMode::kMean : PoolingMode::kLastToken;
    info_.attention_masks = true;  // the local layers' window
    std::string types;
    for (bool g : config_.global) types += g ? 'G' : 'L';
    info_.settings = {
        {"hidden_size", StrCat(hidden)},
        {"num_hidden_layers", StrCat(config_.num_layers)},
        {"num_attention_heads", StrCat(config_.num_heads)},
        {"num_key_value_heads", StrCat(config_.num_kv_heads)},
        {"head_dim", StrCat(config_.head_dim)},
        {"intermediate_size", StrCat(inter)},
        {"vocab_size", StrCat(config_.vocab_size)},
        {"sliding_window", StrCat(config_.sliding_window)},
        {"layer_types", types},
        {"use_bidirectional_attention", config_.bidirectional ? "true" : "false"},
        {"query_pre_attn_scalar", fmt::format("{}", config_.query_pre_attn_scalar)},
        {"rope_theta", fmt::format("{}", config_.global_theta)},
        {"rope_local_base_freq", fmt::format("{}", config_.local_theta)},
        {"rms_norm_eps", fmt::format("{}", config_.rms_norm_eps)},
    };
  }

  // How far a local layer's query sees. transformers reads a bidirectional config's
  // sliding_window W as W / 2 + 1 exclusive (Gemma3TextConfig.__post_init__), i.e. keys within
  // W / 2 each side; a causal one as keys less than W behind.
  int64_t LocalWindow() const {
    return config_.bidirectional ? config_.sliding_window / 2 : config_.sliding_window - 1;
  }

  double FlopsPerToken(int64_t seq_len) const override {
    const double hidden = static_cast<double>(config_.hidden),
                 inter = static_cast<double>(config_.intermediate);
    const double q = static_cast<double>(q_dim_), kv = static_cast<double>(kv_dim_);
    double flops = 0;
    for (bool g : config_.global) {
      double keys = static_cast<double>(seq_len);
      if (!g) keys = std::min(keys, (config_.bidirectional ? 2.0 : 1.0) * LocalWindow() + 1);
      if (!config_.bidirectional) keys = (keys + 1) / 2;
      flops += 2.0 * (hidden * (q + 2 * kv) + q * hidden + 3 * hidden * inter) + 4.0 * keys * q;
    }
    return flops;
  }

  // x is the residual stream (f32 on every device); y each block's normed input, then its output.
  Tensor Forward(const ForwardContext& ctx) const override {
    const ExecContext& exec = ctx.exec;
    const int64_t num_tokens = ctx.num_tokens();
    const int64_t hidden = config_.hidden;
    const float eps = static_cast<float>(config_.rms_norm_eps);
    const DType dtype = exec.act_dtype();
    const Tensor x = ctx.ws.F32(kResidual, {num_tokens, hidden});
    const Tensor y = ctx.ws.Get(kNormed, dtype, {num_tokens, hidden});
    const Tensor qkv = ctx.ws.Get(kQkv, dtype, {num_tokens, q_dim_ + 2 * kv_dim_});
    const Tensor attended = ctx.ws.Get(kAttended, dtype, {num_tokens, q_dim_});
    const Tensor gate_up = ctx.ws.Get(kGateUp, dtype, {num_tokens, 2 * config_.intermediate});
    const Tensor act = ctx.ws.Get(kAct, dtype, {num_tokens, config_.intermediate});
    const Tensor q = qkv.Columns(0, q_dim_);
    const Tensor k = qkv.Columns(q_dim_, q_dim_ + kv_dim_);
    const Tensor v = qkv.Columns(q_dim_ + kv_dim_, q_dim_ + 2 * kv_dim_);
    AttentionPlan global = ctx.plan;
    global.scale = static_cast<float>(1.0 / std::sqrt(config_.query_pre_attn_scalar));
    AttentionPlan local = global;
    local.window = LocalWindow();
    ops::Embedding(exec, ctx.token_ids, {}, {}, ops::EmbeddingTables{embed_}, x);
    ops::RmsNorm(exec, x, layers_.front().input_norm, eps, y);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      const bool is_global = config_.global[i];
      const double theta = is_global ? config_.global_theta : config_.local_theta;
      ops::Linear(exec, y, l.qkv, qkv);
      ops::HeadRmsNorm(exec, q, config_.num_heads, l.q_norm, eps);
      ops::HeadRmsNorm(exec, k, config_.num_kv_heads, l.k_norm, eps);
      ops::Rotary(exec, q, ctx.positions, config_.num_heads, config_.head_dim, theta,
                  ops::RotaryLayout::kNeox);
      ops::Rotary(exec, k, ctx.positions, config_.num_kv_heads, config_.head_dim, theta,
                  ops::RotaryLayout::kNeox);
      ops::Attention(exec, ctx.attention, is_global ? global : local, q, k, v, attended);
      ops::Linear(exec, attended, l.o, y);
      ops::RmsNorm(exec, y, l.post_attn_norm, eps, y);
      ops::AddRmsNorm(exec, x, y, l.pre_ff_norm, eps);  // x += y, y = pre-feedforward norm of x
      ops::Linear(exec, y, l.gate_up, gate_up);
      ops::GeluMul(exec, gate_up, act, ops::GeluForm::kTanh);
      ops::Linear(exec, act, l.down, y);
      ops::RmsNorm(exec, y, l.post_ff_norm, eps, y);
      // The residual add, then the next layer's input norm (the final norm after the last).
      ops::AddRmsNorm(exec, x, y, i + 1 < layers_.size() ? layers_[i + 1].input_norm : final_norm_,
                      eps);
    }
    return y;
  }

 private:
  enum Slot { kResidual, kNormed, kQkv, kAttended, kGateUp, kAct };
  struct Layer {
    ops::LinearWeights qkv, o, gate_up, down;
    Tensor input_norm, q_norm, k_norm, post_attn_norm, pre_ff_norm, post_ff_norm;
  };
  Gemma3Config config_;
  int64_t q_dim_ = 0, kv_dim_ = 0;
  Tensor embed_, final_norm_;
  std::vector<Layer> layers_;
};

absl::StatusOr<std::unique_ptr<Model>> MakeGemma3(const ModelArgs& args) {
  QUIVER_ASSIGN_OR_RETURN(Gemma3Config config, ParseGemma3Config(args.config));
  auto model = std::make_unique<Gemma3Model>(config, args.weights);
  if (!args.weights.status().ok()) return args.weights.status();
  return model;
}

}  // namespace

void RegisterGemma3Models(ModelRegistry& registry) {
  registry.Add({"Gemma3TextModel", "model.", MakeGemma3});
}

}  // namespace quiver::engine
