// BERT family (BERT, MiniLM, BGE, E5; RoBERTa / XLM-R / CamemBERT with their position offset;
// DistilBERT, the same post-LN layers under other names and without token types; MPNet, the same
// layers under its names with a relative position bias shared by every layer): embeddings +
// post-LN encoder layers, and the sequence-classification heads of cross-encoders.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "engine/models/labels.h"
#include "engine/models/output_rows.h"
#include "engine/models/registry.h"
#include "engine/models/relative_position.h"
#include "engine/ops/activation.h"
#include "engine/ops/attention.h"
#include "engine/ops/embedding.h"
#include "engine/ops/heads.h"
#include "engine/ops/linear.h"
#include "engine/ops/norm.h"
#include "engine/ops/pooling.h"

namespace quiver::engine {
namespace {

enum class Head { kNone, kBertClassifier, kRobertaClassifier, kDistilBertClassifier, kSplade };

enum class Family { kBert, kRoberta, kDistilBert, kMpnet };

// Where each family keeps its weights (relative to the base model's prefix).
struct WeightNames {
  const char* layer;  // "encoder.layer." + i + "."
  const char *q, *k, *v, *o, *ln1, *up, *down, *ln2;
};

constexpr WeightNames kBertNames = {
    "encoder.layer.",       "attention.self.query",   "attention.self.key",
    "attention.self.value", "attention.output.dense", "attention.output.LayerNorm",
    "intermediate.dense",   "output.dense",           "output.LayerNorm"};
// transformers' DistilBertModel: transformer.layer.i.{attention.{q,k,v,out}_lin, sa_layer_norm,
// ffn.lin1, ffn.lin2, output_layer_norm}.
constexpr WeightNames kDistilBertNames = {
    "transformer.layer.", "attention.q_lin",   "attention.k_lin",
    "attention.v_lin",    "attention.out_lin", "sa_layer_norm",
    "ffn.lin1",           "ffn.lin2",          "output_layer_norm"};
// transformers' MPNetModel: encoder.layer.i.{attention.attn.{q,k,v,o}, attention.LayerNorm,
// intermediate.dense, output.dense, output.LayerNorm}.
constexpr WeightNames kMpnetNames = {
    "encoder.layer.",     "attention.attn.q", "attention.attn.k",
    "attention.attn.v",   "attention.attn.o", "attention.LayerNorm",
    "intermediate.dense", "output.dense",     "output.LayerNorm"};

// MPNet's relative position buckets: transformers computes them with 32 buckets and a maximum
// distance of 128 whatever the config says (MPNetEncoder.compute_position_bias), so the bias
// table must have 32 rows.
constexpr int64_t kMpnetBuckets = 32;
constexpr int64_t kMpnetMaxDistance = 128;

struct BertConfig {
  int64_t vocab_size = 0;
  int64_t hidden = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;
  int64_t pad_token_id = 0;
  int64_t position_offset = 0;  // 0 for BERT, pad_token_id + 1 for RoBERTa / XLM-R
  int64_t num_labels = 0;       // classification heads only
  double layer_norm_eps = 1e-12;
  std::string hidden_act;  // "gelu" (erf), "gelu_new" / "gelu_pytorch_tanh" (tanh), "relu"
  Family family = Family::kBert;
};

absl::Status CheckLabels(const JsonValue& json, BertConfig& c) {
  QUIVER_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(json));
  return absl::OkStatus();
}

// The config.json names of the sizes, for errors: BERT's and DistilBERT's schemas differ.
struct SizeFields {
  const char *vocab, *hidden, *layers, *heads, *intermediate;
};
constexpr SizeFields kBertFields = {"vocab_size", "hidden_size", "num_hidden_layers",
                                    "num_attention_heads", "intermediate_size"};
constexpr SizeFields kDistilBertFields = {"vocab_size", "dim", "n_layers", "n_heads", "hidden_dim"};

absl::Status CheckSizes(const BertConfig& c, const SizeFields& f) {
  QUIVER_RETURN_IF_ERROR(RequirePositive(f.vocab, c.vocab_size));
  QUIVER_RETURN_IF_ERROR(RequirePositive(f.hidden, c.hidden));
  QUIVER_RETURN_IF_ERROR(RequirePositive(f.layers, c.num_layers));
  QUIVER_RETURN_IF_ERROR(RequirePositive(f.heads, c.num_heads));
  QUIVER_RETURN_IF_ERROR(RequirePositive(f.intermediate, c.intermediate));
  QUIVER_RETURN_IF_ERROR(RequirePositive("max_position_embeddings", c.max_position_embeddings));
  if (c.hidden % c.num_heads != 0) {
    return absl::InvalidArgumentError(
        StrCat(f.hidden, " ", c.hidden, " is not a multiple of ", f.heads, " ", c.num_heads));
  }
  return absl::OkStatus();
}

// BERT's and MPNet's hidden_act: the erf GELU or its tanh approximation.
absl::Status CheckGeluActivation(const std::string& act) {
  if (act != "gelu" && act != "gelu_new" && act != "gelu_pytorch_tanh") {
    return absl::InvalidArgumentError(StrCat("field 'hidden_act': unsupported activation '", act,
                                             "' (gelu, gelu_new, gelu_pytorch_tanh)"));
  }
  return absl::OkStatus();
}

// transformers' DistilBertConfig: dim, n_layers, n_heads, hidden_dim, activation; LayerNorm eps
// fixed at 1e-12; no token types; positions learned or sinusoidal (either way stored in
// embeddings.position_embeddings.weight).
absl::StatusOr<BertConfig> ParseDistilBertConfig(const JsonValue& json, Head head) {
  BertConfig c;
  c.family = Family::kDistilBert;
  QUIVER_ASSIGN_OR_RETURN(c.vocab_size, JsonInt(json, "vocab_size"));
  QUIVER_ASSIGN_OR_RETURN(c.hidden, JsonInt(json, "dim"));
  QUIVER_ASSIGN_OR_RETURN(c.num_layers, JsonInt(json, "n_layers"));
  QUIVER_ASSIGN_OR_RETURN(c.num_heads, JsonInt(json, "n_heads"));
  QUIVER_ASSIGN_OR_RETURN(c.intermediate, JsonInt(json, "hidden_dim"));
  QUIVER_ASSIGN_OR_RETURN(c.max_position_embeddings, JsonInt(json, "max_position_embeddings", 512));
  QUIVER_ASSIGN_OR_RETURN(c.pad_token_id, JsonInt(json, "pad_token_id", 0));
  QUIVER_ASSIGN_OR_RETURN(c.hidden_act, JsonString(json, "activation", "gelu"));
  c.type_vocab_size = 0;
  c.layer_norm_eps = 1e-12;
  if (c.hidden_act != "gelu" && c.hidden_act != "relu") {
    return absl::InvalidArgumentError(
        StrCat("field 'activation': unsupported activation '", c.hidden_act, "' (gelu, relu)"));
  }
  if (head == Head::kSplade && c.hidden_act != "gelu") {
    return absl::InvalidArgumentError(StrCat("field 'activation': a masked-LM head with '",
                                             c.hidden_act, "' is not supported (gelu)"));
  }
  if (head != Head::kNone && head != Head::kSplade) QUIVER_RETURN_IF_ERROR(CheckLabels(json, c));
  QUIVER_RETURN_IF_ERROR(CheckSizes(c, kDistilBertFields));
  return c;
}

// transformers' MPNetConfig: BERT's size fields, no token types, positions counted from its fixed
// padding index 1 (so offset 2, as RoBERTa's), and the relative position bias.
absl::StatusOr<BertConfig> ParseMpnetConfig(const JsonValue& json, Head head) {
  BertConfig c;
  c.family = Family::kMpnet;
  QUIVER_ASSIGN_OR_RETURN(c.vocab_size, JsonInt(json, "vocab_size"));
  QUIVER_ASSIGN_OR_RETURN(c.hidden, JsonInt(json, "hidden_size"));
  QUIVER_ASSIGN_OR_RETURN(c.num_layers, JsonInt(json, "num_hidden_layers"));
  QUIVER_ASSIGN_OR_RETURN(c.num_heads, JsonInt(json, "num_attention_heads"));
  QUIVER_ASSIGN_OR_RETURN(c.intermediate, JsonInt(json, "intermediate_size"));
  QUIVER_ASSIGN_OR_RETURN(c.max_position_embeddings, JsonInt(json, "max_position_embeddings", 512));
  QUIVER_ASSIGN_OR_RETURN(c.layer_norm_eps, JsonDouble(json, "layer_norm_eps", 1e-12));
  QUIVER_ASSIGN_OR_RETURN(c.hidden_act, JsonString(json, "hidden_act", "gelu"));
  QUIVER_ASSIGN_OR_RETURN(int64_t buckets,
                          JsonInt(json, "relative_attention_num_buckets", kMpnetBuckets));
  if (buckets != kMpnetBuckets) {
    return absl::InvalidArgumentError(StrCat(
        "field 'relative_attention_num_buckets': transformers' MPNet computes ", kMpnetBuckets,
        " buckets whatever the config says; a table of ", buckets, " rows is not supported"));
  }
  QUIVER_RETURN_IF_ERROR(CheckGeluActivation(c.hidden_act));
  c.type_vocab_size = 0;
  c.pad_token_id = 1;
  c.position_offset = 2;
  if (head != Head::kNone) QUIVER_RETURN_IF_ERROR(CheckLabels(json, c));
  QUIVER_RETURN_IF_ERROR(CheckSizes(c, kBertFields));
  if (c.max_position_embeddings <= c.position_offset) {
    return absl::InvalidArgumentError(
        StrCat("field 'max_position_embeddings': ", c.max_position_embeddings,
               " leaves no position after MPNet's offset of ", c.position_offset));
  }
  return c;
}

absl::StatusOr<BertConfig> ParseBertConfig(const JsonValue& json, bool roberta, Head head) {
  BertConfig c;
  c.family = roberta ? Family::kRoberta : Family::kBert;
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
    return absl::InvalidArgumentError(
        StrCat("field 'position_embedding_type': only 'absolute' is supported, got '",
               position_type, "'"));
  }
  QUIVER_RETURN_IF_ERROR(CheckGeluActivation(c.hidden_act));
  c.position_offset = roberta ? c.pad_token_id + 1 : 0;
  if (head != Head::kNone && head != Head::kSplade) QUIVER_RETURN_IF_ERROR(CheckLabels(json, c));
  QUIVER_RETURN_IF_ERROR(CheckSizes(c, kBertFields));
  return c;
}

