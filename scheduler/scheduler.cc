#include "scheduler/scheduler.h"

#include <cstring>

#include "common/strings.h"

namespace quiver::scheduler {
namespace {

using Clock = std::chrono::steady_clock;

int64_t Micros(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

}  // namespace

Scheduler::Scheduler(engine::BatchRunner* engine, SchedulerLimits limits, MetricsRegistry* metrics)
    : engine_(engine), limits_(limits), max_input_tokens_(engine->max_input_tokens()) {
  queue_chunks_ = &metrics->GetGauge("quiver_scheduler_queue_chunks", "Chunks waiting for a batch");
  admitted_tokens_gauge_ = &metrics->GetGauge(
      "quiver_scheduler_admitted_tokens", "Tokens admitted and not finished (queued or computing)");
  batch_tokens_ = &metrics->GetHistogram("quiver_scheduler_batch_tokens", "Tokens per batch",
                                         MetricsRegistry::ExponentialBuckets(16, 2, 14));
  batch_seqs_ = &metrics->GetHistogram("quiver_scheduler_batch_seqs", "Sequences per batch",
                                       MetricsRegistry::ExponentialBuckets(1, 2, 11));
  queue_wait_seconds_ = &metrics->GetHistogram("quiver_scheduler_queue_wait_seconds",
                                               "Time from admission to submission to the engine",
                                               MetricsRegistry::ExponentialBuckets(0.0001, 2, 16));
  compute_seconds_ = &metrics->GetHistogram("quiver_scheduler_compute_seconds",
                                            "Time from submission to result, per batch",
                                            MetricsRegistry::ExponentialBuckets(0.0005, 2, 16));
  rejected_overload_ = &metrics->GetCounter("quiver_scheduler_rejected_total",
                                            "Chunks refused at admission", "reason=\"overload\"");
  rejected_invalid_ = &metrics->GetCounter("quiver_scheduler_rejected_total",
                                           "Chunks refused at admission", "reason=\"invalid\"");
  dropped_ = &metrics->GetCounter("quiver_scheduler_dropped_total",
                                  "Chunks cancelled or expired before compute");
  const std::string device = MetricLabel("device", engine->stats().device);
  device_memory_bytes_ = &metrics->GetGauge(
      "quiver_engine_device_memory_bytes",
      "Device memory the engine holds: weights, activation buffers, CUDA graphs (0 on the CPU)",
      device);
  weight_bytes_ = &metrics->GetGauge("quiver_engine_weight_bytes",
                                     "Device memory of the model's weights (0 on the CPU)", device);
  graphs_held_ = &metrics->GetGauge("quiver_engine_cuda_graphs", "CUDA graphs held", device);
  graph_memory_bytes_ = &metrics->GetGauge("quiver_engine_cuda_graph_memory_bytes",
                                           "Device memory of the CUDA graphs held", device);
  graph_capture_seconds_ =
      &metrics->GetGauge("quiver_engine_cuda_graph_capture_seconds",
                         "Time spent capturing and instantiating CUDA graphs", device);
  graph_captures_ = &metrics->GetCounter("quiver_engine_cuda_graph_captures_total",
                                         "CUDA graphs captured", device);
  graph_replays_ = &metrics->GetCounter("quiver_engine_cuda_graph_replays_total",
                                        "Batches run by replaying a CUDA graph", device);
  eager_runs_ = &metrics->GetCounter("quiver_engine_eager_runs_total",
                                     "Batches run without a CUDA graph", device);
  graph_evictions_ = &metrics->GetCounter("quiver_engine_cuda_graph_evictions_total",
                                          "CUDA graphs dropped for --max-graphs", device);
  graph_failures_ =
      &metrics->GetCounter("quiver_engine_cuda_graph_capture_failures_total",
                           "CUDA graph captures that failed (the bucket runs eagerly)", device);
  PublishEngineStats();
}

void Scheduler::PublishEngineStats() {
  const engine::EngineStats stats = engine_->stats();
  const engine::GraphStats& g = stats.graphs;
  device_memory_bytes_->Set(static_cast<double>(stats.device_memory_bytes));
  weight_bytes_->Set(static_cast<double>(stats.weight_bytes));
  graphs_held_->Set(static_cast<double>(g.held));
  graph_memory_bytes_->Set(static_cast<double>(g.memory_bytes));
  graph_capture_seconds_->Set(g.capture_ms / 1000.0);
  graph_captures_->Inc(g.captures - published_.captures);
  graph_replays_->Inc(g.replays - published_.replays);
  eager_runs_->Inc(g.eager_runs - published_.eager_runs);
  graph_evictions_->Inc(g.evictions - published_.evictions);
  graph_failures_->Inc(g.failed - published_.failed);
  published_ = g;
}

Scheduler::~Scheduler() { Drain(); }

int64_t Scheduler::admitted_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return admitted_tokens_;
}

absl::Status Scheduler::Enqueue(Chunk chunk, ChunkDone done) {
  const int64_t tokens = chunk.batch.num_tokens();
  const int64_t seqs = chunk.batch.num_seqs();
  const int64_t longest = seqs > 0 ? chunk.batch.max_seqlen() : 0;
  std::unique_lock<std::mutex> lock(mu_);
  if (draining_) return absl::UnavailableError("worker is shutting down; retry on another replica");
  absl::Status admit = Admit(tokens, seqs, longest, admitted_tokens_, max_input_tokens_, limits_);
  if (!admit.ok()) {
    (admit.code() == absl::StatusCode::kResourceExhausted ? rejected_overload_ : rejected_invalid_)
        ->Inc();
    return admit;
  }
  admitted_tokens_ += tokens;
  queue_.push_back({std::move(chunk), std::move(done), Clock::now()});
  queue_chunks_->Set(static_cast<double>(queue_.size()));
  admitted_tokens_gauge_->Set(static_cast<double>(admitted_tokens_));
  // The engine has room: pack and submit now, on this thread. Otherwise the chunk waits, and the
  // completion of a batch in the engine submits it (OnBatchReady).
  if (in_flight_.size() < kPipelineDepth) AnswerDropped(lock, SubmitBatches());
  return absl::OkStatus();
}

void Scheduler::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  draining_ = true;
  drained_.wait(lock, [&] { return Drained(); });
}

