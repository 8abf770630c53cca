#include "engine/attention/table.h"

#include <algorithm>
#include <limits>

namespace quiver::engine {
namespace {

struct Row {
  Device device;
  std::string_view family;  // "*": any family without rows of its own
  int64_t up_to_seqlen;     // inclusive
  std::string_view backend;
};

constexpr int64_t kAnyLength = std::numeric_limits<int64_t>::max();

// CPU: flash at every length and for both families (measured in turns against packed and tiled:
// docs/benchmarks.md); "reference" is the plain loop the others are tested against.
// CUDA: quiver's own varlen kernel, the one backend that covers every head_dim the models have
// (32 for MiniLM-sized BERTs, 128 for Qwen3), until the device check's attention stage
// (scripts/gpu-check.sh) has measured where FlashInfer's FA2 and FA3 kernels win; its crossover
// table becomes these rows.
constexpr Row kTable[] = {
    {Device::kCpu, "*", kAnyLength, "flash"},
#ifdef QUIVER_WITH_CUDA
    {Device::kCuda, "*", kAnyLength, "cuda_varlen"},
#endif
};

}  // namespace

std::string_view ChooseAttentionBackend(Device device, std::string_view family,
                                        int64_t max_seqlen) {
  const bool has_rows = std::any_of(std::begin(kTable), std::end(kTable), [&](const Row& row) {
    return row.device == device && row.family == family;
  });
  const std::string_view key = has_rows ? family : "*";
  for (const Row& row : kTable) {
    if (row.device == device && row.family == key && max_seqlen <= row.up_to_seqlen) {
      return row.backend;
    }
  }
  return "";  // no row: the device has no attention backend in this build
}

std::vector<std::string_view> TableAttentionBackends(Device device) {
  std::vector<std::string_view> names;
  for (const Row& row : kTable) {
    if (row.device == device && std::find(names.begin(), names.end(), row.backend) == names.end()) {
      names.push_back(row.backend);
    }
  }
  return names;
}

}  // namespace quiver::engine