// SPLADE's chunk of tokens through the masked-LM head at once: [chunk, vocab] logits.
constexpr int64_t kSpladeChunk = 256;

// Each family's masked-LM head as transformers names it: the transform's dense and LayerNorm,
// the decoder (absent where tied to the word embeddings) and the decoder's bias.
struct MlmNames {
  const char* dense;
  const char* norm;
  const char* decoder;
  const char* bias;
};

const MlmNames& MlmNamesOf(Family family) {
  static const MlmNames kBertNames{"cls.predictions.transform.dense",
                                   "cls.predictions.transform.LayerNorm", "cls.predictions.decoder",
                                   "cls.predictions.bias"};
  static const MlmNames kDistilBertNames{"vocab_transform", "vocab_layer_norm", "vocab_projector",
                                         "vocab_projector.bias"};
  static const MlmNames kRobertaNames{"lm_head.dense", "lm_head.layer_norm", "lm_head.decoder",
                                      "lm_head.bias"};
  return family == Family::kDistilBert ? kDistilBertNames
         : family == Family::kRoberta  ? kRobertaNames
                                       : kBertNames;
}

class BertModel final : public Model {
 public:
  BertModel(BertConfig c, Head head, WeightLoader& w) : config_(std::move(c)) {
    const int64_t hidden = config_.hidden, inter = config_.intermediate;
    const WeightNames& n = config_.family == Family::kDistilBert ? kDistilBertNames
                           : config_.family == Family::kMpnet    ? kMpnetNames
                                                                 : kBertNames;
    word_ = w.Get("embeddings.word_embeddings.weight", {config_.vocab_size, hidden});
    position_ =
        w.Get("embeddings.position_embeddings.weight", {config_.max_position_embeddings, hidden});
    if (config_.type_vocab_size > 0) {
      type_ = w.Get("embeddings.token_type_embeddings.weight", {config_.type_vocab_size, hidden});
    }
    emb_ln_g_ = w.Get("embeddings.LayerNorm.weight", {hidden});
    emb_ln_b_ = w.Get("embeddings.LayerNorm.bias", {hidden});
    if (config_.family == Family::kMpnet) {
      const int64_t heads = config_.num_heads;
      position_bias_ = w.Derived("encoder.relative_attention_bias.weight", {kMpnetBuckets, heads},
                                 {heads, 2 * kMpnetMaxDistance + 1}, [heads](const float* weight) {
                                   return RelativePositionBiasTable(weight, kMpnetBuckets, heads,
                                                                    kMpnetMaxDistance);
                                 });
    }
    for (int64_t i = 0; i < config_.num_layers; ++i) {
      const std::string p = StrCat(n.layer, i, ".");
      Layer l;
      l.qkv = w.FusedLinear({p + n.q, p + n.k, p + n.v}, {hidden, hidden, hidden}, hidden,
                            /*bias=*/true);
      l.o = w.Linear(p + n.o, hidden, hidden, true);
      l.ln1_g = w.Get(p + n.ln1 + ".weight", {hidden});
      l.ln1_b = w.Get(p + n.ln1 + ".bias", {hidden});
      l.intermediate = w.Linear(p + n.up, inter, hidden, true);
      l.out = w.Linear(p + n.down, hidden, inter, true);
      l.ln2_g = w.Get(p + n.ln2 + ".weight", {hidden});
      l.ln2_b = w.Get(p + n.ln2 + ".bias", {hidden});
      layers_.push_back(std::move(l));
    }
    using Scope = WeightLoader::Scope;
    if (head == Head::kBertClassifier) {
      head_dense_ =
          w.Linear("pooler.dense", hidden, hidden, true, Scope::kBase, /*task_head=*/true);
      head_out_ = w.Linear("classifier", config_.num_labels, hidden, true, Scope::kHead);
    } else if (head == Head::kRobertaClassifier) {
      head_dense_ = w.Linear("classifier.dense", hidden, hidden, true, Scope::kHead);
      head_out_ = w.Linear("classifier.out_proj", config_.num_labels, hidden, true, Scope::kHead);
    } else if (head == Head::kDistilBertClassifier) {
      head_dense_ = w.Linear("pre_classifier", hidden, hidden, true, Scope::kHead);
      head_out_ = w.Linear("classifier", config_.num_labels, hidden, true, Scope::kHead);
      head_activation_ = ops::HeadActivation::kRelu;
    } else if (head == Head::kSplade) {
      // The masked-LM head: transform (dense, activation, LayerNorm), then the decoder, tied to
      // the word embeddings unless the checkpoint has its own, with its bias. BertForMaskedLM's
      // activation is hidden_act; DistilBertForMaskedLM's its `activation` (GELU only here);
      // RobertaLMHead's always the erf GELU.
      const MlmNames& n = MlmNamesOf(config_.family);
      mlm_dense_ = w.Linear(n.dense, hidden, hidden, true, Scope::kHead);
      mlm_ln_g_ = w.Get(StrCat(n.norm, ".weight"), {hidden}, Scope::kHead);
      mlm_ln_b_ = w.Get(StrCat(n.norm, ".bias"), {hidden}, Scope::kHead);
      const int64_t vocab = config_.vocab_size;
      mlm_decoder_ = w.Has(StrCat(n.decoder, ".weight"), Scope::kHead)
                         ? w.Linear(n.decoder, vocab, hidden, true, Scope::kHead,
                                    /*task_head=*/false, n.bias)
                         : w.Linear("embeddings.word_embeddings", vocab, hidden, true, Scope::kBase,
                                    /*task_head=*/true, n.bias);
      mlm_activation_ = config_.family == Family::kRoberta || config_.hidden_act == "gelu"
                            ? ops::Epilogue::kGeluErf
                            : ops::Epilogue::kGeluTanh;
    }
    info_.family = "bert";  // the attention choice table: bidirectional multi-head attention
    info_.hidden_size = hidden;
    info_.num_heads = info_.num_kv_heads = config_.num_heads;
    info_.head_dim = hidden / config_.num_heads;
    info_.causal = false;
    info_.vocab_size = config_.vocab_size;
    info_.type_vocab_size = config_.type_vocab_size;
    info_.max_input_tokens = config_.max_position_embeddings - config_.position_offset;
    info_.num_labels = head == Head::kNone     ? 0
                       : head == Head::kSplade ? config_.vocab_size
                                               : config_.num_labels;
    info_.sparse = head == Head::kSplade;
    info_.default_pooling = PoolingMode::kCls;
    info_.attention_masks = config_.family == Family::kMpnet;
    info_.settings = {
        {"hidden_size", StrCat(hidden)},
        {"num_hidden_layers", StrCat(config_.num_layers)},
        {"num_attention_heads", StrCat(config_.num_heads)},
        {"intermediate_size", StrCat(inter)},
        {"vocab_size", StrCat(config_.vocab_size)},
        {"type_vocab_size", StrCat(config_.type_vocab_size)},
        {"max_position_embeddings", StrCat(config_.max_position_embeddings)},
        {"position_offset", StrCat(config_.position_offset)},
        {"layer_norm_eps", fmt::format("{}", config_.layer_norm_eps)},
        {"hidden_act", config_.hidden_act},
    };
    if (head != Head::kNone && head != Head::kSplade) {
      info_.settings.emplace_back("num_labels", StrCat(config_.num_labels));
    }
  }

