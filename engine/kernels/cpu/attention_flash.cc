#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/attention_common.h"
#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/gemm.h"
#include "engine/kernels/cpu/gemm_bf16.h"
#include "engine/kernels/cpu/gemm_int16.h"
#include "engine/kernels/cpu/isa_paths.h"
#include "engine/kernels/cpu/vec.h"

namespace quiver::engine::cpu {

// FlashAttention's recurrence with both products on the packed GEMM (kernels/cpu/gemm.h): per
// (sequence, head, run of query blocks of up to kQueryBlock queries), one block of up to
// kKeyBlock keys at a time is packed (K as the "weights", V transposed) once for the whole run;
// each query block of the run takes its scores S = Q Kᵀ for it, an online softmax over the block
// (running max and sum per query, the output rows rescaled when the max grows; the scale, the
// max and e^x in one pass), and O += P V. Runs are cut so that every thread has a few items.
// Memory is one score block per thread whatever the length; a causal block skips the keys after
// its last query and masks the diagonal block. The default at every length.
namespace {
constexpr int64_t kQueryBlock = 128;

// vec::SoftmaxExp2Sum, on 16 lanes where the path has them (the same bits).
float SoftmaxExp2SumRow(float* x, int64_t n, float scale, float shift) {
  return ActiveCpuPath() >= CpuPath::kAvx512 ? SoftmaxExp2SumAvx512(x, n, scale, shift)
                                             : vec::SoftmaxExp2Sum(x, n, scale, shift);
}

// log2(e): the softmax works in powers of two, e^(s · scale - m) = 2^(s · scale log2(e) - m
// log2(e)), which spares its 2^x the split of ln2 (vec::SoftmaxExp2).
constexpr float kLog2e = 1.44269504088896341f;

// vec::SoftmaxExp2Rows over a block of rows of n values (its row stride), on 16 lanes where the
// path has them (the same bits).
void SoftmaxExp2Rows(float* x, int64_t rows, int64_t n, float scale, float* shift, float* sum) {
  if (ActiveCpuPath() >= CpuPath::kAvx512) {
    SoftmaxExp2RowsAvx512(x, n, rows, n, scale, shift, sum);
  } else {
    vec::SoftmaxExp2Rows(x, n, rows, n, scale, shift, sum);
  }
}

// vec::Max, on 16 lanes where the path has them (a maximum is exact: the same value).
float RowMax(const float* x, int64_t n) {
  return ActiveCpuPath() >= CpuPath::kAvx512 ? MaxAvx512(x, n) : vec::Max(x, n);
}

constexpr int64_t kKeyBlock = 512;

// The recurrence's two products on f32 panels (PackedGemm): the default. P is the score block
// itself, its rows turned into e^x in place.
struct F32Products {
  PackedWeights k, v;
  void PackBlock(const float* kb, const float* vb, int64_t keys, int64_t /*block_keys*/, int64_t d,
                 int64_t ld) {
    k.Pack(kb, keys, d, ld);
    v.PackTransposed(vb, keys, d, ld);
  }
  // s [rows, keys] = q · Kᵀ for q rows of stride q_stride.
  void Scores(const float* q, int64_t q_stride, int64_t rows, float* s) {
    PackedGemm(q, q_stride, k, nullptr, s, k.n(), rows, 0, k.n());
  }
  // Row r of P from row r of the scores (`row`, k.n() of them): 2^(x · scale - shift) for the
  // first `visible`, zeros after; returns the sum of the visible ones.
  float Exp(float* row, int64_t /*r*/, int64_t visible, float scale, float shift) {
    const float sum = visible > 0 ? SoftmaxExp2SumRow(row, visible, scale, shift) : 0.0f;
    std::fill(row + visible, row + k.n(), 0.0f);
    return sum;
  }
  // Rows [0, rows) of P from the scores when each sees all k.n() keys: shift[r] = max(shift[r],
  // scale · the row's largest score), then the row's 2^(x · scale - shift[r]) and their sum
  // into sum[r]. The same bits as RowMax and Exp row by row (vec::SoftmaxExp2Rows).
  void ExpRows(float* s, int64_t rows, float scale, float* shift, float* sum) {
    SoftmaxExp2Rows(s, rows, k.n(), scale, shift, sum);
  }
  // o (row stride o_stride) = (accumulate ? o : 0) + P · V for P's first `rows` rows (s).
  void Accumulate(const float* s, int64_t rows, float* o, int64_t o_stride, bool accumulate) {
    PackedGemm(s, v.k(), v, nullptr, o, o_stride, rows, 0, v.n(), accumulate);
  }
};

// ExpRows as RowMax and Exp row by row, for products whose Exp has no form for rows at once.
template <typename Products>
void ExpRowByRow(Products& products, float* s, int64_t rows, int64_t keys, float scale,
                 float* shift, float* sum) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * keys;
    shift[r] = std::max(shift[r], scale * RowMax(row, keys));
    sum[r] = products.Exp(row, r, keys, scale, shift[r]);
  }
}

