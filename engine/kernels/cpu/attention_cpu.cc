// CPU attention backends over ragged batches. Work items are (sequence, head) pairs spread over
// the thread pool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/strings.h"
#include "engine/attention.h"
#include "engine/kernels/cpu/gemm.h"
#include "engine/kernels/cpu/vec.h"
#include "engine/runtime/thread_pool.h"

namespace quiver::engine {
namespace {

// Dot product of two head_dim vectors.
inline float Dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

class ReferenceAttention final : public AttentionBackend {
 public:
  std::string_view name() const override { return "reference"; }

  void Run(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
           const float* v, int64_t kv_stride, float* out, ThreadPool& pool) const override {
    const int64_t d = plan.head_dim;
    const int64_t group = plan.num_heads / plan.num_kv_heads;
    const int64_t out_stride = plan.num_heads * d;
    pool.ParallelFor(plan.num_seqs * plan.num_heads, [&](int64_t item) {
      const int64_t s = item / plan.num_heads, h = item % plan.num_heads;
      const int64_t begin = plan.cu_seqlens[s], len = plan.cu_seqlens[s + 1] - begin;
      const int64_t kvh = h / group;
      thread_local std::vector<float> scores;
      scores.resize(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) {
        const float* qi = q + (begin + i) * q_stride + h * d;
        const int64_t visible = plan.causal ? i + 1 : len;
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          scores[j] = Dot(qi, k + (begin + j) * kv_stride + kvh * d, d) * plan.scale;
          max_score = std::max(max_score, scores[j]);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < visible; ++j) {
          scores[j] = std::exp(scores[j] - max_score);
          sum += scores[j];
        }
        float* o = out + (begin + i) * out_stride + h * d;
        std::fill(o, o + d, 0.0f);
        for (int64_t j = 0; j < visible; ++j) {
          const float p = scores[j] / sum;
          const float* vj = v + (begin + j) * kv_stride + kvh * d;
          for (int64_t c = 0; c < d; ++c) o[c] += p * vj[c];
        }
      }
    });
  }
};

// The reference computation with memory laid out for the vector units: per (sequence, head) K is
// transposed to [head_dim, len] so that a query's scores are an axpy over keys (no horizontal
// sums), and P·V accumulates whole head_dim rows. Same math and order of softmax as the
// reference loop; the default for short sequences.
class PackedAttention final : public AttentionBackend {
 public:
  std::string_view name() const override { return "packed"; }

  void Run(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
           const float* v, int64_t kv_stride, float* out, ThreadPool& pool) const override {
    const int64_t d = plan.head_dim;
    const int64_t group = plan.num_heads / plan.num_kv_heads;
    const int64_t out_stride = plan.num_heads * d;
    pool.ParallelFor(plan.num_seqs * plan.num_heads, [&](int64_t item) {
      const int64_t s = item / plan.num_heads, h = item % plan.num_heads;
      const int64_t begin = plan.cu_seqlens[s], len = plan.cu_seqlens[s + 1] - begin;
      const int64_t kvh = h / group;
      thread_local std::vector<float> kt, scores;
      kt.resize(static_cast<size_t>(d * len));
      scores.resize(static_cast<size_t>(len));
      for (int64_t j = 0; j < len; ++j) {
        const float* kj = k + (begin + j) * kv_stride + kvh * d;
        for (int64_t c = 0; c < d; ++c) kt[c * len + j] = kj[c];
      }
      for (int64_t i = 0; i < len; ++i) {
        const float* qi = q + (begin + i) * q_stride + h * d;
        const int64_t visible = plan.causal ? i + 1 : len;
        float* sc = scores.data();
        std::fill(sc, sc + visible, 0.0f);
        for (int64_t c = 0; c < d; ++c) {
          const float qc = qi[c];
          const float* row = kt.data() + c * len;
          for (int64_t j = 0; j < visible; ++j) sc[j] += qc * row[j];
        }
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          sc[j] *= plan.scale;
          max_score = std::max(max_score, sc[j]);
        }
        for (int64_t j = 0; j < visible; ++j) sc[j] -= max_score;
        cpu::vec::Exp(sc, visible);
        const float inv = 1.0f / cpu::vec::Sum(sc, visible);
        float* o = out + (begin + i) * out_stride + h * d;
        std::fill(o, o + d, 0.0f);
        for (int64_t j = 0; j < visible; ++j) {
          const float p = sc[j] * inv;
          const float* vj = v + (begin + j) * kv_stride + kvh * d;
          for (int64_t c = 0; c < d; ++c) o[c] += p * vj[c];
        }
      }
    });
  }
};

