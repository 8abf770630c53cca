// BERT family (BERT, MiniLM, BGE, E5; RoBERTa/XLM-R position offsets): embeddings + post-LN
// encoder layers, and the sequence-classification heads of cross-encoders.
#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/models/model.h"

namespace quiver::engine {

void Model::Score(const ForwardContext&, const std::vector<float>&, std::vector<float>&) const {}

namespace {

class BertModel final : public Model {
 public:
  BertModel(const ModelConfig& config, Weights& w) : config_(config), c_(config.bert()) {
    word_ = w.Get("embeddings.word_embeddings.weight");
    position_ = w.Get("embeddings.position_embeddings.weight");
    type_ = c_.type_vocab_size > 0 ? w.Get("embeddings.token_type_embeddings.weight") : nullptr;
    emb_ln_g_ = w.Get("embeddings.LayerNorm.weight");
    emb_ln_b_ = w.Get("embeddings.LayerNorm.bias");
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      const std::string p = StrCat("encoder.layer.", i, ".");
      Layer l;
      const int64_t h = c_.hidden, inter = c_.intermediate;
      l.qkv_w = cpu::PackedWeights(w.Concat(p + "qkv.weight", {p + "attention.self.query.weight",
                                                               p + "attention.self.key.weight",
                                                               p + "attention.self.value.weight"}),
                                   3 * h, h);
      l.qkv_b = w.Concat(p + "qkv.bias", {p + "attention.self.query.bias",
                                          p + "attention.self.key.bias",
                                          p + "attention.self.value.bias"});
      l.o_w = cpu::PackedWeights(w.Get(p + "attention.output.dense.weight"), h, h);
      l.o_b = w.Get(p + "attention.output.dense.bias");
      l.ln1_g = w.Get(p + "attention.output.LayerNorm.weight");
      l.ln1_b = w.Get(p + "attention.output.LayerNorm.bias");
      l.i_w = cpu::PackedWeights(w.Get(p + "intermediate.dense.weight"), inter, h);
      l.i_b = w.Get(p + "intermediate.dense.bias");
      l.out_w = cpu::PackedWeights(w.Get(p + "output.dense.weight"), h, inter);
      l.out_b = w.Get(p + "output.dense.bias");
      l.ln2_g = w.Get(p + "output.LayerNorm.weight");
      l.ln2_b = w.Get(p + "output.LayerNorm.bias");
      layers_.push_back(std::move(l));
    }
    if (config.architecture == Architecture::kBertForSequenceClassification) {
      head_dense_w_ = w.Get("pooler.dense.weight");
      head_dense_b_ = w.Get("pooler.dense.bias");
      head_out_w_ = w.Get("classifier.weight");
      head_out_b_ = w.Get("classifier.bias");
    } else if (config.architecture == Architecture::kRobertaForSequenceClassification) {
      head_dense_w_ = w.Get("classifier.dense.weight");
      head_dense_b_ = w.Get("classifier.dense.bias");
      head_out_w_ = w.Get("classifier.out_proj.weight");
      head_out_b_ = w.Get("classifier.out_proj.bias");
    }
  }

  std::string_view family() const override { return "bert"; }
  bool causal() const override { return false; }
  int64_t hidden_size() const override { return c_.hidden; }
  int64_t num_heads() const override { return c_.num_heads; }
  int64_t num_kv_heads() const override { return c_.num_heads; }
  int64_t head_dim() const override { return c_.hidden / c_.num_heads; }
  int64_t num_labels() const override { return head_out_w_ ? c_.num_labels : 0; }

  double FlopsPerToken(int64_t seq_len) const override {
    const double h = static_cast<double>(c_.hidden), inter = static_cast<double>(c_.intermediate);
    const double per_layer = 2.0 * (3 * h * h + h * h + 2 * h * inter) + 4.0 * seq_len * h;
    return per_layer * static_cast<double>(c_.num_layers);
  }

