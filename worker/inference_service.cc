#include "worker/inference_service.h"

#include <algorithm>
#include <chrono>

#include "common/strings.h"
#include "proto/grpc_status.h"
#include "worker/chunk_codec.h"
#include "worker/model_info.h"

namespace quiver::worker {

InferenceService::InferenceService(engine::Engine* engine, scheduler::Scheduler* scheduler,
                                   std::string model_name, int64_t max_batch_tokens,
                                   MetricsRegistry* metrics)
    : engine_(engine),
      scheduler_(scheduler),
      model_name_(std::move(model_name)),
      max_batch_tokens_(max_batch_tokens) {
  requests_ok_ =
      &metrics->GetCounter("quiver_worker_requests_total", "RPCs by outcome", "outcome=\"ok\"");
  requests_error_ =
      &metrics->GetCounter("quiver_worker_requests_total", "RPCs by outcome", "outcome=\"error\"");
}

absl::StatusOr<scheduler::Chunk> InferenceService::MakeChunk(grpc::CallbackServerContext* context,
                                                             const std::string& model,
                                                             const quiver::v1::Chunk& in) const {
  if (!model.empty() && model != model_name_) {
    return absl::NotFoundError(
        StrCat("model '", model, "' is not served here (this worker serves '", model_name_, "')"));
  }
  scheduler::Chunk chunk;
  engine::RaggedBatch& b = chunk.batch;
  if (absl::Status decoded = DecodeChunk(in, b); !decoded.ok()) return decoded;
  if (absl::Status valid = engine_->Validate(b); !valid.ok()) {
    return absl::InvalidArgumentError(StrCat("chunk: ", valid.message()));
  }
  chunk.deadline = scheduler::SteadyDeadline(context->deadline());
  chunk.is_cancelled = [context] { return context->IsCancelled(); };
  return chunk;
}

grpc::ServerUnaryReactor* InferenceService::Serve(
    grpc::CallbackServerContext* context, bool score, const std::string& model,
    const quiver::v1::Chunk& in, std::function<void(scheduler::ChunkResult&)> fill) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  CallTrace trace;
  // Traced where the chunk carries its request's trace (a gateway's traceparent); chunks without
  // one (quiver embed --workers, an untraced client through an untracing gateway) are not.
  const bool traced = tracer_ != nullptr && !in.traceparent().empty();
  if (traced) {
    trace.score = score;
    trace.traceparent = in.traceparent();
    trace.tokens = in.token_ids_size();
    trace.sequences = std::max(0, in.cu_seqlens_size() - 1);
    trace.start = std::chrono::system_clock::now();
  }
  auto fail = [&](const absl::Status& s) {
    requests_error_->Inc();
    if (traced) Trace(trace, s, nullptr);
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  };
  if (score != engine_->is_scorer()) {
    return fail(absl::InvalidArgumentError(
        score ? StrCat("model '", model_name_, "' is an embedding model; call Embed, not Score")
              : StrCat("model '", model_name_, "' is a scoring model; call Score, not Embed")));
  }
  absl::StatusOr<scheduler::Chunk> chunk = MakeChunk(context, model, in);
  if (!chunk.ok()) return fail(chunk.status());
  absl::Status admitted = scheduler_->Enqueue(
      *std::move(chunk),
      // A copy of the trace: a refused chunk's span below still needs the original.
      [this, reactor, fill = std::move(fill), trace,
       traced](absl::StatusOr<scheduler::ChunkResult> r) {
        if (!r.ok()) {
          requests_error_->Inc();
          if (traced) Trace(trace, r.status(), nullptr);
          reactor->Finish(ToGrpcStatus(r.status()));
          return;
        }
        if (traced) Trace(trace, absl::OkStatus(), &*r);
        fill(*r);
        requests_ok_->Inc();
        reactor->Finish(grpc::Status::OK);
      });
  if (!admitted.ok()) return fail(admitted);
  return reactor;
}

void InferenceService::Trace(const CallTrace& call, const absl::Status& outcome,
                             const scheduler::ChunkResult* result) const {
  std::optional<telemetry::Span> child = telemetry::ChildSpan(
      call.traceparent, call.score ? "quiver.v1.Inference/Score" : "quiver.v1.Inference/Embed");
  if (!child) return;  // the request's trace is not recorded
  telemetry::Span& span = *child;
  span.start_unix_ns = telemetry::UnixNanos(call.start);
  span.end_unix_ns = telemetry::UnixNanos();
  // ERROR for the codes OpenTelemetry's gRPC conventions count as a server's own failure.
  span.error = absl::IsUnknown(outcome) || absl::IsDeadlineExceeded(outcome) ||
               absl::IsUnimplemented(outcome) || absl::IsInternal(outcome) ||
               absl::IsUnavailable(outcome) || absl::IsDataLoss(outcome);
  span.attributes = {{"rpc.system", std::string("grpc")},
                     {"rpc.service", std::string("quiver.v1.Inference")},
                     {"rpc.method", std::string(call.score ? "Score" : "Embed")},
                     {"rpc.grpc.status_code", int64_t{ToGrpcStatus(outcome).error_code()}},
                     {"quiver.model", model_name_},
                     {"quiver.chunk.tokens", call.tokens},
                     {"quiver.chunk.sequences", call.sequences}};
  if (result != nullptr) {
    span.attributes.emplace_back("quiver.queue_wait_us", result->queue_wait_us);
    span.attributes.emplace_back("quiver.compute_us", result->compute_us);
  }
  tracer_->Record(std::move(*child));
}

grpc::ServerUnaryReactor* InferenceService::Embed(grpc::CallbackServerContext* context,
                                                  const quiver::v1::EmbedRequest* request,
                                                  quiver::v1::EmbedResponse* response) {
  return Serve(context, /*score=*/false, request->model(), request->chunk(),
               [response](scheduler::ChunkResult& r) {
                 response->set_num_seqs(static_cast<uint32_t>(r.output.num_seqs));
                 response->set_dimensions(static_cast<uint32_t>(r.output.dimensions));
                 response->set_output_type(EncodeOutputType(r.output.output_type));
                 response->set_data(r.output.data.data(), r.output.data.size());
                 response->set_queue_wait_us(static_cast<uint64_t>(r.queue_wait_us));
                 response->set_compute_us(static_cast<uint64_t>(r.compute_us));
               });
}

grpc::ServerUnaryReactor* InferenceService::Score(grpc::CallbackServerContext* context,
                                                  const quiver::v1::ScoreRequest* request,
                                                  quiver::v1::ScoreResponse* response) {
  return Serve(context, /*score=*/true, request->model(), request->chunk(),
               [response](scheduler::ChunkResult& r) {
                 response->set_num_seqs(static_cast<uint32_t>(r.output.num_seqs));
                 response->set_scores(r.output.data.data(), r.output.data.size());
                 response->set_queue_wait_us(static_cast<uint64_t>(r.queue_wait_us));
                 response->set_compute_us(static_cast<uint64_t>(r.compute_us));
               });
}

grpc::ServerUnaryReactor* InferenceService::ModelInfo(grpc::CallbackServerContext* context,
                                                      const quiver::v1::ModelInfoRequest*,
                                                      quiver::v1::ModelInfoResponse* response) {
  *response = DescribeEngine(*engine_, model_name_, max_batch_tokens_,
                             scheduler_->limits().max_queued_tokens);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace quiver::worker
