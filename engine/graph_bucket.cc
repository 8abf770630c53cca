#include "engine/graph_bucket.h"

#include "engine/base/token_bucket.h"

namespace quiver::engine {
namespace {

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Sequence counts: multiples of kFineSeqStep up to kCoarseFromSeqs, then of kCoarseSeqStep
// (BucketFor in graph_bucket.h).
constexpr int64_t kFineSeqStep = 8;
constexpr int64_t kCoarseFromSeqs = 64;
constexpr int64_t kCoarseSeqStep = 32;

}  // namespace

GraphBucket BucketFor(int64_t num_tokens, int64_t num_seqs) {
  GraphBucket b;
  b.tokens = TokenBucket(num_tokens);
  const int64_t seqs = num_seqs + (b.tokens > num_tokens ? 1 : 0);  // the padding sequence
  b.seqs = seqs <= kCoarseFromSeqs ? RoundUp(seqs, kFineSeqStep) : RoundUp(seqs, kCoarseSeqStep);
  return b;
}

}  // namespace quiver::engine
