// The engine: a loaded model behind an asynchronous interface. Submit() validates the ragged
// batch and returns a LazyResult at once; a persistent compute thread runs batches in order and
// fulfils the result. Each batch runs as plan -> forward -> pool (or score) -> format: the plan
// in runtime/plan.h, the forward pass in the model file, pooling as an op, all on the engine's
// device through its runtime (runtime/device_runtime.h), then the host-side formatting.
//
// On the CPU a batch runs on a persistent thread pool inside the compute thread. On CUDA the
// compute thread enqueues batch N+1 (inputs, the forward pass as a CUDA graph or eagerly,
// pooling, the copy back into a slot's pinned buffer, the slot's event) before it waits for
// batch N's event; a CUDA driver callback wakes it when a batch's rows are in host memory, so
// neither it nor LazyResult::Wait spins a core.
//
// Engine is thread-safe: Submit may be called from any thread. Results arrive in submission
// order.
#pragma once

#include <atomic>
#include <chrono>
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
#include "common/cpu_budget.h"
#include "engine/attention/backend.h"
#include "engine/base/exec_context.h"
#include "engine/base/thread_pool.h"
#include "engine/base/workspace.h"
#include "engine/batch.h"
#include "engine/batch_runner.h"
#include "engine/dense_modules.h"
#include "engine/loader/weight_loader.h"
#include "engine/model_folder.h"
#include "engine/models/model.h"
#include "engine/runtime/device_runtime.h"
#include "engine/runtime/graph_cache.h"
#include "engine/runtime/plan.h"

namespace quiver::engine {

// A --device value: "cpu", "cuda" (= cuda:0) or "cuda:N".
struct DeviceSpec {
  Device device = Device::kCpu;
  int index = 0;
  std::string ToString() const;
};
// INVALID_ARGUMENT naming the accepted forms for anything else.
absl::StatusOr<DeviceSpec> ParseDeviceSpec(std::string_view text);
// INVALID_ARGUMENT naming "off" and "lazy" for anything else.
absl::StatusOr<GraphMode> ParseGraphMode(std::string_view text);

struct EngineOptions {
  // CPU compute threads; 0 = the CPUs this process may use (common/cpu_budget.h: its affinity
  // mask capped by a cgroup CPU quota), not the machine's cores.
  int num_threads = 0;
  std::string attention_backend;  // "" = the table (ChooseAttentionBackend), else forced
  bool pad_to_buckets = false;    // CPU: pad every batch to its graph bucket (what CUDA runs)
  // CPU: where the answer reads one token per sequence (CLS or last-token pooling, a classifier
  // on the CLS token or, in a decoder, on the last one), the last layer's work after attention
  // runs on those rows only (ForwardContext::output_rows; the BERT, ModernBERT and decoder
  // families; the same bits). False: on every row, for tests.
  bool skip_unread_rows = true;
  ModelOptions model;
  // Replaces the folder's pooling (--pooling; embedding models only, refused for scorers).
  std::optional<PoolingMode> pooling;
  DeviceSpec device;
  // kInt8 / kBf16: the base model's Linear layers in int8 or bf16 (CPU only; heads stay f32).
  ops::WeightPrecision quantize = ops::WeightPrecision::kF32;
  // CUDA only. The largest batch: persistent buffers are sized once at load for its bucket (or
  // for one sequence at the model's limit, if that is more) and never reallocated (graphs hold
  // their addresses); larger batches are refused.
  int64_t max_batch_tokens = 16384;
  int64_t max_batch_seqs = 512;
  GraphMode cuda_graphs = GraphMode::kLazy;
  int64_t max_graphs = 1024;         // LRU cap on captured graphs
  int64_t graph_max_tokens = 16384;  // batches above run eagerly (and unpadded)
  int slots = 2;                     // batches in flight (2 or 3)
  // After a batch with nothing queued behind it, the compute thread polls for the next one this
  // long before it sleeps, and the pool's workers as long (ThreadPool::Rest; 0: all sleep at
  // once). A thread that sleeps between a client's requests lets its vCPU go idle, and the next
  // forward pass ran slower: through `quiver serve` on a Xeon, batch-1 search queries took
  // 1.5x-1.9x the time at one thread and 1.31x at two, 128-token texts 1.11x-1.14x and 1.08x
  // (docs/engine.md, "The compute thread between requests"). Costs at most this much CPU per
  // batch and thread, only when the queue runs empty.
  std::chrono::microseconds spin_wait{2000};
  // Tests only: the runtime a CPU engine runs its batches on, instead of CpuRuntime (a fake
  // asynchronous device, to exercise the pipeline without a GPU). Given the model, the CPU
  // execution context and the two workspaces.
  std::function<std::unique_ptr<DeviceRuntime>(const Model&, const ExecContext&, Workspace&,
                                               Workspace&)>
      make_runtime;
};

// The device settings `quiver serve`, `worker` and `embed` share (their --device, --cuda-graphs,
// --max-graphs and --graph-max-tokens flags), as typed.
struct DeviceSettings {
  std::string device = "cpu";
  std::string cuda_graphs = "lazy";
  int64_t max_graphs = 1024;
  int64_t graph_max_tokens = 16384;
  std::string quantize = "none";  // --quantize: none, int8 or bf16
  double min_int8_cosine = 0.99;  // --min-int8-cosine: the int8 fidelity gate's bound
  std::string pooling;            // --pooling: "" keeps the folder's (PoolingModeFromName)
  int64_t spin_wait_us = 2000;    // --spin-wait-us: EngineOptions::spin_wait
  // Whether the command line gave --quantize / --min-int8-cosine / --pooling: a model folder's
  // quiver.json (ApplyModelSettings) sets only what it did not.
  bool quantize_given = false, min_int8_cosine_given = false, pooling_given = false;
};
// The model folder's own settings, from an optional `quiver.json` beside config.json:
//   {"quantize": "int8", "min_int8_cosine": 0.995, "pooling": "cls"}
// (each key optional), applied to `settings` where the command line did not set them: a model
// that is served quantized says so once, in its folder. No file: nothing changes.
// INVALID_ARGUMENT naming the file and the key for an unknown key, a wrong type or a value out
// of range.
absl::Status ApplyModelSettings(const std::string& model_dir, DeviceSettings& settings);
// Fills `options`' device fields from `settings` and the batch limits the scheduler applies
// (the CUDA buffers are sized for them); INVALID_ARGUMENT naming the flag.
absl::Status ApplyDeviceSettings(const DeviceSettings& settings, int64_t max_batch_tokens,
                                 int64_t max_batch_seqs, EngineOptions& options);

class Engine final : public BatchRunner {
 public:
  // Loads the folder (LoadModelFolder) after the checks that need none of it.
  static absl::StatusOr<std::unique_ptr<Engine>> Load(const std::string& model_dir,
                                                      const EngineOptions& options);
  // From a folder already loaded, e.g. one its caller read for what the engine's options need
  // from outside the engine (app/commands.h, ResolveModelOptions): it is not read again.
  static absl::StatusOr<std::unique_ptr<Engine>> Load(ModelFolder folder,
                                                      const EngineOptions& options);
  ~Engine() override;  // finishes queued batches, then stops the compute thread