// Online softmax over key blocks (FlashAttention's recurrence, on CPU): a running max and sum
// per query, the accumulator rescaled when the max grows.
class TiledAttention final : public AttentionBackend {
 public:
  static constexpr int64_t kBlock = 64;
  std::string_view name() const override { return "tiled"; }

  void Run(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
           const float* v, int64_t kv_stride, float* out, ThreadPool& pool) const override {
    const int64_t d = plan.head_dim;
    const int64_t group = plan.num_heads / plan.num_kv_heads;
    const int64_t out_stride = plan.num_heads * d;
    pool.ParallelFor(plan.num_seqs * plan.num_heads, [&](int64_t item) {
      const int64_t s = item / plan.num_heads, h = item % plan.num_heads;
      const int64_t begin = plan.cu_seqlens[s], len = plan.cu_seqlens[s + 1] - begin;
      const int64_t kvh = h / group;
      float block[kBlock];
      for (int64_t i = 0; i < len; ++i) {
        const float* qi = q + (begin + i) * q_stride + h * d;
        float* o = out + (begin + i) * out_stride + h * d;
        std::fill(o, o + d, 0.0f);
        float running_max = -std::numeric_limits<float>::infinity();
        float running_sum = 0.0f;
        const int64_t visible = plan.causal ? i + 1 : len;
        for (int64_t j0 = 0; j0 < visible; j0 += kBlock) {
          const int64_t n = std::min(kBlock, visible - j0);
          float block_max = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < n; ++j) {
            block[j] = Dot(qi, k + (begin + j0 + j) * kv_stride + kvh * d, d) * plan.scale;
            block_max = std::max(block_max, block[j]);
          }
          const float new_max = std::max(running_max, block_max);
          const float correction = std::exp(running_max - new_max);
          if (correction != 1.0f) {
            for (int64_t c = 0; c < d; ++c) o[c] *= correction;
          }
          running_sum *= correction;
          for (int64_t j = 0; j < n; ++j) {
            const float p = std::exp(block[j] - new_max);
            running_sum += p;
            const float* vj = v + (begin + j0 + j) * kv_stride + kvh * d;
            for (int64_t c = 0; c < d; ++c) o[c] += p * vj[c];
          }
          running_max = new_max;
        }
        const float inv = 1.0f / running_sum;
        for (int64_t c = 0; c < d; ++c) o[c] *= inv;
      }
    });
  }
};

// FlashAttention's recurrence with both products on the packed GEMM (kernels/cpu/gemm.h): per
// (sequence, head, run of query blocks of up to kQueryBlock queries), one block of up to
// kKeyBlock keys at a time is packed (K as the "weights", V transposed) once for the whole run;
// each query block of the run takes its scores S = Q Kᵀ for it, an online softmax over the block
// (running max and sum per query, the output rows rescaled when the max grows; the scale, the
// max and e^x in one pass), and O += P V. Runs are cut so that every thread has a few items.
// Memory is one score block per thread whatever the length; a causal block skips the keys after
// its last query and masks the diagonal block. The default at every length.
class FlashAttention final : public AttentionBackend {
 public:
  static constexpr int64_t kQueryBlock = 128;
  static constexpr int64_t kKeyBlock = 512;
  std::string_view name() const override { return "flash"; }

