// The in-process replica of `quiver serve`: chunks go straight to the scheduler and engine in
// this process, with no gRPC hop. Composition code: it links both the gateway's Replica
// interface and the scheduler, which the gateway itself never does.
#pragma once

#include <atomic>
#include <string>

#include "engine/engine.h"
#include "gateway/replica.h"
#include "scheduler/scheduler.h"
#include "telemetry/tracing.h"

namespace quiver::app {

class LocalReplica final : public gateway::Replica {
 public:
  LocalReplica(std::string name, engine::Engine* engine, scheduler::Scheduler* scheduler)
      : name_(std::move(name)), engine_(engine), scheduler_(scheduler) {}

  const std::string& name() const override { return name_; }
  bool healthy() const override { return true; }
  int64_t outstanding_tokens() const override { return outstanding_.load(); }
  int64_t max_queued_tokens() const override { return scheduler_->limits().max_queued_tokens; }
  void Call(gateway::CallKind kind, const quiver::v1::Chunk& chunk,
            std::chrono::system_clock::time_point deadline,
            std::shared_ptr<gateway::CancelSignal> cancel,
            std::function<void(absl::StatusOr<gateway::ReplicaResult>)> done) override;
  // One INTERNAL span per chunk, a child of the request's span (the chunk's traceparent): its
  // queue wait and compute. Set before serving; null: none.
  void set_tracer(std::shared_ptr<telemetry::SpanExporter> tracer) { tracer_ = std::move(tracer); }

 private:
  std::string name_;
  engine::Engine* engine_;
  scheduler::Scheduler* scheduler_;
  std::atomic<int64_t> outstanding_{0};
  std::shared_ptr<telemetry::SpanExporter> tracer_;
};

}  // namespace quiver::app
