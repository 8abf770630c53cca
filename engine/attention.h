// Attention backends: one interface, several implementations, chosen per model family and
// sequence length by a table (overridable by --attention-backend). CPU has a reference loop
// (whole score rows per query), a packed loop (K transposed per head), a tiled online-softmax
// loop (key blocks of 64), and flash: the online softmax over blocks of 128 queries x 512 keys
// with both products in BLAS, never more than one score block per thread. CUDA backends register
// here when built.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace quiver::engine {

class ThreadPool;

// Per-batch attention metadata, built once before the layer loop and read-only after.
struct AttentionPlan {
  const int32_t* cu_seqlens = nullptr;  // [num_seqs + 1]
  int64_t num_seqs = 0;
  int64_t max_seqlen = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // GQA: query head h reads kv head h / (num_heads / num_kv_heads)
  int64_t head_dim = 0;
  bool causal = false;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string_view name() const = 0;
  // out[t, h * head_dim + d] for each token t of each sequence. q has row stride q_stride
  // floats (heads packed), k and v row stride kv_stride; out has num_heads * head_dim per row.
  virtual void Run(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
                   const float* v, int64_t kv_stride, float* out, ThreadPool& pool) const = 0;
};

// "reference", "packed", "tiled" or "flash"; INVALID_ARGUMENT naming the known ones otherwise.
absl::StatusOr<std::unique_ptr<AttentionBackend>> MakeAttentionBackend(std::string_view name);

// The table: which backend for a model family ("bert", "qwen3") and the batch's longest
// sequence. Flash at every length today (measured: docs/benchmarks.md); "reference" is the plain
// loop the others are tested against (tests/engine/attention_test.cc).
std::string_view ChooseAttentionBackend(std::string_view family, int64_t max_seqlen);

}  // namespace quiver::engine
