// Splits a request's sequences into chunks of at most max_batch_tokens, sends each chunk to the
// healthy replica with the fewest outstanding tokens, retries a chunk whose replica failed
// (UNAVAILABLE, a lost connection, or a deadline-free overload) on another replica within the
// request's deadline, and reassembles the results in input order.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "gateway/replica.h"

namespace quiver::gateway {

// Pure: the index of the healthy replica with the fewest outstanding tokens, skipping those in
// `exclude`; -1 if none. Ties go to the first one at or after `start` (callers rotate it, so idle
// replicas share the traffic).
struct ReplicaLoad {
  bool healthy = false;
  int64_t outstanding_tokens = 0;
};
int PickReplica(std::span<const ReplicaLoad> replicas, std::span<const int> exclude,
                size_t start = 0);

// Pure: the chunk boundaries (sequence index ranges [begin, end)) for sequences of the given
// lengths: consecutive sequences, each chunk at most max_chunk_tokens tokens (a longer sequence
// is a chunk of its own).
std::vector<std::pair<size_t, size_t>> SplitIntoChunks(std::span<const int64_t> seq_tokens,
                                                       int64_t max_chunk_tokens);

struct Sequence {
  std::vector<uint32_t> ids;
  std::vector<uint32_t> type_ids;  // empty: all zero
  // Late chunking: (begin, end) token offsets within this sequence; one output row each.
  std::vector<std::pair<uint32_t, uint32_t>> spans;
};

// The current replicas; called once per request (a DNS-discovered set changes over time).
using ReplicaSource = std::function<std::vector<std::shared_ptr<Replica>>()>;

class Dispatcher {
 public:
  Dispatcher(std::vector<std::shared_ptr<Replica>> replicas, int64_t max_chunk_tokens);
  Dispatcher(ReplicaSource source, int64_t max_chunk_tokens);

  // Blocks until every chunk answered or the deadline passed. Rows come back in input order.
  absl::StatusOr<ReplicaResult> Run(CallKind kind, const std::vector<Sequence>& sequences,
                                    const quiver::v1::OutputOptions& output,
                                    std::chrono::system_clock::time_point deadline);

  bool any_healthy() const;
  std::vector<std::shared_ptr<Replica>> replicas() const { return source_(); }

 private:
  ReplicaSource source_;
  int64_t max_chunk_tokens_;
  std::atomic<size_t> rotation_{0};
};

}  // namespace quiver::gateway