  // `on_ready`, if set, runs on the compute thread right after the result is set, also for a
  // batch that fails the checks; never inside Submit. The next batch waits for it: keep it short.
  LazyResult Submit(RaggedBatch batch, std::function<void()> on_ready) override;
  LazyResult Submit(RaggedBatch batch) { return Submit(std::move(batch), nullptr); }
  // The checks Submit makes (ids, type ids, lengths, dimensions, and on CUDA the batch limits
  // the buffers were sized for), for callers that want to refuse a piece of a batch before
  // packing it with others.
  absl::Status Validate(const RaggedBatch& batch) const;
  // Submit(batch).Wait(), for tools and tests.
  absl::StatusOr<EngineOutput> Run(RaggedBatch batch);

  const ModelFolder& folder() const { return *folder_; }
  const ModelInfo& info() const { return model_->info(); }
  bool is_scorer() const { return info().num_labels > 0; }
  int64_t hidden_size() const { return info().hidden_size; }
  // The width pooling gives: hidden_size per pooling mode (several are concatenated).
  int64_t pooled_size() const {
    return hidden_size() * static_cast<int64_t>(folder_->pooling.modes.size());
  }
  // The width of an embedding: the last Dense module's out_features, else pooled_size.
  int64_t output_size() const { return dense_.out_features(pooled_size()); }
  int64_t max_input_tokens() const override { return info().max_input_tokens; }
  double flops_per_token(int64_t seq_len) const { return model_->FlopsPerToken(seq_len); }
  const EngineOptions& options() const { return options_; }
  EngineStats stats() const override;
  bool stats_change() const override { return options_.device.device != Device::kCpu; }
  // One line for the start-up log: the device, its memory taken, the graph settings.
  std::string DeviceSummary() const;

