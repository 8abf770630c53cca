// What the engine's compute thread asks of a device: run one planned batch to f32 rows in host
// memory (pooled vectors, or scores), possibly asynchronously, so that batch N+1 is enqueued
// while batch N runs. The engine keeps validation, planning, ordering and the host-side output
// formatting (ops::FormatOutput); a runtime owns its device's execution state:
//
//   CpuRuntime   (this file) runs the batch inside Start on the engine's thread pool; its rows
//                are ready when Start returns.
//   CudaRuntime  (runtime/cuda_runtime.h, CUDA builds) enqueues inputs, the forward pass (eager
//                or a CUDA graph), pooling and the copy of the rows into a slot's pinned buffer,
//                and records the slot's event: Start returns before the device finished.
//
// Start and Finish are called by one thread (the engine's compute thread), each started batch
// finished exactly once, in start order; at most slots() batches are started and not finished.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/attention/backend.h"
#include "engine/base/exec_context.h"
#include "engine/base/op_types.h"
#include "engine/base/workspace.h"
#include "engine/models/model.h"
#include "engine/runtime/graph_cache.h"
#include "engine/runtime/plan.h"

namespace quiver::engine {

// One batch to run: its plan (BuildPlan's, valid until Finish) and what to make of the hidden
// states. Rows are plan.row_bounds' (pooling) or the real sequences' (scoring).
struct BatchWork {
  const BatchPlan* plan = nullptr;
  const AttentionBackend* attention = nullptr;
  bool score = false;  // Model::Score instead of pooling
  // When pooling: one block of `rows` rows per mode, in order (several only on the CPU).
  std::vector<PoolMode> pools;
  int64_t rows = 0;   // rows of the answer
  int64_t width = 0;  // floats per row: hidden size or num_labels
};

struct RuntimeStats {
  int64_t device_memory_bytes = 0;  // held by the runtime on its device (weights excluded: 0 on
                                    // the CPU), including the graphs
  int64_t weight_bytes = 0;         // the model's weights on the device
  GraphStats graphs;
  std::string last_graph_failure;  // why the last failed capture failed (empty: none)
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual const ExecContext& exec() const = 0;
  virtual int slots() const = 0;

  // Enqueues `work`; `on_complete` runs once the rows are in host memory (on the calling thread
  // inside Start for the CPU, on a CUDA driver thread for the GPU), or never when the device
  // failed (Settled says so): it must only signal. Returns the batch's ticket for Finish. An
  // error means nothing is in flight for this batch.
  virtual absl::StatusOr<int> Start(const BatchWork& work, std::function<void()> on_complete) = 0;
  // Blocks (without spinning) until the ticket's batch completed; then its rows, f32
  // [rows, width] in host memory, valid until the next Start.
  virtual absl::StatusOr<const float*> Finish(int ticket) = 0;
  // True when the ticket's batch completed or failed, so that Finish will not block. The engine
  // asks when a batch is late: a host function is never called once a CUDA context has an
  // error, and a device fault must fail the batch, not hang it.
  virtual bool Settled(int /*ticket*/) const { return true; }

  virtual RuntimeStats stats() const = 0;
};

// The CPU's runtime: Forward, then pooling or scoring into the engine's host workspace. With
// `output_rows`, where the answer reads one token per row (CLS or last-token pooling, a
// classifier on the CLS token) the forward pass is told those rows (ForwardContext::output_rows).
class CpuRuntime final : public DeviceRuntime {
 public:
  CpuRuntime(const Model& model, ExecContext exec, Workspace& model_ws, Workspace& own_ws,
             bool output_rows = true)
      : model_(model),
        exec_(exec),
        model_ws_(model_ws),
        own_ws_(own_ws),
        output_rows_(output_rows) {}
  const ExecContext& exec() const override { return exec_; }
  int slots() const override { return 1; }
  absl::StatusOr<int> Start(const BatchWork& work, std::function<void()> on_complete) override;
  absl::StatusOr<const float*> Finish(int ticket) override;
  RuntimeStats stats() const override { return {}; }

 private:
  const Model& model_;
  ExecContext exec_;
  Workspace& model_ws_;
  Workspace& own_ws_;
  const bool output_rows_;
  std::vector<int32_t> picked_;  // the batch's output rows, when it has them
  const float* rows_ = nullptr;
};

// The token rows `work`'s answer reads, one per row, into `rows`; false (rows cleared) where it
// reads more: mean or max pooling, several modes, late chunking's spans (also the per-token
// rows of raw hidden states), a scorer that reads every token (SPLADE) or another token.
bool OutputRows(const Model& model, const BatchWork& work, std::vector<int32_t>& rows);

// A host i32 [pairs.size() / 2, 2] view of (begin, end) pairs (a plan's bounds).
Tensor HostBounds(const std::vector<int32_t>& pairs);
// A host i32 [rows.size() / 3, 3] view of (begin, end, origin) rows (a plan's row_bounds).
Tensor HostRowBounds(const std::vector<int32_t>& rows);

// The forward context of a planned batch whose inputs are host vectors (the CPU's).
ForwardContext HostForwardContext(const ExecContext& exec, const BatchPlan& plan,
                                  const AttentionBackend& attention, Workspace& ws);

}  // namespace quiver::engine
