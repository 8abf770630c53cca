// The slow, obviously correct ragged attention that tests compare the fast kernels against.
//
// One block of kThreads per (query token, head):
//   1. the token's sequence by binary search in cu_seqlens (tokens in no sequence: nothing);
//   2. scores s_j = q·k_j · scale in f32 (one key per thread, a serial dot product);
//   3. the exact max, p_j = exp(s_j - max), sum = Σ p_j, out = Σ p_j v_j / sum, all f32.
// Scores live in dynamic shared memory of min(max_seqlen, kMaxCachedScores) floats. A row with
// more keys than that is processed in chunks of that size and its scores are computed twice (once
// for the max, once for p), so max_seqlen only sizes the buffer and never affects correctness.
// A sliding window narrows each row's keys, a relative position bias is added to each score
// (base/attention_plan.h).
// Independent of the flash kernel on purpose: natural-log expf, no tiling, no mma, no swizzles.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "engine/kernels/cuda/attention.h"

namespace quiver::engine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 256;
constexpr int kDimsPerThread = kMaxHeadDim / kThreads;  // output dims d = tid + i · kThreads
// 32 KiB of scores: with the static q row and scratch the block stays under the 48 KiB every
// device gives without an opt-in (cudaFuncSetAttribute), which a test reference has no need of.
constexpr int kMaxCachedScores = 8192;

struct ReferenceParams {
  const void* q;  // [num_tokens, num_heads · head_dim], row stride q_stride
  const void* k;  // [num_tokens, num_kv_heads · head_dim], row stride kv_stride
  const void* v;  // as k
  void* out;      // [num_tokens, num_heads · head_dim], row stride out_stride
  int64_t q_stride;
  int64_t kv_stride;
  int64_t out_stride;
  const int32_t* cu_seqlens;  // device [num_seqs + 1]
  int num_seqs;
  int heads_per_kv_head;  // num_heads / num_kv_heads
  int head_dim;
  int score_capacity;  // floats of dynamic shared memory, ≥ 1
  bool causal;
  float scale;
  int window;                  // sliding window, -1 for none
  const float* position_bias;  // or null: [num_heads, 2 · bias_max_distance + 1]
  int bias_max_distance;
};

__device__ __forceinline__ float LoadAsFloat(const float* ptr) { return *ptr; }
__device__ __forceinline__ float LoadAsFloat(const __nv_bfloat16* ptr) {
  return __bfloat162float(*ptr);
}
__device__ __forceinline__ void StoreFromFloat(float* ptr, float value) { *ptr = value; }
__device__ __forceinline__ void StoreFromFloat(__nv_bfloat16* ptr, float value) {
  *ptr = __float2bfloat16_rn(value);
}

// The max (kIsMax) or sum of `value` over the block, returned to every thread. Starts with a
// barrier so that `scratch` [kWarps] may be reused right after a previous call.
template <bool kIsMax>
__device__ float BlockReduce(float value, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = kIsMax ? fmaxf(value, other) : value + other;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  float result = scratch[0];
  for (int w = 1; w < kWarps; ++w)
    result = kIsMax ? fmaxf(result, scratch[w]) : result + scratch[w];
  return result;
}

