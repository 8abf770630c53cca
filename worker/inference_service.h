// The quiver.v1.Inference gRPC service on the callback API: each RPC is converted to a chunk,
// validated on its own (so one bad chunk never fails a batch it would have joined), admitted or
// refused at once by the scheduler, and finished from the scheduler's completion.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "engine/engine.h"
#include "quiver/v1/inference.grpc.pb.h"
#include "scheduler/scheduler.h"
#include "telemetry/tracing.h"

namespace quiver::worker {

class InferenceService final : public quiver::v1::Inference::CallbackService {
 public:
  InferenceService(engine::Engine* engine, scheduler::Scheduler* scheduler, std::string model_name,
                   int64_t max_batch_tokens, MetricsRegistry* metrics);

  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context,
                                  const quiver::v1::EmbedRequest* request,
                                  quiver::v1::EmbedResponse* response) override;
  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* context,
                                  const quiver::v1::ScoreRequest* request,
                                  quiver::v1::ScoreResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfo(grpc::CallbackServerContext* context,
                                      const quiver::v1::ModelInfoRequest* request,
                                      quiver::v1::ModelInfoResponse* response) override;
  // One span per Embed or Score call (set before the server starts; null: none).
  void set_tracer(std::shared_ptr<telemetry::SpanExporter> tracer) { tracer_ = std::move(tracer); }

 private:
  // The path Embed and Score share: check the call fits the model, convert and validate the
  // chunk, admit it, and on completion let `fill` write the response before finishing.
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, bool score,
                                  const std::string& model, const quiver::v1::Chunk& chunk,
                                  std::function<void(scheduler::ChunkResult&)> fill);
  // Converts and checks a request's chunk; INVALID_ARGUMENT naming the field otherwise.
  absl::StatusOr<scheduler::Chunk> MakeChunk(grpc::CallbackServerContext* context,
                                             const std::string& model,
                                             const quiver::v1::Chunk& chunk) const;

  // Queues the span of one call that started at `start` (the chunk's traceparent its parent).
  struct CallTrace {
    bool score = false;
    std::string traceparent;
    int64_t tokens = 0, sequences = 0;
    std::chrono::system_clock::time_point start;
  };
  void Trace(const CallTrace& call, const absl::Status& outcome,
             const scheduler::ChunkResult* result) const;

  engine::Engine* engine_;
  scheduler::Scheduler* scheduler_;
  std::shared_ptr<telemetry::SpanExporter> tracer_;
  std::string model_name_;
  int64_t max_batch_tokens_;
  Counter* requests_ok_;
  Counter* requests_error_;
};

}  // namespace quiver::worker