  void Forward(const ForwardContext& ctx, std::vector<float>& hidden) const override {
    const int64_t t_count = ctx.batch.num_tokens();
    const int64_t h = c_.hidden;
    const float eps = static_cast<float>(c_.layer_norm_eps);
    Workspace& ws = ctx.ws;
    hidden.resize(static_cast<size_t>(t_count * h));
    ws.y.resize(hidden.size());
    ws.qkv.resize(static_cast<size_t>(t_count * 3 * h));
    ws.ctx.resize(hidden.size());
    ws.inter.resize(static_cast<size_t>(t_count * c_.intermediate));
    float* x = hidden.data();
    const int32_t* type_ids =
        ctx.batch.token_type_ids.empty() ? nullptr : ctx.batch.token_type_ids.data();
    cpu::EmbedLayerNorm(ctx.pool, ctx.batch.token_ids.data(), ctx.positions.data(), type_ids,
                        word_, position_ + c_.position_offset * h, type_, emb_ln_g_, emb_ln_b_, x,
                        t_count, h, eps);
    const cpu::Activation act =
        c_.hidden_act == "gelu" ? cpu::Activation::kGeluErf : cpu::Activation::kGeluTanh;
    for (const Layer& l : layers_) {
      cpu::Linear(ctx.pool, x, l.qkv_w, l.qkv_b, ws.qkv.data(), t_count);
      ctx.attention.Run(ctx.plan, ws.qkv.data(), 3 * h, ws.qkv.data() + h, ws.qkv.data() + 2 * h,
                        3 * h, ws.ctx.data(), ctx.pool);
      cpu::LinearAddLayerNorm(ctx.pool, ws.ctx.data(), l.o_w, l.o_b, x, l.ln1_g, l.ln1_b,
                              ws.y.data(), t_count, eps);
      cpu::Linear(ctx.pool, x, l.i_w, l.i_b, ws.inter.data(), t_count, act);
      cpu::LinearAddLayerNorm(ctx.pool, ws.inter.data(), l.out_w, l.out_b, x, l.ln2_g, l.ln2_b,
                              ws.y.data(), t_count, eps);
    }
  }

  void Score(const ForwardContext& ctx, const std::vector<float>& hidden,
             std::vector<float>& scores) const override {
    const int64_t s_count = ctx.batch.num_seqs();
    const int64_t h = c_.hidden;
    std::vector<float> cls(static_cast<size_t>(s_count * h)), dense(cls.size());
    for (int64_t s = 0; s < s_count; ++s) {
      const float* row = hidden.data() + static_cast<int64_t>(ctx.batch.cu_seqlens[s]) * h;
      std::copy(row, row + h, cls.begin() + s * h);
    }
    cpu::Linear(cls.data(), head_dense_w_, head_dense_b_, dense.data(), s_count, h, h);
    cpu::Tanh(dense.data(), s_count * h);
    scores.resize(static_cast<size_t>(s_count * c_.num_labels));
    cpu::Linear(dense.data(), head_out_w_, head_out_b_, scores.data(), s_count, c_.num_labels, h);
  }

 private:
  struct Layer {
    cpu::PackedWeights qkv_w, o_w, i_w, out_w;
    const float *qkv_b, *o_b, *ln1_g, *ln1_b, *i_b, *out_b, *ln2_g, *ln2_b;
  };
  ModelConfig config_;
  BertConfig c_;
  const float *word_, *position_, *type_, *emb_ln_g_, *emb_ln_b_;
  std::vector<Layer> layers_;
  const float* head_dense_w_ = nullptr;
  const float* head_dense_b_ = nullptr;
  const float* head_out_w_ = nullptr;
  const float* head_out_b_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeBertModel(const ModelFolder& folder, Weights& weights) {
  return std::make_unique<BertModel>(folder.config, weights);
}

}  // namespace quiver::engine