void Scheduler::AnswerDropped(std::unique_lock<std::mutex>& lock, std::vector<Dropped> dropped) {
  if (dropped.empty()) return;
  ++hooks_pending_;
  lock.unlock();
  for (Dropped& d : dropped) d.done(std::move(d.status));
  lock.lock();
  --hooks_pending_;
  if (Drained()) drained_.notify_all();
}

std::vector<Scheduler::Dropped> Scheduler::SubmitBatches() {
  // Drop what nobody waits for any more, before it costs compute.
  std::vector<ChunkLiveness> liveness;
  liveness.reserve(queue_.size());
  for (const Entry& e : queue_) {
    liveness.push_back({e.chunk.is_cancelled && e.chunk.is_cancelled(), e.chunk.deadline});
  }
  const std::vector<size_t> dead = DeadChunks(liveness, Clock::now());
  std::vector<Dropped> dropped;
  dropped.reserve(dead.size());
  for (size_t d = dead.size(); d-- > 0;) {  // the latest first, so the earlier indices hold
    const size_t i = dead[d];
    Entry entry = std::move(queue_[i]);
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    admitted_tokens_ -= entry.chunk.batch.num_tokens();
    dropped_->Inc();
    dropped.push_back({std::move(entry.done),
                       liveness[i].cancelled
                           ? absl::CancelledError("cancelled by the client before compute")
                           : absl::DeadlineExceededError("deadline passed before compute")});
  }
  if (!dropped.empty()) admitted_tokens_gauge_->Set(static_cast<double>(admitted_tokens_));
  while (in_flight_.size() < kPipelineDepth && !queue_.empty()) {
    std::vector<ChunkShape> shapes;
    shapes.reserve(queue_.size());
    for (const Entry& e : queue_) {
      shapes.push_back({e.chunk.batch.num_tokens(), e.chunk.batch.num_seqs(), &e.chunk.batch.output,
                        !e.chunk.batch.span_bounds.empty()});
    }
    const size_t take = FormBatch(shapes, limits_);
    InFlight batch;
    const auto now = Clock::now();
    for (size_t i = 0; i < take; ++i) {
      Entry entry = std::move(queue_.front());
      queue_.pop_front();
      queue_wait_seconds_->Observe(Micros(now - entry.enqueued) / 1e6);
      batch.entries.push_back(std::move(entry));
    }
    std::vector<const engine::RaggedBatch*> chunks;
    chunks.reserve(take);
    for (const Entry& e : batch.entries) chunks.push_back(&e.chunk.batch);
    engine::RaggedBatch packed = PackChunks(chunks);
    batch_tokens_->Observe(static_cast<double>(packed.num_tokens()));
    batch_seqs_->Observe(static_cast<double>(packed.num_seqs()));
    batch.submitted = now;
    ++hooks_pending_;
    batch.result = engine_->Submit(std::move(packed), [this] { OnBatchReady(); });
    in_flight_.push_back(std::move(batch));
  }
  queue_chunks_->Set(static_cast<double>(queue_.size()));
  return dropped;
}

void Scheduler::Deliver(InFlight& batch) {
  const absl::StatusOr<engine::EngineOutput>& out = batch.result.Wait();
  const auto now = Clock::now();
  const int64_t compute_us = Micros(now - batch.submitted);
  compute_seconds_->Observe(compute_us / 1e6);
  int64_t row = 0;
  for (Entry& entry : batch.entries) {
    const int64_t seqs = entry.chunk.batch.num_rows();
    if (!out.ok()) {
      entry.done(out.status());
      continue;
    }
    ChunkResult result;
    result.output.num_seqs = seqs;
    result.output.dimensions = out->dimensions;
    result.output.output_type = out->output_type;
    const size_t row_bytes = out->data.size() / static_cast<size_t>(out->num_seqs);
    result.output.data.assign(
        out->data.begin() + static_cast<std::ptrdiff_t>(row * row_bytes),
        out->data.begin() + static_cast<std::ptrdiff_t>((row + seqs) * row_bytes));
    result.queue_wait_us = Micros(batch.submitted - entry.enqueued);
    result.compute_us = compute_us;
    row += seqs;
    entry.done(std::move(result));
  }
}

void Scheduler::OnBatchReady() {
  std::unique_lock<std::mutex> lock(mu_);
  // The engine completes batches in the order they were submitted.
  while (!in_flight_.empty() && in_flight_.front().result.Ready()) {
    InFlight batch = std::move(in_flight_.front());
    in_flight_.pop_front();
    int64_t tokens = 0;
    for (const Entry& e : batch.entries) tokens += e.chunk.batch.num_tokens();
    lock.unlock();
    Deliver(batch);
    lock.lock();
    admitted_tokens_ -= tokens;
    admitted_tokens_gauge_->Set(static_cast<double>(admitted_tokens_));
  }
  // A CPU engine's figures never change after load (published once, at construction).
  if (engine_->stats_change()) PublishEngineStats();
  AnswerDropped(lock, SubmitBatches());
  // The last touch of this object by the engine's thread: Drain may return (and the scheduler
  // go) once this hook has released mu_.
  --hooks_pending_;
  if (Drained()) drained_.notify_all();
}

}  // namespace quiver::scheduler
