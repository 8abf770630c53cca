// The CUDA-graph bucket policy, device-independent so it is unit-tested on CPU and shared by the
// CUDA backend. A batch is padded up to a bucket (token count to a multiple of 64 up to 1024,
// then of 256; sequence count with empty sequences); each bucket's graph is captured lazily: the
// first batch of a bucket runs eagerly, the second captures, later ones replay.
#pragma once

#include <compare>
#include <cstdint>

namespace quiver::engine {

struct GraphBucket {
  int64_t tokens = 0;
  int64_t seqs = 0;
  auto operator<=>(const GraphBucket&) const = default;
};

// The smallest bucket holding `num_tokens` tokens in `num_seqs` sequences. Sequence counts are
// padded to a multiple of 8 up to 64, then of 32. When tokens are padded the padding forms one
// extra sequence, which the seq count also counts.
GraphBucket BucketFor(int64_t num_tokens, int64_t num_seqs);

}  // namespace quiver::engine
