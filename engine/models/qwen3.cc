// Qwen3 family: pre-norm decoder layers (RMSNorm, per-head q/k norm, rotary, GQA, gated SiLU
// MLP). Causal with last-token pooling (Qwen3-Embedding), bidirectional with mean pooling
// (pplx-embed style), and the reranker score: logit("yes") - logit("no") at the last token from
// two rows of the LM head, never the whole vocabulary. The same layers without the q/k norm serve
// Qwen2 (gte-Qwen2 style: q/k/v biased, o not) and LLaMA / Mistral (e5-mistral, SFR style:
// attention_bias for all four or none). Each family's *ForSequenceClassification (the
// Qwen3-Reranker seq-cls conversions, Llama-style classifiers) scores with `score` (no bias) at
// the last token that is not config's pad_token_id, as transformers does.
#include <algorithm>
#include <string>

#include "common/status.h"
#include "common/strings.h"
#include "engine/models/labels.h"
#include "engine/models/output_rows.h"
#include "engine/models/registry.h"
#include "engine/ops/activation.h"
#include "engine/ops/attention.h"
#include "engine/ops/embedding.h"
#include "engine/ops/heads.h"
#include "engine/ops/linear.h"
#include "engine/ops/norm.h"
#include "engine/ops/pooling.h"
#include "engine/ops/rotary.h"

