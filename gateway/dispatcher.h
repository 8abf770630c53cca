// Splits a request's sequences into chunks of at most max_batch_tokens, sends each chunk to the
// healthy replica with the fewest outstanding tokens, retries a chunk whose replica failed
// (UNAVAILABLE, a lost connection, or a deadline-free overload) on another replica within the
// request's deadline, and reassembles the results in input order.
//
// A replica that hangs (stopped, wedged, partitioned without a reset) does not hold a request to
// its deadline: a chunk unanswered after its replica's usual latency — srtt + 4 x rttvar of that
// replica's answered chunks, as TCP sets its retransmission timeout (RFC 6298), never under
// HedgeOptions::min_attempt — is sent to a second healthy replica as well (a hedge); the first
// answer wins and the other attempt is cancelled. The silent replica gets no new chunks for a
// while (HedgeOptions::silent_for) unless it answers one, or is seen unhealthy and then healthy
// again (it reconnected and passed its health check: a host whose link came back). Hedges are
// budgeted (a bucket refilled by answered chunks), so a cluster that is slow everywhere is not sent
// twice the work. When the client leaves or the deadline passes, every attempt still out is
// cancelled (replicas drop such chunks before compute) and Run returns at once.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics.h"
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

struct HedgeOptions {
  std::chrono::milliseconds min_attempt{1000};      // the attempt timeout never goes below this
  std::chrono::milliseconds initial_attempt{3000};  // for a replica with no answered chunk yet
  double hedges_per_answer = 0.1;                   // the budget's refill per answered chunk
  double max_hedge_tokens = 10;                     // and its capacity (one hedge costs one)
  // How long a replica whose chunk had to be hedged gets no new chunks (unless it answers one, is
  // seen unhealthy and then healthy again, or no other healthy replica is left).
  std::chrono::milliseconds silent_for{10000};
};

// RFC 6298's estimator for one replica: smoothed latency and its variation.
class LatencyEstimate {
 public:
  void Observe(std::chrono::microseconds sample);
  // srtt + 4 rttvar, at least `floor`; `initial` before any sample.
  std::chrono::microseconds Timeout(std::chrono::microseconds floor,
                                    std::chrono::microseconds initial) const;
  int64_t samples() const { return samples_; }

 private:
  double srtt_us_ = 0, rttvar_us_ = 0;
  int64_t samples_ = 0;
};

struct Sequence {
  std::vector<uint32_t> ids;
  std::vector<uint32_t> type_ids;  // empty: all zero
  // Late chunking: (begin, end) token offsets within this sequence; one output row each.
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  // Leading tokens that came from a prompt (sentence-transformers' prompt_length), below
  // ids.size(); the worker leaves them out of the pooling where the model says so.
  uint32_t prompt_tokens = 0;
};

// The current replicas; called once per request (a DNS-discovered set changes over time).
using ReplicaSource = std::function<std::vector<std::shared_ptr<Replica>>()>;

class Dispatcher {
 public:
  Dispatcher(std::vector<std::shared_ptr<Replica>> replicas, int64_t max_chunk_tokens,
             HedgeOptions hedge = {});
  Dispatcher(ReplicaSource source, int64_t max_chunk_tokens, HedgeOptions hedge = {});
  ~Dispatcher();

  // Blocks until every chunk answered, the deadline passed or the client left (CANCELLED). Rows
  // come back in input order.
  absl::StatusOr<ReplicaResult> Run(CallKind kind, const std::vector<Sequence>& sequences,
                                    const quiver::v1::OutputOptions& output,
                                    const CallContext& call);

  bool any_healthy() const;
  std::vector<std::shared_ptr<Replica>> replicas() const { return source_(); }

  struct Counts {
    int64_t hedges = 0;      // second attempts sent for a chunk that was slow to answer
    int64_t hedges_won = 0;  // of those, answered first
    int64_t cancelled = 0;   // attempts cancelled (client gone, deadline, a hedge won)
  };
  Counts counts() const;
  // Publishes the counts as quiver_gateway_hedges_total, quiver_gateway_hedges_won_total and
  // quiver_gateway_attempts_cancelled_total. Call before the first Run.
  void ExportMetrics(MetricsRegistry* metrics);

  struct Shared;  // state the replicas' callbacks share with Run (they may outlive a Run)

 private:
  ReplicaSource source_;
  int64_t max_chunk_tokens_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace quiver::gateway
