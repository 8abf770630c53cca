#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/attention_common.h"

namespace quiver::engine::cpu {

// Online softmax over key blocks (FlashAttention's recurrence, on CPU): a running max and sum
// per query, the accumulator rescaled when the max grows.
namespace {
constexpr int64_t kBlock = 64;
}  // namespace

void TiledAttention(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
                    const float* v, int64_t kv_stride, float* out, ThreadPool& pool) {
  const int64_t d = plan.head_dim;
  const int64_t out_stride = OutStride(plan);
  ForEachSeqHead(plan, pool, [&](const SeqHead& item) {
    const int64_t begin = item.begin, len = item.len, h = item.head, kvh = item.kv_head;
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

}  // namespace quiver::engine::cpu
