#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/attention_common.h"

namespace quiver::engine::cpu {

void ReferenceAttention(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
                        const float* v, int64_t kv_stride, float* out, ThreadPool& pool) {
  const int64_t d = plan.head_dim;
  const int64_t out_stride = OutStride(plan);
  ForEachSeqHead(plan, pool, [&](const SeqHead& item) {
    const int64_t begin = item.begin, len = item.len, h = item.head, kvh = item.kv_head;
    thread_local std::vector<float> scores;
    scores.resize(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) {
      const float* qi = q + (begin + i) * q_stride + h * d;
      const KeyRange keys = VisibleKeys(plan, i, len);
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t j = keys.lo; j < keys.hi; ++j) {
        float s = Dot(qi, k + (begin + j) * kv_stride + kvh * d, d) * plan.scale;
        if (plan.position_bias != nullptr) s += PositionBias(plan, h, i, j);
        scores[j] = s;
        max_score = std::max(max_score, s);
      }
      float sum = 0.0f;
      for (int64_t j = keys.lo; j < keys.hi; ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        sum += scores[j];
      }
      float* o = out + (begin + i) * out_stride + h * d;
      std::fill(o, o + d, 0.0f);
      for (int64_t j = keys.lo; j < keys.hi; ++j) {
        const float p = scores[j] / sum;
        const float* vj = v + (begin + j) * kv_stride + kvh * d;
        for (int64_t c = 0; c < d; ++c) o[c] += p * vj[c];
      }
    }
  });
}

}  // namespace quiver::engine::cpu
