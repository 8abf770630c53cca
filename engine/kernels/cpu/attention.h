// CPU attention kernels over ragged batches (raw pointers, the batch's AttentionPlan, the pool).
// Each writes out[t, h * head_dim + d] for every token t of every sequence: softmax(q kᵀ · scale)
// v within the sequence (causal: over keys up to t), with q of row stride q_stride floats (heads
// packed), k and v of row stride kv_stride, out of num_heads * head_dim per row. Grouped-query
// heads: query head h reads kv head h / (num_heads / num_kv_heads). Reference and flash also
// honour the plan's sliding window and relative position bias (base/attention_plan.h); packed
// and tiled do not (their backends say so).
//
//   reference  whole score rows per query, the plain loop the others are tested against
//   packed     the same order of operations, K transposed per (sequence, head) for the vector
//              units
//   tiled      FlashAttention's online softmax over key blocks of 64
//   flash      the online softmax over blocks of 128 queries x 512 keys with both products on
//              the packed GEMM; one score block per thread whatever the length
#pragma once

#include <cstdint>

#include "engine/base/attention_plan.h"

namespace quiver::engine {
class ThreadPool;
}

namespace quiver::engine::cpu {

using AttentionKernel = void (*)(const AttentionPlan& plan, const float* q, int64_t q_stride,
                                 const float* k, const float* v, int64_t kv_stride, float* out,
                                 ThreadPool& pool);

void ReferenceAttention(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
                        const float* v, int64_t kv_stride, float* out, ThreadPool& pool);
void PackedAttention(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
                     const float* v, int64_t kv_stride, float* out, ThreadPool& pool);
void TiledAttention(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
                    const float* v, int64_t kv_stride, float* out, ThreadPool& pool);
void FlashAttention(const AttentionPlan& plan, const float* q, int64_t q_stride, const float* k,
                    const float* v, int64_t kv_stride, float* out, ThreadPool& pool);

// FlashAttention's rows of one sequence of the plan (every head), on the calling thread: the
// same bits as FlashAttention gives them (a row's result depends on its query and its sequence's
// keys only). For callers that run whole sequences per task (kernels.h, QkvAttention).
void FlashAttentionSequence(const AttentionPlan& plan, int64_t seq, const float* q,
                            int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                            float* out);

// FlashAttention's rows of one (sequence, head) of the plan, on the calling thread, from the
// head's own q, k and v columns: q, k and v point at the sequence's first row of them (k and v
// the head's kv head's), rows `stride` floats apart. The same bits as FlashAttention gives these
// rows. For callers that make each head's projections per task (kernels.h, QkvAttentionByHeads).
void FlashAttentionHead(const AttentionPlan& plan, int64_t seq, int64_t h, const float* q,
                        const float* k, const float* v, int64_t stride, float* out);

}  // namespace quiver::engine::cpu
