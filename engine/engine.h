// The engine: a loaded model behind an asynchronous interface. Submit() validates the ragged
// batch and returns a LazyResult at once; a persistent compute thread runs batches in order and
// fulfils the result. Each batch runs as plan -> forward -> pool (or score) -> format
// (Execute): the plan in runtime/, the forward pass in the model file, pooling and formatting
// as ops, all on the engine's device (the CPU today: kernels on a persistent thread pool).
//
// Engine is thread-safe: Submit may be called from any thread. Results arrive in submission
// order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "engine/attention/backend.h"
#include "engine/base/exec_context.h"
#include "engine/base/thread_pool.h"
#include "engine/base/workspace.h"
#include "engine/batch.h"
#include "engine/loader/weight_loader.h"
#include "engine/model_folder.h"
#include "engine/models/model.h"
#include "engine/runtime/plan.h"

namespace quiver::engine {

struct EngineOptions {
  int num_threads = 0;            // compute threads; 0 = the machine's cores
  std::string attention_backend;  // "" = the table (ChooseAttentionBackend), else forced
  bool pad_to_buckets = false;    // pad every batch to its graph bucket (what CUDA graphs run)
  ModelOptions model;
};

// The answer to one Submit. Ready() never blocks; Wait() blocks until the batch ran. Copyable;
// all copies share one result.
class LazyResult {
 public:
  bool Ready() const;
  const absl::StatusOr<EngineOutput>& Wait() const;

 private:
  friend class Engine;
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::StatusOr<EngineOutput> result;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Load(const std::string& model_dir,
                                                      const EngineOptions& options);
  ~Engine();  // finishes queued batches, then stops the compute thread

  // `on_ready`, if set, runs on the compute thread right after the result is set, also for a
  // batch that fails the checks; never inside Submit. The next batch waits for it: keep it short.
  LazyResult Submit(RaggedBatch batch, std::function<void()> on_ready = nullptr);
  // The checks Submit makes (ids, type ids, lengths, dimensions), for callers that want to refuse
  // a piece of a batch before packing it with others.
  absl::Status Validate(const RaggedBatch& batch) const;
  // Submit(batch).Wait(), for tools and tests.
  absl::StatusOr<EngineOutput> Run(RaggedBatch batch);

  const ModelFolder& folder() const { return *folder_; }
  const ModelInfo& info() const { return model_->info(); }
  bool is_scorer() const { return info().num_labels > 0; }
  int64_t hidden_size() const { return info().hidden_size; }
  int64_t max_input_tokens() const { return info().max_input_tokens; }
  double flops_per_token(int64_t seq_len) const { return model_->FlopsPerToken(seq_len); }

 private:
  Engine() = default;
  void ComputeLoop();
  absl::StatusOr<EngineOutput> Execute(const RaggedBatch& batch);

  EngineOptions options_;
  std::unique_ptr<ModelFolder> folder_;
  std::unique_ptr<WeightLoader> weights_;  // owns the prepared weights the model reads
  std::unique_ptr<Model> model_;
  std::unique_ptr<ThreadPool> pool_;
  ExecContext exec_;
  std::unique_ptr<AttentionBackend> forced_attention_;
  // The backends ChooseAttentionBackend's table names, by name.
  std::map<std::string_view, std::unique_ptr<AttentionBackend>> table_attention_;
  // Owned by the compute thread: the batch's plan, the model's scratch and the engine's own
  // (pooled rows).
  BatchPlan plan_;
  Allocator* allocator_ = nullptr;  // the device's
  std::unique_ptr<Workspace> model_ws_, engine_ws_;
  enum EngineSlot { kPooled, kScores };  // engine_ws_'s

  std::mutex mu_;
  std::condition_variable cv_;
  struct Pending {
    RaggedBatch batch;
    LazyResult result;
    std::function<void()> on_ready;
    absl::Status valid;  // Validate's answer; the batch runs only if OK
  };
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::thread compute_thread_;
};

}  // namespace quiver::engine