  double FlopsPerToken(int64_t seq_len) const override {
    const double hidden = static_cast<double>(config_.hidden),
                 inter = static_cast<double>(config_.intermediate);
    const double per_layer =
        2.0 * (3 * hidden * hidden + hidden * hidden + 2 * hidden * inter) + 4.0 * seq_len * hidden;
    return per_layer * static_cast<double>(config_.num_layers);
  }

  // On CUDA the residual stream x stays f32 while the GEMMs and attention read bf16: x_act is
  // x's bf16 copy, written by the same kernels that write x (on the CPU x serves both).
  Tensor Forward(const ForwardContext& ctx) const override {
    const ExecContext& exec = ctx.exec;
    const int64_t num_tokens = ctx.num_tokens();
    const int64_t hidden = config_.hidden;
    const float eps = static_cast<float>(config_.layer_norm_eps);
    const DType act = exec.act_dtype();
    const bool split = act != DType::kF32;
    const Tensor x = ctx.ws.F32(kHidden, {num_tokens, hidden});
    const Tensor x_copy = split ? ctx.ws.Get(kHiddenAct, act, {num_tokens, hidden}) : Tensor();
    const Tensor& x_act = split ? x_copy : x;
    const Tensor scratch = ctx.ws.Get(kScratch, act, {num_tokens, hidden});
    const Tensor qkv = ctx.ws.Get(kQkv, act, {num_tokens, 3 * hidden});
    const Tensor attended = ctx.ws.Get(kAttended, act, {num_tokens, hidden});
    const Tensor inter = ctx.ws.Get(kIntermediate, act, {num_tokens, config_.intermediate});
    const ops::EmbeddingTables tables{
        word_,     position_.Rows(config_.position_offset, config_.max_position_embeddings),
        type_,     emb_ln_g_,
        emb_ln_b_, eps};
    ops::Embedding(exec, ctx.token_ids, ctx.positions, ctx.token_type_ids, tables, x, x_copy);
    AttentionPlan plan = ctx.plan;
    if (config_.family == Family::kMpnet) {
      plan.position_bias = position_bias_.f32();
      plan.bias_max_distance = kMpnetMaxDistance;
    }
    const bool relu = config_.hidden_act == "relu";
    const ops::Epilogue up_epilogue = relu                           ? ops::Epilogue::kNone
                                      : config_.hidden_act == "gelu" ? ops::Epilogue::kGeluErf
                                                                     : ops::Epilogue::kGeluTanh;
    for (const Layer& l : layers_) {
      const bool picks_rows = &l == &layers_.back() && !ctx.output_rows.empty() && !split;
      if (!relu && !split && !picks_rows) {  // the whole layer, per sequence where it can
        const ops::PostLnLayerArgs layer{&l.qkv,      &l.o,   l.ln1_g, l.ln1_b, &l.intermediate,
                                         up_epilogue, &l.out, l.ln2_g, l.ln2_b};
        ops::PostLnLayer(exec, x, layer, ctx.attention, plan, eps, qkv, attended, inter, scratch);
        continue;
      }
      ops::QkvAttention(exec, x_act, l.qkv, qkv, ctx.attention, plan, attended);
      if (picks_rows) {
        OutputRowsAfterAttention(ctx, l, x, attended, relu, up_epilogue, eps);
      } else if (relu) {
        ops::LinearAddLayerNorm(exec, attended, l.o, x, l.ln1_g, l.ln1_b, eps, scratch, x_copy);
        ops::Linear(exec, x_act, l.intermediate, inter);
        ops::Relu(exec, inter);
        ops::LinearAddLayerNorm(exec, inter, l.out, x, l.ln2_g, l.ln2_b, eps, scratch, x_copy);
      } else {
        // The output projection, LayerNorm and the feed-forward: fused per block of rows where
        // the op can (on the CPU, long batches), else the three layers.
        const ops::AttentionOutputArgs first{attended, &l.o, l.ln1_g, l.ln1_b};
        ops::FeedForwardAddLayerNorm(exec, x_act, l.intermediate, up_epilogue, l.out, x, l.ln2_g,
                                     l.ln2_b, eps, inter, scratch, x_copy, &first);
      }
    }
    return x;
  }

