// What the scheduler (scheduler/scheduler.h) needs of an engine: batches submitted from any
// thread, run in submission order, each answered through a LazyResult and a hook. Engine
// (engine.h) is the one that serves; tests stand a fake in its place to drive the scheduler's
// pipelining (batch N + 1 packed and submitted while batch N runs) with no model.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "engine/batch.h"
#include "engine/runtime/graph_cache.h"

namespace quiver::engine {

// The answer to one Submit. Ready() never blocks; Wait() blocks until the batch ran. Copyable;
// all copies share one result.
class LazyResult {
 public:
  bool Ready() const;
  const absl::StatusOr<EngineOutput>& Wait() const;
  // For the runner that made it: sets the result and wakes Wait(). Once per result; later calls
  // change nothing (what Wait() returned stays valid).
  void Fulfil(absl::StatusOr<EngineOutput> out) const;

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::StatusOr<EngineOutput> result;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// What the engine holds and did, for logs and metrics (a snapshot).
struct EngineStats {
  std::string device;               // "cpu", "cuda:0"
  int64_t device_memory_bytes = 0;  // CUDA: weights + buffers + graphs; 0 on the CPU
  int64_t weight_bytes = 0;         // CUDA: the model's weights on the device
  GraphStats graphs;
  std::string last_graph_failure;
};

class BatchRunner {
 public:
  virtual ~BatchRunner() = default;

  // Queues `batch` and returns at once. The results are fulfilled in submission order; then
  // `on_ready`, if set, runs on the runner's own thread (never inside Submit, where the caller
  // may hold the lock that on_ready takes), also for a batch the runner refuses.
  virtual LazyResult Submit(RaggedBatch batch, std::function<void()> on_ready) = 0;
  // The longest sequence a batch may hold.
  virtual int64_t max_input_tokens() const = 0;
  virtual EngineStats stats() const = 0;
  // Whether stats() changes as batches run (device memory, CUDA graphs); false where it is fixed
  // at load, as on the CPU.
  virtual bool stats_change() const = 0;
};

}  // namespace quiver::engine
