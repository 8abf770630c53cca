#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/attention_common.h"
#include "engine/kernels/cpu/vec.h"

namespace quiver::engine::cpu {

// The reference computation with memory laid out for the vector units: per (sequence, head) K is
// transposed to [head_dim, len] so that a query's scores are an axpy over keys (no horizontal
// sums), and P·V accumulates whole head_dim rows. Same math and order of softmax as the
// reference loop; the default for short sequences.
void PackedAttention(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
                     const float* v, int64_t kv_stride, float* out, ThreadPool& pool) {
  const int64_t d = plan.head_dim;
  const int64_t out_stride = OutStride(plan);
  ForEachSeqHead(plan, pool, [&](const SeqHead& item) {
    const int64_t begin = item.begin, len = item.len, h = item.head, kvh = item.kv_head;
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
      vec::Exp(sc, visible);
      const float inv = 1.0f / vec::Sum(sc, visible);
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

}  // namespace quiver::engine::cpu