  bool ScoresFirstTokens() const override { return !info_.sparse; }

  // The CLS rows through the classifier (whose GEMMs read bf16 on CUDA); SPLADE: each sequence's
  // tokens, kSpladeChunk at a time, through the masked-LM head, the running max of each term's
  // logit per sequence (the engine applies log(1 + ReLU), which keeps the max).
  void Score(const ForwardContext& ctx, const Tensor& hidden, const Tensor& scores) const override {
    if (info_.sparse) {
      SpladeScore(ctx, hidden, scores);
      return;
    }
    const int64_t num_seqs = ctx.seq_bounds.dim(0);
    const DType act = ctx.exec.act_dtype();
    const Tensor cls = ctx.ws.F32(kCls, {num_seqs, config_.hidden});
    ops::Pool(ctx.exec, hidden, ctx.seq_bounds, ops::PoolMode::kCls, cls, ctx.device_seq_bounds);
    Tensor cls_act = cls;
    if (act != DType::kF32) {
      cls_act = ctx.ws.Get(kClsAct, act, {num_seqs, config_.hidden});
      ops::Convert(ctx.exec, cls, cls_act);
    }
    const Tensor dense = ctx.ws.Get(kDense, act, {num_seqs, config_.hidden});
    ops::ClassifierHead(ctx.exec, cls_act, head_dense_, head_out_, dense, scores, head_activation_);
  }

