// The score arithmetic the service and the routes share: one definition each, so that a score
// computed for one route is the same float for every other.
#pragma once

#include <cmath>
#include <cstddef>

namespace quiver::gateway::api {

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// a · b over n values, summed in index order in float: two normalized rows' cosine similarity.
inline float Dot(const float* a, const float* b, size_t n) {
  float dot = 0;
  for (size_t j = 0; j < n; ++j) dot += a[j] * b[j];
  return dot;
}

}  // namespace quiver::gateway::api
