// The answer lines of the benchmark binaries' --stdin mode (quiver_engine_bench,
// quiver_http_bench), which bench/paired.py reads: latencies as a JSON list of milliseconds.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace quiver::bench {

// [1.234, 5.678, ...]: each latency in ms with three decimals.
inline std::string MsList(const std::vector<double>& ms) {
  std::string out = "[";
  char buf[32];
  for (size_t i = 0; i < ms.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%s%.3f", i > 0 ? ", " : "", ms[i]);
    out += buf;
  }
  return out + "]";
}

}  // namespace quiver::bench