  void SpladeScore(const ForwardContext& ctx, const Tensor& hidden, const Tensor& scores) const {
    const ExecContext& exec = ctx.exec;
    const DType act = exec.act_dtype();
    const int64_t hidden_size = config_.hidden;
    const float eps = static_cast<float>(config_.layer_norm_eps);
    const int32_t* bounds = ctx.seq_bounds.i32();
    for (int64_t s = 0; s < ctx.seq_bounds.dim(0); ++s) {
      const int64_t begin = bounds[2 * s], end = bounds[2 * s + 1];
      for (int64_t t0 = begin; t0 < end; t0 += kSpladeChunk) {
        const int64_t n = std::min(kSpladeChunk, end - t0);
        Tensor in = hidden.Rows(t0, t0 + n);
        if (act != DType::kF32) {
          const Tensor converted = ctx.ws.Get(kCls, act, {n, hidden_size});
          ops::Convert(exec, in, converted);
          in = converted;
        }
        const Tensor transformed = ctx.ws.Get(kDense, act, {n, hidden_size});
        ops::Linear(exec, in, mlm_dense_, transformed, mlm_activation_);
        ops::LayerNorm(exec, transformed, mlm_ln_g_, mlm_ln_b_, eps, transformed);
        const Tensor logits = ctx.ws.Get(kClsAct, act, {n, config_.vocab_size});
        ops::Linear(exec, transformed, mlm_decoder_, logits);
        ops::MaxRows(exec, logits, scores.Rows(s, s + 1), /*accumulate=*/t0 > begin);
      }
    }
  }

