// Qwen3 family: pre-norm decoder layers (RMSNorm, q/k norm, rotary, GQA, gated SiLU MLP).
// Causal with last-token pooling (Qwen3-Embedding), bidirectional with mean pooling
// (pplx-embed style), and the reranker score: logit("yes") - logit("no") at the last token from
// two rows of the LM head, never the whole vocabulary.
#include <cmath>

#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/models/model.h"

namespace quiver::engine {
namespace {

class Qwen3Model final : public Model {
 public:
  Qwen3Model(const ModelConfig& config, Weights& w, const ModelOptions& options)
      : c_(config.qwen3()), q_dim_(c_.num_heads * c_.head_dim),
        kv_dim_(c_.num_kv_heads * c_.head_dim) {
    embed_ = w.Get("embed_tokens.weight");
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      const std::string p = StrCat("layers.", i, ".");
      Layer l;
      l.in_norm = w.Get(p + "input_layernorm.weight");
      const int64_t h = c_.hidden, inter = c_.intermediate;
      l.qkv_w = cpu::PackedWeights(w.Concat(p + "qkv.weight", {p + "self_attn.q_proj.weight",
                                                               p + "self_attn.k_proj.weight",
                                                               p + "self_attn.v_proj.weight"}),
                                   q_dim_ + 2 * kv_dim_, h);
      l.qkv_b = c_.attention_bias
                    ? w.Concat(p + "qkv.bias", {p + "self_attn.q_proj.bias",
                                                p + "self_attn.k_proj.bias",
                                                p + "self_attn.v_proj.bias"})
                    : nullptr;
      l.o_w = cpu::PackedWeights(w.Get(p + "self_attn.o_proj.weight"), h, q_dim_);
      l.o_b = c_.attention_bias ? w.Get(p + "self_attn.o_proj.bias") : nullptr;
      l.q_norm = w.Get(p + "self_attn.q_norm.weight");
      l.k_norm = w.Get(p + "self_attn.k_norm.weight");
      l.post_norm = w.Get(p + "post_attention_layernorm.weight");
      l.gate_up_w = cpu::PackedWeights(
          w.Concat(p + "mlp.gate_up.weight", {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}),
          2 * inter, h);
      l.down_w = cpu::PackedWeights(w.Get(p + "mlp.down_proj.weight"), h, inter);
      layers_.push_back(std::move(l));
    }
    norm_ = w.Get("norm.weight");
    if (config.architecture == Architecture::kQwen3ForCausalLM) {
      const float* lm = c_.tie_word_embeddings ? embed_ : w.Get("lm_head.weight");
      yes_row_ = lm + static_cast<int64_t>(*options.yes_token_id) * c_.hidden;
      no_row_ = lm + static_cast<int64_t>(*options.no_token_id) * c_.hidden;
    }
  }

  std::string_view family() const override { return "qwen3"; }
  bool causal() const override { return !c_.bidirectional; }
  int64_t hidden_size() const override { return c_.hidden; }
  int64_t num_heads() const override { return c_.num_heads; }
  int64_t num_kv_heads() const override { return c_.num_kv_heads; }
  int64_t head_dim() const override { return c_.head_dim; }
  int64_t num_labels() const override { return yes_row_ ? 1 : 0; }

  double FlopsPerToken(int64_t seq_len) const override {
    const double h = static_cast<double>(c_.hidden), inter = static_cast<double>(c_.intermediate);
    const double q = static_cast<double>(q_dim_), kv = static_cast<double>(kv_dim_);
    // Causal (or not): a token attends to (len + 1) / 2 keys on average, else to len.
    const double keys = causal() ? (seq_len + 1) / 2.0 : static_cast<double>(seq_len);
    const double per_layer = 2.0 * (h * (q + 2 * kv) + q * h + 3 * h * inter) + 4.0 * keys * q;
    return per_layer * static_cast<double>(c_.num_layers);
  }