template <typename TIn, typename TOut>
__global__ void __launch_bounds__(kThreads) ReferenceAttentionKernel(const ReferenceParams params) {
  extern __shared__ float scores[];  // [score_capacity]: a chunk of scores, then of p
  __shared__ float q_row[kMaxHeadDim];
  __shared__ float scratch[kWarps];

  const int token = static_cast<int>(blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  const int32_t* cu_seqlens = params.cu_seqlens;

  // The token's sequence: the largest seq in [0, num_seqs] with cu_seqlens[seq] ≤ token (empty
  // sequences start where the next one does, so taking the largest skips them). seq == num_seqs
  // means the token is past the last sequence. Uniform over the block, before any barrier.
  if (token < cu_seqlens[0]) return;
  int lo = 0;
  int hi = params.num_seqs;
  while (lo < hi) {  // invariant: cu_seqlens[lo] ≤ token, the answer is in [lo, hi]
    const int mid = lo + (hi - lo + 1) / 2;
    if (cu_seqlens[mid] <= token) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int seq = lo;
  if (seq >= params.num_seqs) return;
  const int seq_begin = cu_seqlens[seq];
  const int seqlen = cu_seqlens[seq + 1] - seq_begin;  // > token - seq_begin by the search
  const int query = token - seq_begin;
  // Keys [key_lo, key_lo + num_keys): causal up to the query, within the window around it.
  const int key_lo = params.window >= 0 ? max(0, query - params.window) : 0;
  const int key_hi = params.causal        ? query + 1
                     : params.window >= 0 ? min(seqlen, query + params.window + 1)
                                          : seqlen;
  const int num_keys = key_hi - key_lo;  // ≥ 1: the query sees itself
  const int kv_head = head / params.heads_per_kv_head;
  const int head_dim = params.head_dim;

  const TIn* q_ptr = static_cast<const TIn*>(params.q) +
                     static_cast<int64_t>(token) * params.q_stride +
                     static_cast<int64_t>(head) * head_dim;
  const TIn* k_seq = static_cast<const TIn*>(params.k) +
                     static_cast<int64_t>(seq_begin + key_lo) * params.kv_stride +
                     static_cast<int64_t>(kv_head) * head_dim;
  const TIn* v_seq = static_cast<const TIn*>(params.v) +
                     static_cast<int64_t>(seq_begin + key_lo) * params.kv_stride +
                     static_cast<int64_t>(kv_head) * head_dim;

  for (int d = tid; d < head_dim; d += kThreads) q_row[d] = LoadAsFloat(q_ptr + d);
  __syncthreads();

  // s_key = q·k_key · scale, f32.
  auto score = [&](int key) {
    const TIn* k_row = k_seq + static_cast<int64_t>(key) * params.kv_stride;
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += q_row[d] * LoadAsFloat(k_row + d);
    float s = dot * params.scale;
    if (params.position_bias != nullptr) {  // key_lo + key - query, clamped
      const int m = params.bias_max_distance;
      const int d = min(max(key_lo + key - query, -m), m);
      s += params.position_bias[head * (2 * m + 1) + d + m];
    }
    return s;
  };

  const int capacity = params.score_capacity;
  const bool scores_cached = num_keys <= capacity;  // one chunk: pass 2 reuses pass 1's scores

  // Pass 1: the exact max over all keys. Thread tid handles keys tid, tid + kThreads, ... of each
  // chunk, in both passes, so a cached score is read back by the thread that wrote it.
  float local_max = -INFINITY;
  for (int chunk_begin = 0; chunk_begin < num_keys; chunk_begin += capacity) {
    const int chunk_len = min(capacity, num_keys - chunk_begin);
    for (int j = tid; j < chunk_len; j += kThreads) {
      const float s = score(chunk_begin + j);
      if (scores_cached) scores[j] = s;
      local_max = fmaxf(local_max, s);
    }
  }
  const float row_max = BlockReduce<true>(local_max, scratch);

  // Pass 2: p = exp(s - max) into shared memory, then each thread accumulates Σ p_j v_j[d] for
  // its output dims.
  float local_sum = 0.0f;
  float acc[kDimsPerThread];
  for (int i = 0; i < kDimsPerThread; ++i) acc[i] = 0.0f;
  for (int chunk_begin = 0; chunk_begin < num_keys; chunk_begin += capacity) {
    const int chunk_len = min(capacity, num_keys - chunk_begin);
    __syncthreads();  // every thread is done reading the previous chunk's p
    for (int j = tid; j < chunk_len; j += kThreads) {
      const float s = scores_cached ? scores[j] : score(chunk_begin + j);
      const float p = expf(s - row_max);
      scores[j] = p;
      local_sum += p;
    }
    __syncthreads();  // this chunk's p visible to every thread
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int d = tid + i * kThreads;
      if (d >= head_dim) continue;
      for (int j = 0; j < chunk_len; ++j) {
        acc[i] += scores[j] *
                  LoadAsFloat(v_seq + static_cast<int64_t>(chunk_begin + j) * params.kv_stride + d);
      }
    }
  }
  const float row_sum = BlockReduce<false>(local_sum, scratch);  // ≥ 1: the max key gives p = 1

  TOut* out_row = static_cast<TOut*>(params.out) + static_cast<int64_t>(token) * params.out_stride +
                  static_cast<int64_t>(head) * head_dim;
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int d = tid + i * kThreads;
    if (d < head_dim) StoreFromFloat(out_row + d, acc[i] / row_sum);
  }
}

