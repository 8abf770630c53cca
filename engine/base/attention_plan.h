// The attention metadata of one ragged batch: built once before the layer loop, read-only after,
// shared by every attention kernel of every device (kernels take it with raw pointers).
#pragma once

#include <cstdint>

namespace quiver::engine {

// Query rows per tile of the tile list below (the own CUDA varlen kernel's CTA tile).
inline constexpr int64_t kAttentionTileRows = 64;

// A batch's query tiles as a list: (sequence, tile within it) per entry, the heaviest first,
// (-1, -1) past the batch's own. A ragged batch of T tokens in S sequences has at most
// ceil(T / 64) + S tiles, so a kernel launched over that bound (fixed per CUDA-graph bucket)
// wastes no blocks on a long sequence's worth of tiles for every short one.
inline int64_t MaxAttentionTiles(int64_t num_tokens, int64_t num_seqs) {
  return (num_tokens + kAttentionTileRows - 1) / kAttentionTileRows + num_seqs;
}

struct AttentionPlan {
  const int32_t* cu_seqlens = nullptr;  // [num_seqs + 1], host memory
  // The same array in device memory, for devices other than the CPU (kernels read it there; the
  // host copy sizes their grids and plans their tiles).
  const int32_t* device_cu_seqlens = nullptr;
  // Optional, device memory: the tile list (int32 [num_tiles, 2]) and its length, the bound a
  // kernel's grid is launched over (MaxAttentionTiles of the bucket); null: kernels derive their
  // tiles from (num_seqs, max_seqlen).
  const int32_t* device_tiles = nullptr;
  int64_t num_tiles = 0;
  int64_t num_seqs = 0;
  int64_t max_seqlen = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // GQA: query head h reads kv head h / (num_heads / num_kv_heads)
  int64_t head_dim = 0;
  bool causal = false;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
  // Optional, per layer (a model copies the batch's plan and sets them; backends that run them
  // say so, AttentionBackend::SupportsMasks):
  // Sliding window: query i sees keys j with |i - j| <= window (causal: i - window <= j <= i);
  // -1 for none.
  int64_t window = -1;
  // Relative position bias (MPNet, T5): f32 [num_heads, 2 * bias_max_distance + 1] in the
  // backend's device memory, added to the scaled score of query i and key j at
  // [h, clamp(j - i, -bias_max_distance, bias_max_distance) + bias_max_distance]; null for none.
  const float* position_bias = nullptr;
  int64_t bias_max_distance = 0;

  // CPU: the products Q·Kᵀ and P·V in bf16 (f32 sums; the softmax stays f32), which the engine
  // asks for where its weights are int8 or bf16 and the host has AVX512_BF16; the flash
  // backend's unmasked runs honour it, the others compute in f32.
  bool bf16_products = false;
  // CPU: the same two products in int16 (vpdpwssd, exact int32 sums of values scaled per query,
  // key and value column; kernels/cpu/gemm_int16.h), asked for where the weights are int8 or bf16
  // and bf16 products are not faster than f32 on this host but AVX-512 VNNI exists; honoured
  // where bf16_products is.
  bool int16_products = false;

  bool has_masks() const { return window >= 0 || position_bias != nullptr; }
};

// The keys [lo, hi) that query `i` of a sequence of `len` tokens sees under `plan`.
struct KeyRange {
  int64_t lo, hi;
};
inline KeyRange VisibleKeys(const AttentionPlan& plan, int64_t i, int64_t len) {
  int64_t lo = 0, hi = plan.causal ? i + 1 : len;
  if (plan.window >= 0) {
    lo = i - plan.window > 0 ? i - plan.window : 0;
    if (!plan.causal) hi = i + plan.window + 1 < len ? i + plan.window + 1 : len;
  }
  return {lo, hi};
}

// The bias of query i and key j (plan.position_bias must be set).
inline float PositionBias(const AttentionPlan& plan, int64_t head, int64_t i, int64_t j) {
  const int64_t m = plan.bias_max_distance;
  const int64_t d = j - i < -m ? -m : (j - i > m ? m : j - i);
  return plan.position_bias[head * (2 * m + 1) + d + m];
}

}  // namespace quiver::engine
