// The token counts a forward pass is shaped for on a GPU: a batch's token count rounded up to a
// multiple of 64 up to 1024, then of 256 (at least 64). CUDA graphs are captured per such
// bucket (graph_bucket.h) and cuBLASLt algorithms are chosen per bucket (kernels/cuda/blaslt.h),
// so that the two always agree on what one bucket is.
#pragma once

#include <algorithm>
#include <cstdint>

namespace quiver::engine {

// Multiples of kFineTokenStep (and at least one) up to kCoarseFromTokens, then of
// kCoarseTokenStep.
inline constexpr int64_t kFineTokenStep = 64;
inline constexpr int64_t kCoarseFromTokens = 1024;
inline constexpr int64_t kCoarseTokenStep = 256;

inline int64_t TokenBucket(int64_t num_tokens) {
  const int64_t multiple = num_tokens <= kCoarseFromTokens ? kFineTokenStep : kCoarseTokenStep;
  return std::max<int64_t>(kFineTokenStep, (num_tokens + multiple - 1) / multiple * multiple);
}

}  // namespace quiver::engine