 private:
  Engine() = default;
  // Load after CheckLoadOptions (each public Load checks once).
  static absl::StatusOr<std::unique_ptr<Engine>> LoadChecked(ModelFolder folder,
                                                             const EngineOptions& options);
  absl::Status LoadCpu(const std::string& model_dir);  // the model, its pool and runtime
  absl::Status LoadCuda(const std::string& model_dir);
  absl::Status WarmUp();
  void ComputeLoop();

  struct Pending {
    RaggedBatch batch;
    LazyResult result;
    std::function<void()> on_ready;
    absl::Status valid;  // Validate's answer; the batch runs only if OK
  };
  // A batch started on the runtime (or refused: `failed` set), until it is finished in order.
  struct Running {
    Pending item;
    int ticket = -1;
    std::shared_ptr<std::atomic<bool>> done;
    absl::Status failed;
    int64_t rows = 0, width = 0;
    // Pooled blocks of rows x width, one per pooling mode, whose rows Finish puts side by side.
    int64_t blocks = 1;
  };
  Running Start(Pending item);
  absl::StatusOr<EngineOutput> Finish(const Running& running);
  void Deliver(Pending& item, absl::StatusOr<EngineOutput> out);
  // Whether `backend` runs `info`'s attention (head_dim, window and bias).
  static bool Runs(const AttentionBackend& backend, const ModelInfo& info);
  // Checks the forced backend, or finds a fallback for table backends that cannot run the model.
  absl::Status FitAttention(const ModelInfo& info);
  // The backend a batch runs: the forced one, else the table's (or the fallback where the
  // table's cannot run the model). `graphable`: a CUDA graph may run the batch; a backend that
  // plans per batch on the host (FlashInfer) cannot be captured, so such a batch takes a
  // capturable one that runs the model where there is one (the varlen kernel).
  const AttentionBackend& AttentionFor(int64_t max_seqlen, bool graphable) const;
  // The backend that runs this model inside CUDA graphs (capturable), or null.
  const AttentionBackend* CapturableAttention() const;
  std::string CudaAttentionSummary() const;
  // Up to this many bucket tokens a batch runs in a CUDA graph with a capturable attention
  // backend rather than eagerly with FlashInfer, where the table names FlashInfer. Measured on
  // the H200 with the Qwen3-0.6B shape (head_dim 128; docs/benchmarks.md, "GPU"): at 1x128
  // tokens the graph with the varlen kernel took 1.98 ms against FlashInfer FA3 eagerly 2.73;
  // at 100x128 (12,800 tokens) the two were even (33.5 and 33.3 ms); in 16,384-token batches
  // FA3 eagerly gave 8% more tokens/s. 8,192 lies between the first two, not measured itself.
  static constexpr int64_t kGraphsBeforeFlashInferTokens = 8192;
  void UpdateStats();

  EngineOptions options_;
  std::unique_ptr<ModelFolder> folder_;
  std::unique_ptr<WeightLoader> weights_;  // owns the prepared weights the model reads
  std::unique_ptr<Model> model_;
  CpuBudget cpu_budget_;              // read at load: what num_threads 0 means
  std::unique_ptr<ThreadPool> pool_;  // CPU only
  std::unique_ptr<AttentionBackend> forced_attention_;
  // The backends ChooseAttentionBackend's table names, by name.
  std::map<std::string_view, std::unique_ptr<AttentionBackend>> table_attention_;
  DenseModules dense_;  // sentence-transformers Dense modules after pooling, on the host
  // Where a table backend cannot run the model (its head_dim, its masks): the one that does.
  std::unique_ptr<AttentionBackend> fallback_attention_;
  // Owned by the compute thread: the batch's plan, the model's scratch and the runtime's own.
  BatchPlan plan_;
  std::unique_ptr<Workspace> model_ws_, engine_ws_;
  std::unique_ptr<DeviceRuntime> runtime_;
  int64_t cuda_max_tokens_ = 0;    // CUDA: the largest batch the buffers hold
  int64_t load_device_bytes_ = 0;  // CUDA: device memory the load took (weights + buffers)
  int64_t weight_bytes_ = 0;

  mutable std::mutex stats_mu_;
  EngineStats stats_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  // Batches submitted since the start, plus one when stopping: the compute thread, polling
  // after a batch (spin_wait), reads it without taking mu_.
  std::atomic<uint64_t> arrivals_{0};
  bool stopping_ = false;
  std::thread compute_thread_;
};

}  // namespace quiver::engine
