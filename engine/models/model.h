// A model: one architecture's forward pass over the ops layer (engine/ops), on one device. Each
// architecture lives in one file, engine/models/<arch>.cc, which parses its part of config.json,
// declares every weight once through the WeightLoader (name + shape -> the handle its forward
// pass reads) and registers its factory in models/registry.cc. Model files call ops:: only,
// never a kernel (tests/check_layers.py).
//
// Built once at load and immutable after; Forward and Score are called by the engine's compute
// thread only (one batch at a time), with a workspace whose buffers are reused across batches.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "engine/attention/backend.h"
#include "engine/base/attention_plan.h"
#include "engine/base/exec_context.h"
#include "engine/base/tensor.h"
#include "engine/base/workspace.h"
#include "engine/loader/pooling_config.h"
#include "engine/loader/weight_loader.h"

namespace quiver::engine {

// What the rest of the engine, the worker and the gateway need to know of a model, from its
// config: no caller ever switches on the architecture.
struct ModelInfo {
  std::string family;  // "bert", "qwen3": the attention table's key (attention/table.h)
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool causal = false;
  int64_t vocab_size = 0;
  int64_t type_vocab_size = 1;   // token type ids must be below this (1: only zeros)
  int64_t max_input_tokens = 0;  // the longest input the position table allows
  int64_t num_labels = 0;        // 0 for embedding models; scores per sequence for scorers
  // Scores as logit("yes") - logit("no") at the last token (Qwen3-Reranker style): needs
  // ModelOptions' token ids, and the gateway wraps pairs in the reranker's prompt.
  bool yes_no_reranker = false;
  // Decoder sequence classifiers score at the last token that is not this id (config.json's
  // pad_token_id, as transformers does; -1: at the last token). Their attention is causal, so the
  // engine leaves a sequence's trailing tokens of this id out of the pass (all but the first
  // where every token is one) without changing any row before them.
  int32_t score_before_trailing_id = -1;
  // SPLADE (a masked-LM head): num_labels is the vocabulary, and each sequence's score for a term
  // is the max over its tokens of that term's logit; the engine answers log(1 + ReLU(score)).
  bool sparse = false;
  // Whether the attention takes a sliding window or a position bias (AttentionPlan::has_masks):
  // only backends that SupportsMasks run it.
  bool attention_masks = false;
  // Pooling when the folder has no sentence-transformers Pooling module.
  PoolingMode default_pooling = PoolingMode::kCls;
  // The config values the model read, by config.json's names, for the start-up log and tests.
  std::vector<std::pair<std::string, std::string>> settings;
};

struct ModelOptions {
  // Yes/no rerankers: the vocabulary ids of "yes" and "no" (from the tokenizer).
  std::optional<int32_t> yes_token_id, no_token_id;
};

// One batch as the forward pass sees it: device tensors planned once (runtime/plan.h).
struct ForwardContext {
  const ExecContext& exec;
  Tensor token_ids;          // i32 [num_tokens]
  Tensor token_type_ids;     // i32 [num_tokens], or empty for all zeros
  Tensor positions;          // i32 [num_tokens], each token's position in its sequence
  Tensor seq_bounds;         // i32 [num_seqs, 2] (begin, end) of the batch's real sequences, host
  Tensor device_seq_bounds;  // the same in device memory (empty on the CPU: ops::Pool's rule)
  const AttentionPlan& plan;
  const AttentionBackend& attention;
  Workspace& ws;
  // i32 [n] host, distinct, or empty (every row): the only rows of the final hidden states read
  // after Forward (one per sequence where pooling or the scorer's head takes one token, on the
  // CPU). A model may leave the others as an earlier layer had them, running its last layer's
  // work after attention on these rows only.
  Tensor output_rows = {};

  int64_t num_tokens() const { return token_ids.dim(0); }
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelInfo& info() const { return info_; }
  // Model FLOPs per token in a sequence of `seq_len` tokens: 2 per weight of every Linear, and
  // attention's two products (what a benchmark divides by to compare with a GEMM rate).
  virtual double FlopsPerToken(int64_t seq_len) const = 0;
  // The final hidden states [num_tokens, hidden] on the device, in ctx.ws (valid until the
  // workspace is used again): f32, or ctx.exec.act_dtype() (ops::Pool takes either). Forward
  // enqueues device work only (no copy to the host, no wait, no allocation once the workspace
  // has grown to the batch), so that a CUDA graph can capture it.
  virtual Tensor Forward(const ForwardContext& ctx) const = 0;
  // Scores f32 [num_seqs, num_labels] of the real sequences from the final hidden states
  // (scoring models only).
  virtual void Score(const ForwardContext& /*ctx*/, const Tensor& /*hidden*/,
                     const Tensor& /*scores*/) const {}
  // Whether Score reads each sequence's first token's hidden state and no other (a classifier on
  // the CLS row), so that ForwardContext::output_rows may name those rows.
  virtual bool ScoresFirstTokens() const { return false; }
  // The same for each sequence's last token (a decoder's classifier or yes/no head).
  virtual bool ScoresLastTokens() const { return false; }

 protected:
  ModelInfo info_;
};

struct ModelArgs {
  std::string_view architecture;  // config.json's "architectures"[0]
  const JsonValue& config;        // config.json
  WeightLoader& weights;          // declare every weight here (kCheck or kPrepare)
  const ModelOptions& options;
};

// An architecture's factory: INVALID_ARGUMENT naming the config field that is missing or wrong,
// or the weight loader's status when a declared weight does not match the checkpoint.
using ModelFactory = absl::StatusOr<std::unique_ptr<Model>> (*)(const ModelArgs& args);

}  // namespace quiver::engine