 private:
  enum Slot {
    kHidden,
    kHiddenAct,
    kScratch,
    kQkv,
    kAttended,
    kIntermediate,
    kCls,
    kClsAct,
    kDense,
    kPicked,  // OutputRowsAfterAttention's
    kPickedAttended,
    kPickedScratch,
    kPickedIntermediate
  };
  struct Layer {
    ops::LinearWeights qkv, o, intermediate, out;
    Tensor ln1_g, ln1_b, ln2_g, ln2_b;
  };

  // The last layer after attention on ctx.output_rows only (output_rows.h): the output
  // projection, LayerNorms and feed-forward on their rows, scattered back into x.
  void OutputRowsAfterAttention(const ForwardContext& ctx, const Layer& l, const Tensor& x,
                                const Tensor& attended, bool relu, ops::Epilogue up_epilogue,
                                float eps) const {
    const ExecContext& exec = ctx.exec;
    const OutputRows rows = GatherOutputRows(ctx, x, attended, kPicked, kPickedAttended);
    const Tensor& picked = rows.x;
    const Tensor& picked_attended = rows.attended;
    const int64_t n = picked.dim(0);
    const Tensor scratch = ctx.ws.F32(kPickedScratch, {n, config_.hidden});
    const Tensor inter = ctx.ws.F32(kPickedIntermediate, {n, config_.intermediate});
    if (relu) {
      ops::LinearAddLayerNorm(exec, picked_attended, l.o, picked, l.ln1_g, l.ln1_b, eps, scratch);
      ops::Linear(exec, picked, l.intermediate, inter);
      ops::Relu(exec, inter);
      ops::LinearAddLayerNorm(exec, inter, l.out, picked, l.ln2_g, l.ln2_b, eps, scratch);
    } else {
      const ops::AttentionOutputArgs first{picked_attended, &l.o, l.ln1_g, l.ln1_b};
      ops::FeedForwardAddLayerNorm(exec, picked, l.intermediate, up_epilogue, l.out, picked,
                                   l.ln2_g, l.ln2_b, eps, inter, scratch, Tensor(), &first);
    }
    ops::ScatterRows(exec, picked, ctx.output_rows, x);
  }