// The same products in bf16 (AttentionPlan::bf16_products): Q, K, P and V rounded to bf16
// (nearest even) and multiplied by vdpbf16ps with f32 sums, twice the f32 FMA's rate; the
// softmax and its running max and sum stay f32, each 2^x rounded to bf16 as it is computed.
struct Bf16Products {
  Bf16Weights k, v;
  std::vector<uint16_t> q_bf16, p_bf16;
  void PackBlock(const float* kb, const float* vb, int64_t keys, int64_t /*block_keys*/, int64_t d,
                 int64_t ld) {
    k.Pack(kb, keys, d, ld);
    v.PackTransposed(vb, keys, d, ld);
    p_bf16.resize(static_cast<size_t>(kQueryBlock * 2 * v.k_pairs()));
  }
  void Scores(const float* q, int64_t q_stride, int64_t rows, float* s) {
    q_bf16.resize(static_cast<size_t>(rows * 2 * k.k_pairs()));
    Bf16Rows(q, q_stride, k.k(), 0, rows, q_bf16.data());
    Bf16Gemm(q_bf16.data(), k, nullptr, s, k.n(), rows, 0, k.n());
  }
  float Exp(float* row, int64_t r, int64_t visible, float scale, float shift) {
    const int64_t width = 2 * v.k_pairs();
    uint16_t* p = p_bf16.data() + r * width;
    const float sum = visible > 0 ? SoftmaxExp2SumBf16Avx512(row, visible, scale, shift, p) : 0.0f;
    std::fill(p + visible, p + width, uint16_t{0});
    return sum;
  }
  void ExpRows(float* s, int64_t rows, float scale, float* shift, float* sum) {
    ExpRowByRow(*this, s, rows, k.n(), scale, shift, sum);
  }
  void Accumulate(const float* /*s*/, int64_t rows, float* o, int64_t o_stride, bool accumulate) {
    Bf16Gemm(p_bf16.data(), v, nullptr, o, o_stride, rows, 0, v.n(), accumulate);
  }
};

// The same products in int16 (AttentionPlan::int16_products, gemm_int16.h): Q per query and K per
// key scaled to Int16Limit(head_dim), V per column and P (each 2^x, in [0, 1]) to
// Int16Limit(block_keys), multiplied by vpdpwssd with exact int32 sums; the softmax and its running
// max and sum stay f32. V's scales and the limit come from the whole key block of the sequence
// (block_keys from k0), not from the keys a causal run packs of it, so that how the queries are
// cut into runs (which depends on the batch) never changes a bit.
struct Int16Products {
  Int16Weights k, v;
  std::vector<int16_t> q16, p16;
  std::vector<float> q_scale, p_scale;
  int32_t p_limit = 0;
  void PackBlock(const float* kb, const float* vb, int64_t keys, int64_t block_keys, int64_t d,
                 int64_t ld) {
    k.Pack(kb, keys, d, ld, Int16Limit(d));
    p_limit = Int16Limit(block_keys);
    v.PackTransposed(vb, keys, d, ld, p_limit, block_keys);
    p16.resize(static_cast<size_t>(kQueryBlock * 2 * v.k_pairs()));
    p_scale.assign(static_cast<size_t>(kQueryBlock), 1.0f / static_cast<float>(p_limit));
  }
  void Scores(const float* q, int64_t q_stride, int64_t rows, float* s) {
    q16.resize(static_cast<size_t>(rows * 2 * k.k_pairs()));
    q_scale.resize(static_cast<size_t>(rows));
    Int16Rows(q, q_stride, k.k(), rows, Int16Limit(k.k()), q16.data(), q_scale.data());
    Int16Gemm(q16.data(), q_scale.data(), k, s, k.n(), rows, /*accumulate=*/false);
  }
  float Exp(float* row, int64_t r, int64_t visible, float scale, float shift) {
    const int64_t width = 2 * v.k_pairs();
    int16_t* p = p16.data() + r * width;
    const float sum =
        visible > 0 ? SoftmaxExp2SumInt16Avx512(row, visible, scale, shift, p_limit, p) : 0.0f;
    std::fill(p + visible, p + width, int16_t{0});
    return sum;
  }
  void ExpRows(float* s, int64_t rows, float scale, float* shift, float* sum) {
    const int64_t keys = k.n(), width = 2 * v.k_pairs();
    SoftmaxExp2RowsInt16Avx512(s, rows, keys, scale, shift, p_limit, p16.data(), width, sum);
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(p16.data() + r * width + keys, p16.data() + (r + 1) * width, int16_t{0});
    }
  }
  void Accumulate(const float* /*s*/, int64_t rows, float* o, int64_t o_stride, bool accumulate) {
    Int16Gemm(p16.data(), p_scale.data(), v, o, o_stride, rows, accumulate);
  }
};