  void Forward(const ForwardContext& ctx, std::vector<float>& hidden) const override {
    const int64_t t_count = ctx.batch.num_tokens();
    const int64_t h = c_.hidden;
    const int64_t qkv_width = q_dim_ + 2 * kv_dim_;
    const float eps = static_cast<float>(c_.rms_norm_eps);
    Workspace& ws = ctx.ws;
    hidden.resize(static_cast<size_t>(t_count * h));
    ws.y.resize(hidden.size());
    ws.qkv.resize(static_cast<size_t>(t_count * qkv_width));
    ws.ctx.resize(static_cast<size_t>(t_count * q_dim_));
    ws.inter.resize(static_cast<size_t>(t_count * 2 * c_.intermediate));
    ws.act.resize(static_cast<size_t>(t_count * c_.intermediate));
    float* x = hidden.data();
    for (int64_t t = 0; t < t_count; ++t) {
      const float* e = embed_ + static_cast<int64_t>(ctx.batch.token_ids[t]) * h;
      std::copy(e, e + h, x + t * h);
    }
    for (const Layer& l : layers_) {
      cpu::RmsNorm(x, l.in_norm, ws.y.data(), t_count, h, eps);
      cpu::Linear(ctx.pool, ws.y.data(), l.qkv_w, l.qkv_b, ws.qkv.data(), t_count);
      for (int64_t t = 0; t < t_count; ++t) {  // per-head RMSNorm of q and k, before rotary
        float* row = ws.qkv.data() + t * qkv_width;
        cpu::RmsNorm(row, l.q_norm, row, c_.num_heads, c_.head_dim, eps);
        cpu::RmsNorm(row + q_dim_, l.k_norm, row + q_dim_, c_.num_kv_heads, c_.head_dim, eps);
      }
      cpu::Rotary(ws.qkv.data(), ctx.positions.data(), t_count, c_.num_heads, c_.head_dim,
                  qkv_width, c_.rope_theta);
      cpu::Rotary(ws.qkv.data() + q_dim_, ctx.positions.data(), t_count, c_.num_kv_heads,
                  c_.head_dim, qkv_width, c_.rope_theta);
      ctx.attention.Run(ctx.plan, ws.qkv.data(), qkv_width, ws.qkv.data() + q_dim_,
                        ws.qkv.data() + q_dim_ + kv_dim_, qkv_width, ws.ctx.data(), ctx.pool);
      cpu::Linear(ctx.pool, ws.ctx.data(), l.o_w, l.o_b, ws.y.data(), t_count);
      cpu::Add(x, ws.y.data(), t_count * h);
      cpu::RmsNorm(x, l.post_norm, ws.y.data(), t_count, h, eps);
      cpu::Linear(ctx.pool, ws.y.data(), l.gate_up_w, nullptr, ws.inter.data(), t_count);
      cpu::SiluMul(ws.inter.data(), ws.act.data(), t_count, c_.intermediate);
      cpu::Linear(ctx.pool, ws.act.data(), l.down_w, nullptr, ws.y.data(), t_count);
      cpu::Add(x, ws.y.data(), t_count * h);
    }
    cpu::RmsNorm(x, norm_, x, t_count, h, eps);
  }

  void Score(const ForwardContext& ctx, const std::vector<float>& hidden,
             std::vector<float>& scores) const override {
    const int64_t s_count = ctx.batch.num_seqs();
    const int64_t h = c_.hidden;
    scores.resize(static_cast<size_t>(s_count));
    for (int64_t s = 0; s < s_count; ++s) {
      const float* last = hidden.data() + static_cast<int64_t>(ctx.batch.cu_seqlens[s + 1] - 1) * h;
      float yes = 0.0f, no = 0.0f;
      for (int64_t j = 0; j < h; ++j) {
        yes += last[j] * yes_row_[j];
        no += last[j] * no_row_[j];
      }
      scores[s] = yes - no;
    }
  }

 private:
  struct Layer {
    cpu::PackedWeights qkv_w, o_w, gate_up_w, down_w;
    const float *in_norm, *qkv_b, *o_b, *q_norm, *k_norm, *post_norm;
  };
  Qwen3Config c_;
  int64_t q_dim_, kv_dim_;
  const float* embed_;
  const float* norm_;
  std::vector<Layer> layers_;
  const float* yes_row_ = nullptr;
  const float* no_row_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeQwen3Model(const ModelFolder& folder, Weights& weights,
                                                      const ModelOptions& options) {
  const Qwen3Config& c = folder.config.qwen3();
  if (folder.config.architecture == Architecture::kQwen3ForCausalLM) {
    if (!options.yes_token_id || !options.no_token_id) {
      return absl::InvalidArgumentError(
          "Qwen3ForCausalLM is served as a reranker and needs the ids of \"yes\" and \"no\"");
    }
    for (int32_t id : {*options.yes_token_id, *options.no_token_id}) {
      if (id < 0 || id >= c.vocab_size) {
        return absl::InvalidArgumentError(StrCat("reranker token id ", id,
                                                 " is outside the vocabulary of ", c.vocab_size));
      }
    }
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(StrCat("head_dim ", c.head_dim, " must be even for rotary"));
  }
  return std::make_unique<Qwen3Model>(folder.config, weights, options);
}

}  // namespace quiver::engine
