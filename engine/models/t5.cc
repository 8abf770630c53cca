// T5's encoder (transformers' T5EncoderModel: sentence-t5, GTR): pre-norm blocks with RMS norms
// (T5LayerNorm), attention without the 1/sqrt(d) scale and with a relative position bias whose
// bucket table sits in the first block and serves every block, a ReLU FFN or the gated one of
// T5 v1.1 (gated-gelu: gelu_new(wi_0 x) · wi_1 x); a final norm. No position table: the longest
// input is the folder's max_seq_length or tokenizer limit, capped at kMaxT5Tokens.
#include <string>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "engine/models/registry.h"
#include "engine/models/relative_position.h"
#include "engine/ops/activation.h"
#include "engine/ops/attention.h"
#include "engine/ops/embedding.h"
#include "engine/ops/linear.h"
#include "engine/ops/norm.h"

namespace quiver::engine {
namespace {

// The engine's bound on a T5 input (relative positions have no table): what the gateway's
// limit, sentence-transformers' max_seq_length or the tokenizer's, may go up to.
constexpr int64_t kMaxT5Tokens = 8192;

struct T5Config {
  int64_t vocab_size = 0, d_model = 0, d_kv = 0, d_ff = 0, num_layers = 0, num_heads = 0;
  int64_t num_buckets = 32, max_distance = 128;
  double eps = 1e-6;
  bool gated = false;
  ops::GeluForm gelu = ops::GeluForm::kTanh;  // gated-gelu is gelu_new
  std::string feed_forward_proj;
};

absl::StatusOr<T5Config> ParseT5Config(const JsonValue& json) {
  T5Config c;
  QUIVER_ASSIGN_OR_RETURN(c.vocab_size, JsonInt(json, "vocab_size"));
  QUIVER_ASSIGN_OR_RETURN(c.d_model, JsonInt(json, "d_model"));
  QUIVER_ASSIGN_OR_RETURN(c.d_kv, JsonInt(json, "d_kv"));
  QUIVER_ASSIGN_OR_RETURN(c.d_ff, JsonInt(json, "d_ff"));
  QUIVER_ASSIGN_OR_RETURN(c.num_layers, JsonInt(json, "num_layers"));
  QUIVER_ASSIGN_OR_RETURN(c.num_heads, JsonInt(json, "num_heads"));
  QUIVER_ASSIGN_OR_RETURN(c.num_buckets, JsonInt(json, "relative_attention_num_buckets", 32));
  QUIVER_ASSIGN_OR_RETURN(c.max_distance, JsonInt(json, "relative_attention_max_distance", 128));
  QUIVER_ASSIGN_OR_RETURN(c.eps, JsonDouble(json, "layer_norm_epsilon", 1e-6));
  QUIVER_ASSIGN_OR_RETURN(c.feed_forward_proj, JsonString(json, "feed_forward_proj", "relu"));
  for (const auto& [field, value] : {std::pair{"vocab_size", c.vocab_size},
                                     {"d_model", c.d_model},
                                     {"d_kv", c.d_kv},
                                     {"d_ff", c.d_ff},
                                     {"num_layers", c.num_layers},
                                     {"num_heads", c.num_heads},
                                     {"relative_attention_num_buckets", c.num_buckets},
                                     {"relative_attention_max_distance", c.max_distance}}) {
    QUIVER_RETURN_IF_ERROR(RequirePositive(field, value));
  }
  if (c.num_buckets < 4) {
    return absl::InvalidArgumentError("field 'relative_attention_num_buckets': at least 4");
  }
  // The buckets stop changing at max_distance only when it is past the exact range (a quarter of
  // the buckets); the bias table relies on it.
  if (c.max_distance <= c.num_buckets / 4) {
    return absl::InvalidArgumentError(
        StrCat("field 'relative_attention_max_distance': ", c.max_distance,
               " must exceed relative_attention_num_buckets / 4 (", c.num_buckets / 4, ")"));
  }
  if (c.feed_forward_proj == "relu") {
    c.gated = false;
  } else if (c.feed_forward_proj == "gated-gelu" || c.feed_forward_proj == "gated-gelu_new") {
    c.gated = true;  // transformers maps gated-gelu to gelu_new (the tanh form)
  } else {
    return absl::InvalidArgumentError(StrCat("field 'feed_forward_proj': unsupported '",
                                             c.feed_forward_proj, "' (relu, gated-gelu)"));
  }
  return c;
}

class T5EncoderModel final : public Model {
 public:
  T5EncoderModel(T5Config c, WeightLoader& w) : config_(std::move(c)) {
    const int64_t hidden = config_.d_model, inner = config_.num_heads * config_.d_kv,
                  ff = config_.d_ff;
    embed_ = w.Get("shared.weight", {config_.vocab_size, hidden});
    const int64_t heads = config_.num_heads, buckets = config_.num_buckets,
                  distance = config_.max_distance;
    position_bias_ =
        w.Derived("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                  {buckets, heads}, {heads, 2 * distance + 1}, [=](const float* weight) {
                    return RelativePositionBiasTable(weight, buckets, heads, distance);
                  });
    for (int64_t i = 0; i < config_.num_layers; ++i) {
      const std::string p = StrCat("encoder.block.", i, ".layer.");
      Layer l;
      l.attn_norm = w.Get(p + "0.layer_norm.weight", {hidden});
      l.qkv =
          w.FusedLinear({p + "0.SelfAttention.q", p + "0.SelfAttention.k", p + "0.SelfAttention.v"},
                        {inner, inner, inner}, hidden, /*bias=*/false);
      l.o = w.Linear(p + "0.SelfAttention.o", hidden, inner, false);
      l.ff_norm = w.Get(p + "1.layer_norm.weight", {hidden});
      if (config_.gated) {
        l.wi = w.FusedLinear({p + "1.DenseReluDense.wi_0", p + "1.DenseReluDense.wi_1"}, {ff, ff},
                             hidden, false);
      } else {
        l.wi = w.Linear(p + "1.DenseReluDense.wi", ff, hidden, false);
      }
      l.wo = w.Linear(p + "1.DenseReluDense.wo", hidden, ff, false);
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.Get("encoder.final_layer_norm.weight", {hidden});
    info_.family = "t5";
    info_.hidden_size = hidden;
    info_.num_heads = info_.num_kv_heads = heads;
    info_.head_dim = config_.d_kv;
    info_.causal = false;
    info_.vocab_size = config_.vocab_size;
    info_.type_vocab_size = 0;
    info_.max_input_tokens = kMaxT5Tokens;
    info_.default_pooling = PoolingMode::kMean;
    info_.attention_masks = true;  // the relative position bias
    info_.settings = {
        {"d_model", StrCat(hidden)},
        {"d_kv", StrCat(config_.d_kv)},
        {"d_ff", StrCat(ff)},
        {"num_layers", StrCat(config_.num_layers)},
        {"num_heads", StrCat(heads)},
        {"vocab_size", StrCat(config_.vocab_size)},
        {"relative_attention_num_buckets", StrCat(buckets)},
        {"relative_attention_max_distance", StrCat(distance)},
        {"layer_norm_epsilon", fmt::format("{}", config_.eps)},
        {"feed_forward_proj", config_.feed_forward_proj},
    };
  }