// A run of queries [run_begin, run_end) of one (sequence, head) under a sliding window or a
// position bias: the same recurrence, each query's scores limited to its visible keys
// (VisibleKeys: one interval per row), the bias added to the scaled scores. Key blocks stay at
// multiples of kKeyBlock from the sequence start, whatever the run, so that a query's blocks and
// their order never depend on the batch (a block a query sees nothing of adds exactly nothing);
// blocks outside the run's window are skipped. The output rows start at zero and every block
// accumulates. q, kb and vb are the head's columns from the sequence's first row.
void MaskedRun(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* kb,
               const float* vb, int64_t kv_stride, float* out, int64_t begin, int64_t len,
               int64_t run_begin, int64_t run_end, int64_t h) {
  const int64_t d = plan.head_dim;
  const int64_t out_stride = OutStride(plan);
  thread_local std::vector<float> scores, running_max, running_sum;
  thread_local PackedWeights k_packed, v_packed;
  scores.resize(static_cast<size_t>(kQueryBlock * kKeyBlock));
  running_max.assign(static_cast<size_t>(run_end - run_begin),
                     -std::numeric_limits<float>::infinity());
  running_sum.assign(static_cast<size_t>(run_end - run_begin), 0.0f);
  for (int64_t r = run_begin; r < run_end; ++r) {
    float* o = out + (begin + r) * out_stride + h * d;
    std::fill(o, o + d, 0.0f);
  }
  const int64_t key_lo = VisibleKeys(plan, run_begin, len).lo;
  const int64_t key_hi = VisibleKeys(plan, run_end - 1, len).hi;
  for (int64_t k0 = key_lo / kKeyBlock * kKeyBlock; k0 < key_hi; k0 += kKeyBlock) {
    const int64_t keys = std::min(kKeyBlock, len - k0);
    k_packed.Pack(kb + k0 * kv_stride, keys, d, kv_stride);
    v_packed.PackTransposed(vb + k0 * kv_stride, keys, d, kv_stride);
    for (int64_t q0 = run_begin; q0 < run_end; q0 += kQueryBlock) {
      const int64_t rows = std::min(kQueryBlock, run_end - q0);
      if (VisibleKeys(plan, q0, len).lo >= k0 + keys) continue;      // the block is before them all
      if (VisibleKeys(plan, q0 + rows - 1, len).hi <= k0) continue;  // after them all
      const float* qb = q + q0 * q_stride;
      float* ob = out + (begin + q0) * out_stride + h * d;
      float* sc = scores.data();
      PackedGemm(qb, q_stride, k_packed, nullptr, sc, keys, rows, 0, keys);
      for (int64_t r = 0; r < rows; ++r) {
        float* row = sc + r * keys;
        const size_t state = static_cast<size_t>(q0 - run_begin + r);
        const KeyRange visible = VisibleKeys(plan, q0 + r, len);
        const int64_t lo = std::clamp<int64_t>(visible.lo - k0, 0, keys);
        const int64_t hi = std::clamp<int64_t>(visible.hi - k0, lo, keys);
        if (lo == hi) {
          std::fill(row, row + keys, 0.0f);
          continue;
        }
        for (int64_t j = lo; j < hi; ++j) {
          row[j] *= plan.scale;
          if (plan.position_bias != nullptr) row[j] += PositionBias(plan, h, q0 + r, k0 + j);
        }
        const float new_max = std::max(running_max[state], RowMax(row + lo, hi - lo));
        const float correction = std::exp(running_max[state] - new_max);
        const float sum = SoftmaxExp2SumRow(row + lo, hi - lo, kLog2e, new_max * kLog2e);
        std::fill(row, row + lo, 0.0f);
        std::fill(row + hi, row + keys, 0.0f);
        running_sum[state] = running_sum[state] * correction + sum;
        running_max[state] = new_max;
        if (correction != 1.0f) {
          float* o = ob + r * out_stride;
          for (int64_t c = 0; c < d; ++c) o[c] *= correction;
        }
      }
      PackedGemm(sc, keys, v_packed, nullptr, ob, out_stride, rows, 0, d, /*accumulate=*/true);
    }
  }
  for (int64_t r = 0; r < run_end - run_begin; ++r) {
    const float inv = 1.0f / running_sum[static_cast<size_t>(r)];
    float* o = out + (begin + run_begin + r) * out_stride + h * d;
    for (int64_t c = 0; c < d; ++c) o[c] *= inv;
  }
}

