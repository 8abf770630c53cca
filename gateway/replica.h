// A replica: somewhere a chunk of pre-tokenized sequences can be computed. LocalReplica (in-process
// scheduler and engine, app/local_replica.cc) and GrpcReplica (a `quiver worker`) implement it,
// so splitting, balancing and retry are the same code for `quiver serve` and `quiver gateway`.
//
// Implementations are thread-safe; `done` may run on any thread and must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "quiver/v1/inference.pb.h"

namespace quiver::gateway {

struct ReplicaResult {
  int64_t num_seqs = 0;
  int64_t dimensions = 0;  // values per sequence (1 for scores)
  quiver::v1::OutputType output_type = quiver::v1::OUTPUT_F32;
  std::string data;  // packed little-endian rows
  int64_t queue_wait_us = 0;
  int64_t compute_us = 0;
};

enum class CallKind { kEmbed, kScore };

// What bounds one request's work: its deadline, and whether its client is still there to read the
// answer (an HTTP client that closed its connection). Converts from a bare deadline.
struct CallContext {
  CallContext() = default;
  CallContext(std::chrono::system_clock::time_point d) : deadline(d) {}  // NOLINT: implicit
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  std::function<bool()> client_gone;  // optional; polled, so it must be cheap
  // Set when a stopping server's --drain-timeout passed: what is still running gives up (503).
  const std::atomic<bool>* stopping = nullptr;
  // The W3C traceparent the request's chunks carry to the replicas ("" none; telemetry/tracing.h).
  std::string traceparent;

  // OK while the request should go on; else CANCELLED (the client left), UNAVAILABLE (the server
  // stops) or DEADLINE_EXCEEDED, naming `stage` ("tokenization", ...).
  absl::Status Check(std::string_view stage) const;
};

// Raised once by whoever gives up on an attempt (the client left, the deadline passed, another
// replica answered first). A replica drops the chunk if it has not computed it yet and still
// calls `done` once (CANCELLED). Thread-safe.
class CancelSignal {
 public:
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  void Cancel();
  // Runs `hook` on Cancel, or at once when already cancelled. Hooks live as long as the signal
  // (the dispatcher keeps it until the request ends), so a hook must not own what owns the
  // signal (a call's `done` does): such a pair would never be freed.
  void OnCancel(std::function<void()> hook);

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::vector<std::function<void()>> hooks_;
};

class Replica {
 public:
  virtual ~Replica() = default;
  virtual const std::string& name() const = 0;
  virtual bool healthy() const = 0;
  // Tokens sent and not yet answered; the balancer sends a chunk to the replica with the fewest.
  virtual int64_t outstanding_tokens() const = 0;
  // Tokens its queue admits at once; 0 when unknown. The dispatcher refuses at once a request
  // larger than its healthy replicas' queues together: it could never be admitted.
  virtual int64_t max_queued_tokens() const { return 0; }
  // `done` runs exactly once, possibly before Call returns.
  virtual void Call(CallKind kind, const quiver::v1::Chunk& chunk,
                    std::chrono::system_clock::time_point deadline,
                    std::shared_ptr<CancelSignal> cancel,
                    std::function<void(absl::StatusOr<ReplicaResult>)> done) = 0;
};

}  // namespace quiver::gateway
