// The FCFS token-budget scheduler around one engine (an engine::BatchRunner: the Engine, or a
// test's fake). Chunks (atomic ragged pieces of requests) are admitted or refused at once.
// Batches are formed with FormBatch and two are kept in the engine (batch N+1 packed and
// submitted while batch N computes): Enqueue submits at once when the engine has room, and each
// completion delivers its batch and refills the engine. The scheduler has no thread of its own:
// on an idle server a request goes from the caller's thread to the engine's and back with no hop
// in between. Cancelled or expired chunks are dropped before they reach the engine; each chunk
// gets its rows when its batch is ready.
//
// Thread-safe: Enqueue from any thread. `done` callbacks run on the engine's compute thread when
// the batch completes (a chunk found cancelled or expired is answered on the thread that was
// submitting); keep them short, and never call Enqueue from one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "engine/batch_runner.h"
#include "scheduler/batcher.h"
#include "scheduler/limits.h"

namespace quiver::scheduler {

struct Chunk {
  engine::RaggedBatch batch;  // its sequences and output options
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::function<bool()> is_cancelled;  // optional; polled before compute
};

// A wall-clock deadline (a gRPC call's, a gateway request's) on the steady clock a Chunk's
// deadline is read on; max() (none) stays max().
inline std::chrono::steady_clock::time_point SteadyDeadline(
    std::chrono::system_clock::time_point deadline) {
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return std::chrono::steady_clock::time_point::max();
  }
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             deadline - std::chrono::system_clock::now());
}

// A chunk's share of its batch's output: its rows, in the engine's packed format.
struct ChunkResult {
  engine::EngineOutput output;
  int64_t queue_wait_us = 0;
  int64_t compute_us = 0;
};

using ChunkDone = std::function<void(absl::StatusOr<ChunkResult>)>;

class Scheduler {
 public:
  Scheduler(engine::BatchRunner* engine, SchedulerLimits limits, MetricsRegistry* metrics);
  ~Scheduler();  // drains

  // OK: admitted, and `done` will be called exactly once. Otherwise refused now (`done` is not
  // called): RESOURCE_EXHAUSTED (overload), INVALID_ARGUMENT (too long / malformed),
  // UNAVAILABLE (draining).
  absl::Status Enqueue(Chunk chunk, ChunkDone done);

  // Stops admitting and waits until every admitted chunk is done. Idempotent.
  void Drain();

  // Tokens admitted and not yet answered: queued or computing (the queue limit's measure).
  int64_t admitted_tokens() const;
  const SchedulerLimits& limits() const { return limits_; }

 private:
  struct Entry {
    Chunk chunk;
    ChunkDone done;
    std::chrono::steady_clock::time_point enqueued;
  };
  struct InFlight {
    engine::LazyResult result;
    std::vector<Entry> entries;
    std::chrono::steady_clock::time_point submitted;
  };
  // A chunk dropped before compute and the error that answers it.
  struct Dropped {
    ChunkDone done;
    absl::Status status;
  };
  // Batches in the engine at once: N computing, N + 1 packed and waiting.
  static constexpr size_t kPipelineDepth = 2;

  // With mu_ held: drops the queued chunks that nobody waits for any more (returned, to be
  // answered by AnswerDropped), then packs and submits batches while the engine has room.
  std::vector<Dropped> SubmitBatches();
  // Answers them with mu_ released (a done may take its caller's locks, or enqueue again) and
  // counted in hooks_pending_, so that Drain also waits for them; `lock` holds mu_ before and
  // after.
  void AnswerDropped(std::unique_lock<std::mutex>& lock, std::vector<Dropped> dropped);
  void OnBatchReady();  // on the engine's thread, when a batch completes
  void Deliver(InFlight& batch);
  bool Drained() const { return queue_.empty() && in_flight_.empty() && hooks_pending_ == 0; }

  engine::BatchRunner* engine_;
  SchedulerLimits limits_;
  int64_t max_input_tokens_;

  mutable std::mutex mu_;
  std::condition_variable drained_;  // the queue and the engine became empty
  std::deque<Entry> queue_;
  std::deque<InFlight> in_flight_;
  int64_t admitted_tokens_ = 0;  // queued + in flight
  bool draining_ = false;
  // Engine completion hooks (OnBatchReady) submitted and not yet finished, and answers to dropped
  // chunks under way (AnswerDropped). A hook may find its batch already delivered by the one
  // before it; Drain (and so the destructor) also waits for the hooks themselves, which would
  // otherwise run on a destroyed scheduler.
  int64_t hooks_pending_ = 0;

  // Metrics (owned by the registry).
  Gauge* queue_chunks_;
  Gauge* admitted_tokens_gauge_;
  Histogram* batch_tokens_;
  Histogram* batch_seqs_;
  Histogram* queue_wait_seconds_;
  Histogram* compute_seconds_;
  Counter* rejected_overload_;
  Counter* rejected_invalid_;
  Counter* dropped_;
  // The engine's device and graph figures (engine::EngineStats), published after each batch.
  void PublishEngineStats();  // with mu_ held
  Gauge* device_memory_bytes_;
  Gauge* weight_bytes_;
  Gauge* graphs_held_;
  Gauge* graph_memory_bytes_;
  Gauge* graph_capture_seconds_;
  Counter* graph_captures_;
  Counter* graph_replays_;
  Counter* eager_runs_;
  Counter* graph_evictions_;
  Counter* graph_failures_;
  engine::GraphStats published_;
};

}  // namespace quiver::scheduler