  void Run(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
           const float* v, int64_t kv_stride, float* out, ThreadPool& pool) const override {
    const int64_t d = plan.head_dim;
    const int64_t group = plan.num_heads / plan.num_kv_heads;
    const int64_t out_stride = plan.num_heads * d;
    // Items: (sequence, run of query blocks) x head, at least four per thread where the batch
    // has that many query blocks; a run never crosses a sequence.
    int64_t query_blocks = 0;
    for (int64_t s = 0; s < plan.num_seqs; ++s) {
      query_blocks += (plan.cu_seqlens[s + 1] - plan.cu_seqlens[s] + kQueryBlock - 1) / kQueryBlock;
    }
    const int64_t per_run = std::max<int64_t>(
        1, query_blocks * plan.num_heads / (4 * static_cast<int64_t>(pool.num_threads())));
    struct QueryRun {
      int64_t seq, begin, end;  // queries [begin, end) of the sequence
    };
    thread_local std::vector<QueryRun> runs;
    runs.clear();
    for (int64_t s = 0; s < plan.num_seqs; ++s) {
      const int64_t len = plan.cu_seqlens[s + 1] - plan.cu_seqlens[s];
      for (int64_t q0 = 0; q0 < len; q0 += per_run * kQueryBlock) {
        runs.push_back({s, q0, std::min(len, q0 + per_run * kQueryBlock)});
      }
    }
    const auto& items = runs;
    pool.ParallelFor(static_cast<int64_t>(items.size()) * plan.num_heads, [&](int64_t item) {
      const QueryRun run = items[item / plan.num_heads];
      const int64_t h = item % plan.num_heads;
      const int64_t begin = plan.cu_seqlens[run.seq];
      const int64_t len = plan.cu_seqlens[run.seq + 1] - begin;
      const int64_t kvh = h / group;
      const float* kb = k + begin * kv_stride + kvh * d;
      const float* vb = v + begin * kv_stride + kvh * d;
      thread_local std::vector<float> scores, running_max, running_sum;
      thread_local cpu::PackedWeights k_packed, v_packed;
      scores.resize(static_cast<size_t>(kQueryBlock * kKeyBlock));
      running_max.assign(static_cast<size_t>(run.end - run.begin),
                         -std::numeric_limits<float>::infinity());
      running_sum.assign(static_cast<size_t>(run.end - run.begin), 0.0f);
      const int64_t run_key_end = plan.causal ? run.end : len;
      for (int64_t k0 = 0; k0 < run_key_end; k0 += kKeyBlock) {
        const int64_t keys = std::min(kKeyBlock, run_key_end - k0);
        k_packed.Pack(kb + k0 * kv_stride, keys, d, kv_stride);
        v_packed.PackTransposed(vb + k0 * kv_stride, keys, d, kv_stride);
        for (int64_t q0 = run.begin; q0 < run.end; q0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, run.end - q0);
          if (plan.causal && k0 >= q0 + rows) continue;  // keys after this block's last query
          const float* qb = q + (begin + q0) * q_stride + h * d;
          float* ob = out + (begin + q0) * out_stride + h * d;
          float* sc = scores.data();
          cpu::PackedGemm(qb, q_stride, k_packed, nullptr, sc, keys, rows, 0, keys);
          for (int64_t r = 0; r < rows; ++r) {
            float* row = sc + r * keys;
            const size_t state = static_cast<size_t>(q0 - run.begin + r);
            // Causal: query q0 + r sees keys up to itself; the rest of its row weighs nothing.
            const int64_t visible =
                plan.causal ? std::clamp<int64_t>(q0 + r + 1 - k0, 0, keys) : keys;
            if (visible == 0) {  // a block wholly after this query (not reached with these sizes)
              std::fill(row, row + keys, 0.0f);
              continue;
            }
            // The scale is positive, so the largest scaled score is the scaled largest score.
            const float new_max =
                std::max(running_max[state], plan.scale * cpu::vec::Max(row, visible));
            const float correction = std::exp(running_max[state] - new_max);
            const float sum = cpu::vec::SoftmaxExpSum(row, visible, plan.scale, new_max);
            std::fill(row + visible, row + keys, 0.0f);
            running_sum[state] = running_sum[state] * correction + sum;
            running_max[state] = new_max;
            if (k0 > 0 && correction != 1.0f) {
              float* o = ob + r * out_stride;
              for (int64_t c = 0; c < d; ++c) o[c] *= correction;
            }
          }
          cpu::PackedGemm(sc, keys, v_packed, nullptr, ob, out_stride, rows, 0, d,
                          /*accumulate=*/k0 > 0);
        }
      }
      for (int64_t r = 0; r < run.end - run.begin; ++r) {
        const float inv = 1.0f / running_sum[static_cast<size_t>(r)];
        float* o = out + (begin + run.begin + r) * out_stride + h * d;
        for (int64_t c = 0; c < d; ++c) o[c] *= inv;
      }
    });
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<AttentionBackend>> MakeAttentionBackend(std::string_view name) {
  if (name == "reference") return std::make_unique<ReferenceAttention>();
  if (name == "tiled") return std::make_unique<TiledAttention>();
  if (name == "packed") return std::make_unique<PackedAttention>();
  if (name == "flash") return std::make_unique<FlashAttention>();
  return absl::InvalidArgumentError(
      StrCat("unknown attention backend '", name, "' (reference, packed, tiled, flash)"));
}

std::string_view ChooseAttentionBackend(std::string_view family, int64_t max_seqlen) {
  struct Row {
    std::string_view family;
    int64_t up_to_seqlen;  // inclusive
    std::string_view backend;
  };
  static constexpr Row kTable[] = {
      {"bert", INT64_MAX, "flash"},
      {"qwen3", INT64_MAX, "flash"},
  };
  for (const Row& row : kTable) {
    if (row.family == family && max_seqlen <= row.up_to_seqlen) return row.backend;
  }
  return "tiled";
}

}  // namespace quiver::engine