  BertConfig config_;
  Tensor word_, position_, type_, emb_ln_g_, emb_ln_b_;
  Tensor position_bias_;  // MPNet: [heads, 2 · 128 + 1] per distance (relative_position.h)
  std::vector<Layer> layers_;
  ops::LinearWeights head_dense_, head_out_;
  ops::LinearWeights mlm_dense_, mlm_decoder_;  // SPLADE's masked-LM head
  ops::Epilogue mlm_activation_ = ops::Epilogue::kGeluErf;
  Tensor mlm_ln_g_, mlm_ln_b_;
  ops::HeadActivation head_activation_ = ops::HeadActivation::kTanh;
};

template <Head kHead>
absl::StatusOr<std::unique_ptr<Model>> MakeDistilBert(const ModelArgs& args) {
  QUIVER_ASSIGN_OR_RETURN(BertConfig config, ParseDistilBertConfig(args.config, kHead));
  auto model = std::make_unique<BertModel>(config, kHead, args.weights);
  if (!args.weights.status().ok()) return args.weights.status();
  return model;
}

template <Head kHead>
absl::StatusOr<std::unique_ptr<Model>> MakeMpnet(const ModelArgs& args) {
  QUIVER_ASSIGN_OR_RETURN(BertConfig config, ParseMpnetConfig(args.config, kHead));
  auto model = std::make_unique<BertModel>(config, kHead, args.weights);
  if (!args.weights.status().ok()) return args.weights.status();
  return model;
}