  double FlopsPerToken(int64_t seq_len) const override {
    const double hidden = static_cast<double>(config_.d_model);
    const double inner = static_cast<double>(config_.num_heads * config_.d_kv);
    const double ff = static_cast<double>(config_.d_ff) * (config_.gated ? 2.0 : 1.0);
    const double per_layer = 2.0 * (4 * hidden * inner + ff * hidden + hidden * config_.d_ff) +
                             4.0 * static_cast<double>(seq_len) * inner;
    return per_layer * static_cast<double>(config_.num_layers);
  }

  // x is the residual stream (f32 on every device); y each block's normed input, then its output.
  Tensor Forward(const ForwardContext& ctx) const override {
    const ExecContext& exec = ctx.exec;
    const int64_t num_tokens = ctx.num_tokens();
    const int64_t hidden = config_.d_model, inner = config_.num_heads * config_.d_kv;
    const float eps = static_cast<float>(config_.eps);
    const DType dtype = exec.act_dtype();
    const Tensor x = ctx.ws.F32(kResidual, {num_tokens, hidden});
    const Tensor y = ctx.ws.Get(kNormed, dtype, {num_tokens, hidden});
    const Tensor qkv = ctx.ws.Get(kQkv, dtype, {num_tokens, 3 * inner});
    const Tensor attended = ctx.ws.Get(kAttended, dtype, {num_tokens, inner});
    const Tensor up = ctx.ws.Get(kUp, dtype, {num_tokens, (config_.gated ? 2 : 1) * config_.d_ff});
    const Tensor act = config_.gated ? ctx.ws.Get(kAct, dtype, {num_tokens, config_.d_ff}) : up;
    AttentionPlan plan = ctx.plan;
    plan.scale = 1.0f;  // T5 folds the scale into its weights
    plan.position_bias = position_bias_.f32();
    plan.bias_max_distance = config_.max_distance;
    ops::Embedding(exec, ctx.token_ids, {}, {}, ops::EmbeddingTables{embed_}, x);
    ops::RmsNorm(exec, x, layers_.front().attn_norm, eps, y);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      ops::Linear(exec, y, l.qkv, qkv);
      ops::Attention(exec, ctx.attention, plan, qkv.Columns(0, inner),
                     qkv.Columns(inner, 2 * inner), qkv.Columns(2 * inner, 3 * inner), attended);
      ops::Linear(exec, attended, l.o, y);
      ops::AddRmsNorm(exec, x, y, l.ff_norm, eps);
      ops::Linear(exec, y, l.wi, up);
      if (config_.gated) {
        ops::GeluMul(exec, up, act, config_.gelu);
      } else {
        ops::Relu(exec, up);
      }
      ops::Linear(exec, act, l.wo, y);
      ops::AddRmsNorm(exec, x, y, i + 1 < layers_.size() ? layers_[i + 1].attn_norm : final_norm_,
                      eps);
    }
    return y;
  }

 private:
  enum Slot { kResidual, kNormed, kQkv, kAttended, kUp, kAct };
  struct Layer {
    Tensor attn_norm, ff_norm;
    ops::LinearWeights qkv, o, wi, wo;
  };
  T5Config config_;
  Tensor embed_, position_bias_, final_norm_;
  std::vector<Layer> layers_;
};

absl::StatusOr<std::unique_ptr<Model>> MakeT5Encoder(const ModelArgs& args) {
  QUIVER_ASSIGN_OR_RETURN(T5Config config, ParseT5Config(args.config));
  auto model = std::make_unique<T5EncoderModel>(config, args.weights);
  if (!args.weights.status().ok()) return args.weights.status();
  return model;
}

}  // namespace

void RegisterT5Models(ModelRegistry& registry) {
  registry.Add({"T5EncoderModel", "transformer.", MakeT5Encoder});
}

}  // namespace quiver::engine