// A run of queries [run_begin, run_end) of one (sequence, head) without masks: the recurrence
// over key blocks from the sequence start (causal: up to the run's last query). q, kb and vb are
// the head's columns from the sequence's first row.
template <typename Products>
void UnmaskedRun(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* kb,
                 const float* vb, int64_t kv_stride, float* out, int64_t begin, int64_t len,
                 int64_t run_begin, int64_t run_end, int64_t h, Products& products) {
  const int64_t d = plan.head_dim;
  const int64_t out_stride = OutStride(plan);
  thread_local std::vector<float> scores, running_max, running_sum, previous_max, block_sum;
  scores.resize(static_cast<size_t>(kQueryBlock * kKeyBlock));
  running_max.assign(static_cast<size_t>(run_end - run_begin),
                     -std::numeric_limits<float>::infinity());
  running_sum.assign(static_cast<size_t>(run_end - run_begin), 0.0f);
  const int64_t run_key_end = plan.causal ? run_end : len;
  const float scale2 = plan.scale * kLog2e;
  for (int64_t k0 = 0; k0 < run_key_end; k0 += kKeyBlock) {
    const int64_t keys = std::min(kKeyBlock, run_key_end - k0);
    products.PackBlock(kb + k0 * kv_stride, vb + k0 * kv_stride, keys,
                       std::min(kKeyBlock, len - k0), d, kv_stride);
    for (int64_t q0 = run_begin; q0 < run_end; q0 += kQueryBlock) {
      const int64_t rows = std::min(kQueryBlock, run_end - q0);
      if (plan.causal && k0 >= q0 + rows) continue;  // keys after this block's last query
      const float* qb = q + q0 * q_stride;
      float* ob = out + (begin + q0) * out_stride + h * d;
      float* sc = scores.data();
      products.Scores(qb, q_stride, rows, sc);
      // Each row's running maximum (in log2 units, as the exponents are) and its 2^x and their
      // sum for this block, then its running sum and output rows corrected.
      float* const row_max = running_max.data() + (q0 - run_begin);
      if (k0 > 0) previous_max.assign(row_max, row_max + rows);
      block_sum.resize(static_cast<size_t>(rows));
      if (!plan.causal) {  // every row sees every key of the block: the rows at once
        products.ExpRows(sc, rows, scale2, row_max, block_sum.data());
      } else {
        for (int64_t r = 0; r < rows; ++r) {
          float* row = sc + r * keys;
          // Query q0 + r sees keys up to itself; the rest of its row weighs nothing. None, for a
          // block wholly after it (not reached with these sizes): its maximum stays.
          const int64_t visible = std::clamp<int64_t>(q0 + r + 1 - k0, 0, keys);
          // The scale is positive, so the largest scaled score is the scaled largest score.
          if (visible > 0) row_max[r] = std::max(row_max[r], scale2 * RowMax(row, visible));
          block_sum[static_cast<size_t>(r)] = products.Exp(row, r, visible, scale2, row_max[r]);
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const size_t state = static_cast<size_t>(q0 - run_begin + r);
        const float before = k0 > 0 ? previous_max[static_cast<size_t>(r)] : 0.0f;
        // The first block has no running values to correct (2^-inf: 0, without the call); a row
        // whose maximum stayed keeps them (2^0, also where it is still -inf).
        const float correction =
            k0 == 0 ? 0.0f : (before == row_max[r] ? 1.0f : std::exp2(before - row_max[r]));
        running_sum[state] = running_sum[state] * correction + block_sum[static_cast<size_t>(r)];
        if (k0 > 0 && correction != 1.0f) {
          float* o = ob + r * out_stride;
          for (int64_t c = 0; c < d; ++c) o[c] *= correction;
        }
      }
      products.Accumulate(sc, rows, ob, out_stride, /*accumulate=*/k0 > 0);
    }
  }
  for (int64_t r = 0; r < run_end - run_begin; ++r) {
    const float inv = 1.0f / running_sum[static_cast<size_t>(r)];
    float* o = out + (begin + run_begin + r) * out_stride + h * d;
    for (int64_t c = 0; c < d; ++c) o[c] *= inv;
  }
}

// Queries [run_begin, run_end) of sequence `seq`, head h, on the calling thread; qh, kh and vh
// the head's columns (its kv head's for kh and vh) from the sequence's first row.
void RunHeadAt(const AttentionPlan& plan, const float* qh, int64_t q_stride, const float* kh,
               const float* vh, int64_t kv_stride, float* out, int64_t seq, int64_t run_begin,
               int64_t run_end, int64_t h) {
  const int64_t begin = plan.cu_seqlens[seq];
  const int64_t len = plan.cu_seqlens[seq + 1] - begin;
  if (plan.has_masks()) {
    MaskedRun(plan, qh, q_stride, kh, vh, kv_stride, out, begin, len, run_begin, run_end, h);
  } else if (plan.bf16_products) {
    thread_local Bf16Products products;
    UnmaskedRun(plan, qh, q_stride, kh, vh, kv_stride, out, begin, len, run_begin, run_end, h,
                products);
  } else if (plan.int16_products) {
    thread_local Int16Products products;
    UnmaskedRun(plan, qh, q_stride, kh, vh, kv_stride, out, begin, len, run_begin, run_end, h,
                products);
  } else {
    thread_local F32Products products;
    UnmaskedRun(plan, qh, q_stride, kh, vh, kv_stride, out, begin, len, run_begin, run_end, h,
                products);
  }
}

// RunHeadAt over the batch's q, k and v.
void RunHead(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
             const float* v, int64_t kv_stride, float* out, int64_t seq, int64_t run_begin,
             int64_t run_end, int64_t h) {
  const int64_t d = plan.head_dim;
  const int64_t begin = plan.cu_seqlens[seq];
  const int64_t kv_column = KvHead(plan, h) * d;
  RunHeadAt(plan, q + begin * q_stride + h * d, q_stride, k + begin * kv_stride + kv_column,
            v + begin * kv_stride + kv_column, kv_stride, out, seq, run_begin, run_end, h);
}

}  // namespace

void FlashAttention(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
                    const float* v, int64_t kv_stride, float* out, ThreadPool& pool) {
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
    RunHead(plan, q, q_stride, k, v, kv_stride, out, run.seq, run.begin, run.end,
            item % plan.num_heads);
  });
}

void FlashAttentionSequence(const AttentionPlan& plan, int64_t seq, const float* q,
                            int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                            float* out) {
  const int64_t len = plan.cu_seqlens[seq + 1] - plan.cu_seqlens[seq];
  if (len == 0) return;
  for (int64_t h = 0; h < plan.num_heads; ++h) {
    RunHead(plan, q, q_stride, k, v, kv_stride, out, seq, 0, len, h);
  }
}

void FlashAttentionHead(const AttentionPlan& plan, int64_t seq, int64_t h, const float* q,
                        const float* k, const float* v, int64_t stride, float* out) {
  const int64_t len = plan.cu_seqlens[seq + 1] - plan.cu_seqlens[seq];
  if (len == 0) return;
  RunHeadAt(plan, q, stride, k, v, stride, out, seq, 0, len, h);
}

}  // namespace quiver::engine::cpu
