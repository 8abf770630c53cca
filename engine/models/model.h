// A model wires shared layers (kernels/cpu) over its weights. Built once at load; Forward is
// called by the engine's compute thread only (one batch at a time), with a workspace whose
// buffers are reused across batches.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/attention.h"
#include "engine/batch.h"
#include "engine/model_folder.h"
#include "engine/runtime/thread_pool.h"
#include "engine/runtime/weights.h"

namespace quiver::engine {

// Scratch buffers for one forward pass; grown on demand, never shrunk, so that a steady stream
// of batches allocates nothing but its outputs.
struct Workspace {
  std::vector<float> hidden, y, qkv, ctx, inter, act, pooled;
  std::vector<int32_t> positions;
};

struct ForwardContext {
  const RaggedBatch& batch;
  const std::vector<int32_t>& positions;  // [num_tokens], position of each token in its sequence
  const AttentionPlan& plan;              // built once per batch
  const AttentionBackend& attention;
  ThreadPool& pool;
  Workspace& ws;
};

struct ModelOptions {
  // Qwen3 rerankers: the vocabulary ids of "yes" and "no" (from the tokenizer).
  std::optional<int32_t> yes_token_id, no_token_id;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string_view family() const = 0;  // "bert", "qwen3": the attention table's key
  virtual bool causal() const = 0;
  virtual int64_t hidden_size() const = 0;
  virtual int64_t num_heads() const = 0;
  virtual int64_t num_kv_heads() const = 0;
  virtual int64_t head_dim() const = 0;
  // 0 for embedding models; the number of scores per sequence for scoring models.
  virtual int64_t num_labels() const { return 0; }
  // Model FLOPs per token in a sequence of `seq_len` tokens: 2 per weight of every Linear, and
  // attention's two products (what a benchmark divides by to compare with a GEMM rate).
  virtual double FlopsPerToken(int64_t seq_len) const = 0;
  // Final hidden states, [num_tokens, hidden], into `hidden`.
  virtual void Forward(const ForwardContext& ctx, std::vector<float>& hidden) const = 0;
  // Scores [num_seqs, num_labels] from the final hidden states (scoring models only).
  virtual void Score(const ForwardContext& ctx, const std::vector<float>& hidden,
                     std::vector<float>& scores) const;
};

absl::StatusOr<std::unique_ptr<Model>> MakeBertModel(const ModelFolder& folder, Weights& weights);
absl::StatusOr<std::unique_ptr<Model>> MakeQwen3Model(const ModelFolder& folder, Weights& weights,
                                                      const ModelOptions& options);

}  // namespace quiver::engine
