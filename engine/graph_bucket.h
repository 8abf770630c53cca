// The CUDA-graph bucket policy, device-independent so it is unit-tested on CPU and shared by the
// CUDA backend. A batch is padded up to a bucket (token count to a multiple of 64 up to 1024,
// then of 256; sequence count with empty sequences); each bucket's graph is captured lazily: the
// first batch of a bucket runs eagerly, the second captures, later ones replay.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

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

enum class GraphAction { kEager, kCapture, kReplay };

// Per-bucket use counts -> what to do with the next batch of that bucket. Not thread-safe: owned
// by the engine's compute thread.
class GraphCachePolicy {
 public:
  GraphAction Next(const GraphBucket& bucket);
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }
  int64_t eager_runs() const { return eager_; }

 private:
  std::map<GraphBucket, int64_t> uses_;
  int64_t captures_ = 0, replays_ = 0, eager_ = 0;
};

}  // namespace quiver::engine