template <typename TIn, typename TOut>
cudaError_t LaunchReference(const ReferenceParams& params, int64_t num_tokens, int num_heads,
                            cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(num_tokens), static_cast<unsigned>(num_heads));
  const size_t smem_bytes = static_cast<size_t>(params.score_capacity) * sizeof(float);
  ReferenceAttentionKernel<TIn, TOut><<<grid, kThreads, smem_bytes, stream>>>(params);
  return cudaGetLastError();
}

template <typename TIn>
cudaError_t LaunchReferenceForOut(const ReferenceParams& params, DType out_dtype,
                                  int64_t num_tokens, int num_heads, cudaStream_t stream) {
  if (out_dtype == DType::kF32) {
    return LaunchReference<TIn, float>(params, num_tokens, num_heads, stream);
  }
  return LaunchReference<TIn, __nv_bfloat16>(params, num_tokens, num_heads, stream);
}

bool IsF32OrBf16(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16; }

}  // namespace

cudaError_t ReferenceAttention(const RaggedAttentionArgs& args, cudaStream_t stream) {
  if (!IsF32OrBf16(args.dtype) || !IsF32OrBf16(args.out_dtype)) return cudaErrorInvalidValue;
  if (args.head_dim <= 0 || args.head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  if (args.num_heads <= 0 || args.num_kv_heads <= 0 || args.num_heads % args.num_kv_heads != 0 ||
      args.num_heads > 65535) {
    return cudaErrorInvalidValue;
  }
  if (args.num_tokens < 0 || args.num_seqs < 0 || args.max_seqlen < 0) return cudaErrorInvalidValue;
  if (args.num_tokens > INT_MAX || args.num_seqs > INT_MAX) return cudaErrorInvalidValue;
  if (args.num_tokens == 0 || args.num_seqs == 0) return cudaSuccess;

  ReferenceParams params{};
  params.q = args.q;
  params.k = args.k;
  params.v = args.v;
  params.out = args.out;
  params.q_stride = args.q_stride;
  params.kv_stride = args.kv_stride;
  params.out_stride = args.out_stride;
  params.cu_seqlens = args.cu_seqlens;
  params.num_seqs = static_cast<int>(args.num_seqs);
  params.heads_per_kv_head = args.num_heads / args.num_kv_heads;
  params.head_dim = args.head_dim;
  params.score_capacity = static_cast<int>(
      args.max_seqlen < 1
          ? 1
          : (args.max_seqlen < kMaxCachedScores ? args.max_seqlen : kMaxCachedScores));
  params.causal = args.causal;
  params.scale = args.scale;
  if (args.window > INT_MAX / 2 || args.bias_max_distance < 0 ||
      args.bias_max_distance > INT_MAX / 4) {
    return cudaErrorInvalidValue;
  }
  params.window = static_cast<int>(args.window < 0 ? -1 : args.window);
  params.position_bias = args.position_bias;
  params.bias_max_distance = static_cast<int>(args.bias_max_distance);

  if (args.dtype == DType::kF32) {
    return LaunchReferenceForOut<float>(params, args.out_dtype, args.num_tokens, args.num_heads,
                                        stream);
  }
  return LaunchReferenceForOut<__nv_bfloat16>(params, args.out_dtype, args.num_tokens,
                                              args.num_heads, stream);
}

}  // namespace quiver::engine::cuda
