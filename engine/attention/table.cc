#include "engine/attention/table.h"

#include <algorithm>
#include <limits>

namespace quiver::engine {
namespace {

struct Row {
  Device device;
  std::string_view family;  // "*": any family without rows of its own
  int64_t head_dim;         // 0: any
  int64_t up_to_seqlen;     // inclusive
  std::string_view backend;
};

constexpr int64_t kAnyLength = std::numeric_limits<int64_t>::max();

// CPU: flash at every length and for both families (measured in turns against packed and tiled:
// docs/benchmarks.md); "reference" is the plain loop the others are tested against.
// CUDA: the attention stage of scripts/gpu-check.sh on an H200 (2026-12-04, docs/benchmarks.md,
// "GPU"): the fastest backend per head_dim and batch shape, summed over bidirectional and causal
// (64x128, 16x512, 4x2048, 1x8192 tokens, 16 query and 8 key/value heads). head_dim 128: FA3 at
// every shape (0.047 against the varlen kernel's 0.062 ms at 64x128, 0.79 against 1.99 ms at
// 1x8192); head_dim 64: FA2 up to 128 tokens (0.062 ms both ways against FA3's 0.071 and the
// varlen kernel's 0.072), FA3 beyond; other head_dims (32: MiniLM-sized BERTs) have no FlashInfer
// instance: quiver's varlen kernel. A model the chosen backend cannot run (a sliding window or a
// position bias) takes the engine's fallback, the varlen kernel.
constexpr Row kTable[] = {
    {Device::kCpu, "*", 0, kAnyLength, "flash"},
#ifdef QUIVER_WITH_CUDA
    {Device::kCuda, "*", 64, 128, "flashinfer_fa2"},
    {Device::kCuda, "*", 64, kAnyLength, "flashinfer_fa3"},
    {Device::kCuda, "*", 128, kAnyLength, "flashinfer_fa3"},
    {Device::kCuda, "*", 0, kAnyLength, "cuda_varlen"},
#endif
};

// The rows that apply to a model of `family` and `head_dim` on `device`, in the table's order: the
// family's own rows where it has any, else the device's defaults ("*").
std::vector<const Row*> RowsFor(Device device, std::string_view family, int64_t head_dim) {
  const bool has_rows = std::any_of(std::begin(kTable), std::end(kTable), [&](const Row& row) {
    return row.device == device && row.family == family;
  });
  const std::string_view key = has_rows ? family : "*";
  std::vector<const Row*> rows;
  for (const Row& row : kTable) {
    if (row.device == device && row.family == key &&
        (row.head_dim == 0 || row.head_dim == head_dim)) {
      rows.push_back(&row);
    }
  }
  return rows;
}

}  // namespace

std::string_view ChooseAttentionBackend(Device device, std::string_view family, int64_t head_dim,
                                        int64_t max_seqlen) {
  for (const Row* row : RowsFor(device, family, head_dim)) {
    if (max_seqlen <= row->up_to_seqlen) return row->backend;
  }
  return "";  // no row: the device has no attention backend in this build
}

std::vector<std::string_view> TableAttentionBackends(Device device, std::string_view family,
                                                     int64_t head_dim) {
  std::vector<std::string_view> names;
  for (const Row* row : RowsFor(device, family, head_dim)) {
    if (std::find(names.begin(), names.end(), row->backend) == names.end()) {
      names.push_back(row->backend);
    }
    if (row->up_to_seqlen == kAnyLength) break;  // the rows after it are never reached
  }
  return names;
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
