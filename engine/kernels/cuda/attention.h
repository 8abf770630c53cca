// Ragged (padding-free) attention kernels on CUDA: no KV cache, q/k/v as views into one fused
// qkv buffer (per-token row strides), sequences given by device cu_seqlens. Causal or
// bidirectional, grouped-query heads (query head h reads kv head h / (num_heads / num_kv_heads)).
//
//   q    [num_tokens, num_heads · head_dim]     row stride q_stride
//   k, v [num_tokens, num_kv_heads · head_dim]  row stride kv_stride
//   out  [num_tokens, num_heads · head_dim]     row stride out_stride
//
// Sequences may be empty (cu_seqlens[i] == cu_seqlens[i + 1]); tokens after cu_seqlens[num_seqs]
// are not touched.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/base/dtype.h"

namespace quiver::engine::cuda {

struct RaggedAttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  int64_t q_stride = 0;
  int64_t kv_stride = 0;
  int64_t out_stride = 0;
  DType dtype = DType::kBF16;           // q, k, v element type
  DType out_dtype = DType::kBF16;       // out element type
  const int32_t* cu_seqlens = nullptr;  // device, [num_seqs + 1]
  int64_t num_seqs = 0;
  int64_t num_tokens = 0;  // cu_seqlens[num_seqs] (host copy, for grid sizes)
  // The longest sequence (host copy, for grid sizes). A launch captured into a CUDA graph and
  // replayed for other batches of its bucket must pass a bound for all of them (the bucket's
  // token count), or the replay skips the query tiles of a longer sequence.
  int64_t max_seqlen = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  bool causal = false;
  float scale = 1.0f;
  // Optional (the varlen kernel): the batch's query tiles of 64 rows, device int32
  // [num_tiles, 2] of (sequence, tile within it), (-1, -1) for none (base/attention_plan.h);
  // the grid is then num_tiles x heads instead of num_seqs x ceil(max_seqlen / 64) x heads.
  const int32_t* tiles = nullptr;
  int64_t num_tiles = 0;
  // Optional (the varlen and reference kernels; base/attention_plan.h): a sliding window (-1:
  // none) and a relative position bias, device f32 [num_heads, 2 * bias_max_distance + 1].
  int64_t window = -1;
  const float* position_bias = nullptr;
  int64_t bias_max_distance = 0;
};

// quiver's own varlen flash attention (FA2 style: mma.sync m16n8k16 bf16, online softmax in
// f32): bf16 q/k/v/out, head_dim 32, 64 or 128. The dependency-light fallback and the on-GPU
// reference for the FlashInfer backends. INVALID_VALUE for another dtype or head_dim.
cudaError_t VarlenFlashAttention(const RaggedAttentionArgs& args, cudaStream_t stream);
bool VarlenFlashAttentionSupports(int head_dim);

// Test reference: one thread block per (query token, head), scores and softmax in f32 with an
// exact max, any head_dim up to 256, q/k/v f32 or bf16, out f32 or bf16. Slow; never served.
cudaError_t ReferenceAttention(const RaggedAttentionArgs& args, cudaStream_t stream);

}  // namespace quiver::engine::cuda
