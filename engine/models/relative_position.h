// Relative position buckets as T5 and MPNet compute them (transformers'
// T5Attention._relative_position_bucket, MPNetEncoder.relative_position_bucket: the same
// function), and the per-distance bias table the attention plan takes (base/attention_plan.h).
// Host arithmetic at load, float32 as PyTorch does it, so that a distance on a bucket edge lands
// in the bucket transformers puts it in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace quiver::engine {

// The bucket of relative position `d` = key - query, bidirectional: half the buckets for keys
// after the query. Distances of max_distance and beyond share the last bucket of their side.
inline int64_t RelativePositionBucket(int64_t d, int64_t num_buckets, int64_t max_distance) {
  const int64_t half = num_buckets / 2;
  int64_t bucket = d > 0 ? half : 0;
  const int64_t n = d < 0 ? -d : d;
  const int64_t max_exact = half / 2;
  if (n < max_exact) return bucket + n;
  const float scaled = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) /
                       static_cast<float>(std::log(static_cast<double>(max_distance) /
                                                   static_cast<double>(max_exact))) *
                       static_cast<float>(half - max_exact);
  return bucket + std::min<int64_t>(max_exact + static_cast<int64_t>(scaled), half - 1);
}

// [heads, 2 · max_distance + 1]: the bias of head h at distance d (clamped to ±max_distance,
// where the buckets stop changing) from the bucket embedding `weight` [num_buckets, heads].
inline std::vector<float> RelativePositionBiasTable(const float* weight, int64_t num_buckets,
                                                    int64_t heads, int64_t max_distance) {
  const int64_t width = 2 * max_distance + 1;
  std::vector<float> table(static_cast<size_t>(heads * width));
  for (int64_t d = -max_distance; d <= max_distance; ++d) {
    const int64_t bucket = RelativePositionBucket(d, num_buckets, max_distance);
    for (int64_t h = 0; h < heads; ++h) {
      table[static_cast<size_t>(h * width + d + max_distance)] = weight[bucket * heads + h];
    }
  }
  return table;
}

}  // namespace quiver::engine