template <bool kRoberta, Head kHead>
absl::StatusOr<std::unique_ptr<Model>> MakeBert(const ModelArgs& args) {
  QUIVER_ASSIGN_OR_RETURN(BertConfig config, ParseBertConfig(args.config, kRoberta, kHead));
  auto model = std::make_unique<BertModel>(config, kHead, args.weights);
  if (!args.weights.status().ok()) return args.weights.status();
  return model;
}

}  // namespace

void RegisterBertModels(ModelRegistry& registry) {
  registry.Add({"BertModel", "bert.", MakeBert<false, Head::kNone>});
  registry.Add({"BertForSequenceClassification", "bert.", MakeBert<false, Head::kBertClassifier>});
  // A masked-LM checkpoint is served as SPLADE (TEI's splade pooling; sentence-transformers'
  // SparseEncoder folders say so with MLMTransformer + SpladePooling).
  registry.Add({"BertForMaskedLM", "bert.", MakeBert<false, Head::kSplade>});
  registry.Add({"RobertaModel", "roberta.", MakeBert<true, Head::kNone>});
  registry.Add({"RobertaForMaskedLM", "roberta.", MakeBert<true, Head::kSplade>});
  registry.Add({"XLMRobertaForMaskedLM", "roberta.", MakeBert<true, Head::kSplade>});
  registry.Add({"XLMRobertaModel", "roberta.", MakeBert<true, Head::kNone>});
  registry.Add(
      {"RobertaForSequenceClassification", "roberta.", MakeBert<true, Head::kRobertaClassifier>});
  registry.Add({"XLMRobertaForSequenceClassification", "roberta.",
                MakeBert<true, Head::kRobertaClassifier>});
  // CamemBERT is RoBERTa under its own name (position offset padding_idx + 1 included).
  registry.Add({"CamembertModel", "roberta.", MakeBert<true, Head::kNone>});
  registry.Add(
      {"CamembertForSequenceClassification", "roberta.", MakeBert<true, Head::kRobertaClassifier>});
  registry.Add({"DistilBertModel", "distilbert.", MakeDistilBert<Head::kNone>});
  registry.Add({"DistilBertForSequenceClassification", "distilbert.",
                MakeDistilBert<Head::kDistilBertClassifier>});
  registry.Add({"DistilBertForMaskedLM", "distilbert.", MakeDistilBert<Head::kSplade>});
  registry.Add({"MPNetModel", "mpnet.", MakeMpnet<Head::kNone>});
  // MPNetClassificationHead is RoBERTa's: classifier.dense, tanh, classifier.out_proj.
  registry.Add({"MPNetForSequenceClassification", "mpnet.", MakeMpnet<Head::kRobertaClassifier>});
}

}  // namespace quiver::engine