namespace quiver::engine {
namespace {

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
  int64_t num_labels = 0;      // sequence classifiers only
  int64_t pad_token_id = -1;   // -1: none in config.json
  // Which family's layers: Qwen3 has the per-head q/k RMSNorm; Qwen2 biases q/k/v only.
  bool head_norm = true;
  bool qkv_bias = false, o_bias = false;
  int64_t sliding_window = 0;  // Mistral: > 0 caps the longest input (no window is applied)
};

enum class DecoderFamily { kQwen3, kQwen2, kLlama, kMistral };

// What the model answers: embeddings, the yes/no reranker's logit difference (Qwen3ForCausalLM),
// or a sequence classifier's logits (*ForSequenceClassification).
enum class Head { kNone, kYesNo, kClassifier };

// Rotary: rope_theta (transformers 5 moved it under rope_parameters; both spellings accepted),
// and only the plain kind: scaled rotary (YaRN, llama3, dynamic NTK) would silently change every
// position, so it is refused.
absl::Status ParseRotary(const JsonValue& json, Qwen3Config& c) {
  double rope_theta = 1e6;
  if (const JsonValue* rope = json.Find("rope_parameters"); rope && rope->is_object()) {
    QUIVER_ASSIGN_OR_RETURN(rope_theta, JsonDouble(*rope, "rope_theta", rope_theta));
  }
  QUIVER_ASSIGN_OR_RETURN(c.rope_theta, JsonDouble(json, "rope_theta", rope_theta));
  if (const JsonValue* scaling = json.Find("rope_scaling"); scaling && !scaling->is_null()) {
    return absl::InvalidArgumentError(
        "field 'rope_scaling': scaled rotary embeddings are not supported");
  }
  if (const JsonValue* rope = json.Find("rope_parameters"); rope && rope->is_object()) {
    QUIVER_ASSIGN_OR_RETURN(std::string type, JsonString(*rope, "rope_type", "default"));
    if (type != "default") {
      return absl::InvalidArgumentError(
          StrCat("field 'rope_parameters.rope_type': only 'default' rotary is supported, got '",
                 type, "'"));
    }
  }
  return absl::OkStatus();
}

// What each family of decoders adds to or refuses in the common config: Qwen3's per-head norms,
// Qwen2's q/k/v biases, Llama's and Mistral's MLP (SiLU, no bias), Mistral's sliding window.
absl::Status ParseFamily(const JsonValue& json, DecoderFamily family, Qwen3Config& c) {
  c.head_norm = family == DecoderFamily::kQwen3;
  c.qkv_bias = c.o_bias = c.attention_bias;
  if (family == DecoderFamily::kQwen2) {
    c.qkv_bias = true;  // transformers' Qwen2Attention: q/k/v biased, o_proj not
    c.o_bias = false;
    QUIVER_ASSIGN_OR_RETURN(bool sliding, JsonBool(json, "use_sliding_window", false));
    if (sliding) {
      return absl::InvalidArgumentError(
          "field 'use_sliding_window': sliding-window attention is not supported");
    }
  }
  if (family == DecoderFamily::kLlama || family == DecoderFamily::kMistral) {
    QUIVER_ASSIGN_OR_RETURN(bool mlp_bias, JsonBool(json, "mlp_bias", false));
    if (mlp_bias) {
      return absl::InvalidArgumentError("field 'mlp_bias': MLP biases are not supported");
    }
    QUIVER_ASSIGN_OR_RETURN(std::string act, JsonString(json, "hidden_act", "silu"));
    if (act != "silu") {
      return absl::InvalidArgumentError(
          StrCat("field 'hidden_act': only 'silu' is supported, got '", act, "'"));
    }
  }
  if (family == DecoderFamily::kMistral) {
    if (const JsonValue* window = json.Find("sliding_window"); window && window->is_int()) {
      c.sliding_window = window->as_int();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Qwen3Config> ParseQwen3Config(const JsonValue& json, DecoderFamily family,
                                             Head head) {
  Qwen3Config c;
  QUIVER_ASSIGN_OR_RETURN(c.vocab_size, JsonInt(json, "vocab_size"));
  QUIVER_ASSIGN_OR_RETURN(c.hidden, JsonInt(json, "hidden_size"));
  QUIVER_ASSIGN_OR_RETURN(c.num_layers, JsonInt(json, "num_hidden_layers"));
  QUIVER_ASSIGN_OR_RETURN(c.num_heads, JsonInt(json, "num_attention_heads"));
  QUIVER_ASSIGN_OR_RETURN(c.num_kv_heads, JsonInt(json, "num_key_value_heads", c.num_heads));
  QUIVER_RETURN_IF_ERROR(RequirePositive("hidden_size", c.hidden));
  QUIVER_RETURN_IF_ERROR(RequirePositive("num_attention_heads", c.num_heads));
  QUIVER_ASSIGN_OR_RETURN(c.head_dim, JsonInt(json, "head_dim", c.hidden / c.num_heads));
  QUIVER_ASSIGN_OR_RETURN(c.intermediate, JsonInt(json, "intermediate_size"));
  QUIVER_ASSIGN_OR_RETURN(c.max_position_embeddings, JsonInt(json, "max_position_embeddings"));
  QUIVER_ASSIGN_OR_RETURN(c.rms_norm_eps, JsonDouble(json, "rms_norm_eps", 1e-6));
  QUIVER_RETURN_IF_ERROR(ParseRotary(json, c));
  QUIVER_ASSIGN_OR_RETURN(c.attention_bias, JsonBool(json, "attention_bias", false));
  QUIVER_RETURN_IF_ERROR(ParseFamily(json, family, c));
  QUIVER_ASSIGN_OR_RETURN(c.tie_word_embeddings, JsonBool(json, "tie_word_embeddings", false));
  QUIVER_ASSIGN_OR_RETURN(bool bidirectional, JsonBool(json, "use_bidirectional_attention", false));
  QUIVER_ASSIGN_OR_RETURN(bool is_causal, JsonBool(json, "is_causal", true));
  c.bidirectional = bidirectional || !is_causal;
  if (head == Head::kClassifier) {
    QUIVER_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(json));
    if (const JsonValue* pad = json.Find("pad_token_id"); pad && !pad->is_null()) {
      QUIVER_ASSIGN_OR_RETURN(c.pad_token_id, JsonInt(json, "pad_token_id"));
    }
    // The score is taken before any trailing pad tokens by leaving them out of the pass, which
    // changes no earlier hidden state only where attention is causal.
    if (c.bidirectional) {
      return absl::InvalidArgumentError(
          "a sequence classifier with bidirectional attention is not supported");
    }
  }
  QUIVER_RETURN_IF_ERROR(RequirePositive("vocab_size", c.vocab_size));
  QUIVER_RETURN_IF_ERROR(RequirePositive("num_hidden_layers", c.num_layers));
  QUIVER_RETURN_IF_ERROR(RequirePositive("num_key_value_heads", c.num_kv_heads));
  QUIVER_RETURN_IF_ERROR(RequirePositive("head_dim", c.head_dim));
  QUIVER_RETURN_IF_ERROR(RequirePositive("intermediate_size", c.intermediate));
  QUIVER_RETURN_IF_ERROR(RequirePositive("max_position_embeddings", c.max_position_embeddings));
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(StrCat("num_attention_heads ", c.num_heads,
                                             " is not a multiple of num_key_value_heads ",
                                             c.num_kv_heads));
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(StrCat("head_dim ", c.head_dim, " must be even for rotary"));
  }
  return c;
}

class Qwen3Model final : public Model {
 public:
  Qwen3Model(const Qwen3Config& c, Head head, WeightLoader& w, const ModelOptions& options)
      : config_(c),
        head_(head),
        q_dim_(c.num_heads * c.head_dim),
        kv_dim_(c.num_kv_heads * c.head_dim) {
    const int64_t hidden = config_.hidden, inter = config_.intermediate;
    embed_ = w.Get("embed_tokens.weight", {config_.vocab_size, hidden});
    for (int64_t i = 0; i < config_.num_layers; ++i) {
      const std::string p = StrCat("layers.", i, ".");
      Layer l;
      l.in_norm = w.Get(p + "input_layernorm.weight", {hidden});
      l.qkv =
          w.FusedLinear({p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"},
                        {q_dim_, kv_dim_, kv_dim_}, hidden, config_.qkv_bias);
      l.o = w.Linear(p + "self_attn.o_proj", hidden, q_dim_, config_.o_bias);
      if (config_.head_norm) {
        l.q_norm = w.Get(p + "self_attn.q_norm.weight", {config_.head_dim});
        l.k_norm = w.Get(p + "self_attn.k_norm.weight", {config_.head_dim});
      }
      l.post_norm = w.Get(p + "post_attention_layernorm.weight", {hidden});
      l.gate_up =
          w.FusedLinear({p + "mlp.gate_proj", p + "mlp.up_proj"}, {inter, inter}, hidden, false);
      l.down = w.Linear(p + "mlp.down_proj", hidden, inter, false);
      layers_.push_back(std::move(l));
    }
    norm_ = w.Get("norm.weight", {hidden});
    if (head == Head::kYesNo) {
      lm_head_ = config_.tie_word_embeddings ? embed_
                                             : w.Get("lm_head.weight", {config_.vocab_size, hidden},
                                                     WeightLoader::Scope::kHead);
      yes_id_ = options.yes_token_id.value_or(0);
      no_id_ = options.no_token_id.value_or(0);
    }
    if (head == Head::kClassifier) {
      score_ = w.Linear("score", config_.num_labels, hidden, false, WeightLoader::Scope::kHead);
      info_.score_before_trailing_id = static_cast<int32_t>(config_.pad_token_id);  // -1: none
    }
    info_.family = "qwen3";
    info_.hidden_size = hidden;
    info_.num_heads = config_.num_heads;
    info_.num_kv_heads = config_.num_kv_heads;
    info_.head_dim = config_.head_dim;
    info_.causal = !config_.bidirectional;
    info_.vocab_size = config_.vocab_size;
    info_.type_vocab_size = 0;  // no token types: a pair's type ids are ignored, as in transformers
    info_.max_input_tokens = config_.sliding_window > 0
                                 ? std::min(config_.max_position_embeddings, config_.sliding_window)
                                 : config_.max_position_embeddings;
    info_.num_labels = head == Head::kYesNo        ? 1
                       : head == Head::kClassifier ? config_.num_labels
                                                   : 0;
    info_.yes_no_reranker = head == Head::kYesNo;
    info_.default_pooling = config_.bidirectional ? PoolingMode::kMean : PoolingMode::kLastToken;
    info_.settings = {
        {"hidden_size", StrCat(hidden)},
        {"num_hidden_layers", StrCat(config_.num_layers)},
        {"num_attention_heads", StrCat(config_.num_heads)},
        {"num_key_value_heads", StrCat(config_.num_kv_heads)},
        {"head_dim", StrCat(config_.head_dim)},
        {"intermediate_size", StrCat(inter)},
        {"vocab_size", StrCat(config_.vocab_size)},
        {"max_position_embeddings", StrCat(config_.max_position_embeddings)},
        {"rms_norm_eps", fmt::format("{}", config_.rms_norm_eps)},
        {"rope_theta", fmt::format("{}", config_.rope_theta)},
        {"attention_bias", config_.attention_bias ? "true" : "false"},
        {"tie_word_embeddings", config_.tie_word_embeddings ? "true" : "false"},
        {"bidirectional", config_.bidirectional ? "true" : "false"},
        {"head_norm", config_.head_norm ? "true" : "false"},
    };
    if (head == Head::kClassifier) {
      info_.settings.emplace_back("num_labels", StrCat(config_.num_labels));
      info_.settings.emplace_back("pad_token_id", StrCat(config_.pad_token_id));
    }
  }

  double FlopsPerToken(int64_t seq_len) const override {
    const double hidden = static_cast<double>(config_.hidden),
                 inter = static_cast<double>(config_.intermediate);
    const double q = static_cast<double>(q_dim_), kv = static_cast<double>(kv_dim_);
    // Causal (or not): a token attends to (len + 1) / 2 keys on average, else to len.
    const double keys = info_.causal ? (seq_len + 1) / 2.0 : static_cast<double>(seq_len);
    const double per_layer =
        2.0 * (hidden * (q + 2 * kv) + q * hidden + 3 * hidden * inter) + 4.0 * keys * q;
    return per_layer * static_cast<double>(config_.num_layers);
  }

  Tensor Forward(const ForwardContext& ctx) const override {
    const ExecContext& exec = ctx.exec;
    const int64_t num_tokens = ctx.num_tokens();
    const int64_t hidden = config_.hidden;
    const float eps = static_cast<float>(config_.rms_norm_eps);
    // x is the residual stream; y the normed input of each block, then its output.
    // x stays f32 on every device; the rest is in the device's activation type (bf16 on CUDA).
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
    ops::Embedding(exec, ctx.token_ids, {}, {}, ops::EmbeddingTables{embed_}, x);
    ops::RmsNorm(exec, x, layers_.front().in_norm, eps, y);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      ops::Linear(exec, y, l.qkv, qkv);
      if (config_.head_norm) {
        ops::HeadRmsNorm(exec, q, config_.num_heads, l.q_norm,
                         eps);  // before rotary, as Qwen3 does
        ops::HeadRmsNorm(exec, k, config_.num_kv_heads, l.k_norm, eps);
      }
      ops::Rotary(exec, q, ctx.positions, config_.num_heads, config_.head_dim, config_.rope_theta,
                  ops::RotaryLayout::kNeox);
      ops::Rotary(exec, k, ctx.positions, config_.num_kv_heads, config_.head_dim,
                  config_.rope_theta, ops::RotaryLayout::kNeox);
      ops::Attention(exec, ctx.attention, ctx.plan, q, k, v, attended);
      if (i + 1 == layers_.size() && !ctx.output_rows.empty()) {
        OutputRowsAfterAttention(ctx, l, x, attended, y);
        break;
      }
      // The next block's input norm after the residual add (the final norm after the last).
      AfterAttention(exec, l, attended, x, y, gate_up, act,
                     i + 1 < layers_.size() ? layers_[i + 1].in_norm : norm_);
    }
    return y;
  }

  bool ScoresLastTokens() const override { return true; }

  // The last token's row: the yes/no reranker's logit difference, or the classifier's logits
  // (the engine left out any trailing pad tokens: ModelInfo::score_before_trailing_id).
  void Score(const ForwardContext& ctx, const Tensor& hidden, const Tensor& scores) const override {
    const ExecContext& exec = ctx.exec;
    const int64_t num_seqs = ctx.seq_bounds.dim(0);
    const Tensor last = ctx.ws.F32(kLast, {num_seqs, config_.hidden});
    ops::Pool(exec, hidden, ctx.seq_bounds, ops::PoolMode::kLastToken, last, ctx.device_seq_bounds);
    if (head_ == Head::kClassifier) {
      const DType dtype = exec.act_dtype();
      if (dtype == DType::kF32) {
        ops::Linear(exec, last, score_, scores);
        return;
      }
      const Tensor last_act = ctx.ws.Get(kLastAct, dtype, {num_seqs, config_.hidden});
      ops::Convert(exec, last, last_act);
      const Tensor logits = ctx.ws.Get(kLogits, dtype, {num_seqs, config_.num_labels});
      ops::Linear(exec, last_act, score_, logits);
      ops::Convert(exec, logits, scores);
      return;
    }
    ops::LogitDifference(ctx.exec, last,
                         lm_head_.Rows(yes_id_, yes_id_ + 1).Reshape({config_.hidden}),
                         lm_head_.Rows(no_id_, no_id_ + 1).Reshape({config_.hidden}), scores);
  }

 private:
  enum Slot {
    kResidual,
    kNormed,
    kQkv,
    kAttended,
    kGateUp,
    kAct,
    kLast,
    kLastAct,
    kLogits,
    kPicked,  // OutputRowsAfterAttention's
    kPickedAttended,
    kPickedOut,
    kPickedGateUp,
    kPickedAct
  };
  struct Layer {
    ops::LinearWeights qkv, o, gate_up, down;
    Tensor in_norm, q_norm, k_norm, post_norm;
  };

  // A block after its attention: y = the output projection of attended, added to the residual
  // x and normed, the MLP (gate_up and act its intermediates), added to x and normed by `next`.
  void AfterAttention(const ExecContext& exec, const Layer& l, const Tensor& attended,
                      const Tensor& x, const Tensor& y, const Tensor& gate_up, const Tensor& act,
                      const Tensor& next) const {
    const float eps = static_cast<float>(config_.rms_norm_eps);
    ops::Linear(exec, attended, l.o, y);
    ops::AddRmsNorm(exec, x, y, l.post_norm, eps);
    ops::Linear(exec, y, l.gate_up, gate_up);
    ops::SiluMul(exec, gate_up, act);
    ops::Linear(exec, act, l.down, y);
    ops::AddRmsNorm(exec, x, y, next, eps);
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
                   ctx.ws.F32(kPickedAct, {n, config_.intermediate}), norm_);
    ops::ScatterRows(ctx.exec, out, ctx.output_rows, y);
  }

  Qwen3Config config_;
  Head head_;
  int64_t q_dim_, kv_dim_;
  Tensor embed_, norm_, lm_head_;
  ops::LinearWeights score_;  // sequence classifiers only
  std::vector<Layer> layers_;
  int64_t yes_id_ = 0, no_id_ = 0;
};

template <DecoderFamily kFamily, Head kHead>
absl::StatusOr<std::unique_ptr<Model>> MakeDecoder(const ModelArgs& args) {
  QUIVER_ASSIGN_OR_RETURN(Qwen3Config config, ParseQwen3Config(args.config, kFamily, kHead));
  if (kHead == Head::kYesNo && args.weights.mode() == WeightLoader::Mode::kPrepare) {
    if (!args.options.yes_token_id || !args.options.no_token_id) {
      return absl::InvalidArgumentError(StrCat(
          args.architecture, " is served as a reranker and needs the ids of \"yes\" and \"no\""));
    }
  }
  if (kHead == Head::kYesNo) {
    for (const std::optional<int32_t>& id : {args.options.yes_token_id, args.options.no_token_id}) {
      if (id && (*id < 0 || *id >= config.vocab_size)) {
        return absl::InvalidArgumentError(
            StrCat("reranker token id ", *id, " is outside the vocabulary of ", config.vocab_size));
      }
    }
  }
  auto model = std::make_unique<Qwen3Model>(config, kHead, args.weights, args.options);
  if (!args.weights.status().ok()) return args.weights.status();
  return model;
}

}  // namespace

void RegisterQwen3Models(ModelRegistry& registry) {
  using F = DecoderFamily;
  registry.Add({"Qwen3Model", "model.", MakeDecoder<F::kQwen3, Head::kNone>});
  registry.Add({"Qwen3ForCausalLM", "model.", MakeDecoder<F::kQwen3, Head::kYesNo>});
  registry.Add(
      {"Qwen3ForSequenceClassification", "model.", MakeDecoder<F::kQwen3, Head::kClassifier>});
  registry.Add({"Qwen2Model", "model.", MakeDecoder<F::kQwen2, Head::kNone>});
  registry.Add(
      {"Qwen2ForSequenceClassification", "model.", MakeDecoder<F::kQwen2, Head::kClassifier>});
  registry.Add({"LlamaModel", "model.", MakeDecoder<F::kLlama, Head::kNone>});
  registry.Add(
      {"LlamaForSequenceClassification", "model.", MakeDecoder<F::kLlama, Head::kClassifier>});
  registry.Add({"MistralModel", "model.", MakeDecoder<F::kMistral, Head::kNone>});
  registry.Add(
      {"MistralForSequenceClassification", "model.", MakeDecoder<F::kMistral, Head::kClassifier>});
}

}  // namespace quiver::engine
