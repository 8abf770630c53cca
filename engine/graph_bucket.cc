#include "engine/graph_bucket.h"

#include "engine/base/token_bucket.h"

namespace quiver::engine {
namespace {

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

GraphBucket BucketFor(int64_t num_tokens, int64_t num_seqs) {
  GraphBucket b;
  b.tokens = TokenBucket(num_tokens);
  const int64_t seqs = num_seqs + (b.tokens > num_tokens ? 1 : 0);  // the padding sequence
  b.seqs = seqs <= 64 ? RoundUp(seqs, 8) : RoundUp(seqs, 32);
  return b;
}

}  // namespace quiver::engine
