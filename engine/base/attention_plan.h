// The attention metadata of one ragged batch: built once before the layer loop, read-only after,
// shared by every attention kernel of every device (kernels take it with raw pointers).
#pragma once

#include <cstdint>

namespace quiver::engine {

struct AttentionPlan {
  const int32_t* cu_seqlens = nullptr;  // [num_seqs + 1], host memory
  // The same array in device memory, for devices other than the CPU (kernels read it there; the
  // host copy sizes their grids and plans their tiles).
  const int32_t* device_cu_seqlens = nullptr;
  int64_t num_seqs = 0;
  int64_t max_seqlen = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // GQA: query head h reads kv head h / (num_heads / num_kv_heads)
  int64_t head_dim = 0;
  bool causal = false;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
};

}  // namespace quiver::engine
