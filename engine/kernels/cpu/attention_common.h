// What the CPU attention kernels share (private to engine/kernels/cpu): the (sequence, head)
// decomposition and the head layout.
#pragma once

#include <cstdint>

#include "engine/base/attention_plan.h"
#include "engine/base/thread_pool.h"

namespace quiver::engine::cpu {

// One (sequence, query head) work item: the sequence's tokens [begin, begin + len), the query
// head and the kv head it reads.
struct SeqHead {
  int64_t begin, len, head, kv_head;
};

// The kv head that query head `head` reads (grouped-query attention).
inline int64_t KvHead(const AttentionPlan& plan, int64_t head) {
  return head / (plan.num_heads / plan.num_kv_heads);
}

// Floats per output row: every query head's head_dim values.
inline int64_t OutStride(const AttentionPlan& plan) { return plan.num_heads * plan.head_dim; }

// fn(SeqHead) for every (sequence, head) pair of the batch, spread over the pool.
template <typename Fn>
void ForEachSeqHead(const AttentionPlan& plan, ThreadPool& pool, Fn fn) {
  pool.ParallelFor(plan.num_seqs * plan.num_heads, [&](int64_t item) {
    const int64_t s = item / plan.num_heads, h = item % plan.num_heads;
    const int64_t begin = plan.cu_seqlens[s];
    fn(SeqHead{begin, plan.cu_seqlens[s + 1] - begin, h, KvHead(plan, h)});
  });
}

// Dot product of two head_dim vectors, in index order.
inline float Dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace quiver::engine::cpu
