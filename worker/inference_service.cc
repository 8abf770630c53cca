#include "worker/inference_service.h"

#include <chrono>

#include "common/strings.h"
#include "worker/grpc_status.h"

namespace quiver::worker {
namespace {

engine::Pooling ToPooling(quiver::v1::Pooling p) {
  switch (p) {
    case quiver::v1::POOLING_CLS: return engine::Pooling::kCls;
    case quiver::v1::POOLING_MEAN: return engine::Pooling::kMean;
    case quiver::v1::POOLING_LAST_TOKEN: return engine::Pooling::kLastToken;
    default: return engine::Pooling::kModelDefault;
  }
}

quiver::v1::Pooling FromPoolingMode(engine::PoolingMode mode) {
  switch (mode) {
    case engine::PoolingMode::kCls: return quiver::v1::POOLING_CLS;
    case engine::PoolingMode::kMean: return quiver::v1::POOLING_MEAN;
    case engine::PoolingMode::kLastToken: return quiver::v1::POOLING_LAST_TOKEN;
  }
  return quiver::v1::POOLING_MODEL_DEFAULT;
}

}  // namespace

InferenceService::InferenceService(engine::Engine* engine, scheduler::Scheduler* scheduler,
                                   std::string model_name, int64_t max_batch_tokens,
                                   MetricsRegistry* metrics)
    : engine_(engine), scheduler_(scheduler), model_name_(std::move(model_name)),
      max_batch_tokens_(max_batch_tokens) {
  requests_ok_ = &metrics->GetCounter("quiver_worker_requests_total", "RPCs by outcome",
                                      "outcome=\"ok\"");
  requests_error_ = &metrics->GetCounter("quiver_worker_requests_total", "RPCs by outcome",
                                         "outcome=\"error\"");
}

absl::StatusOr<scheduler::Chunk> InferenceService::MakeChunk(grpc::CallbackServerContext* context,
                                                             const std::string& model,
                                                             const quiver::v1::Chunk& in) const {
  if (!model.empty() && model != model_name_) {
    return absl::NotFoundError(StrCat("model '", model, "' is not served here (this worker serves '",
                                      model_name_, "')"));
  }
  scheduler::Chunk chunk;
  engine::RaggedBatch& b = chunk.batch;
  if (in.cu_seqlens_size() < 2) {
    return absl::InvalidArgumentError("chunk.cu_seqlens must hold num_seqs + 1 >= 2 entries");
  }
  for (int i = 1; i < in.cu_seqlens_size(); ++i) {
    if (in.cu_seqlens(i) < in.cu_seqlens(i - 1)) {
      return absl::InvalidArgumentError(StrCat("chunk.cu_seqlens decreases at index ", i));
    }
  }
  b.token_ids.reserve(static_cast<size_t>(in.token_ids_size()));
  for (uint32_t id : in.token_ids()) {
    if (id > static_cast<uint32_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(StrCat("chunk.token_ids: id ", id, " is out of range"));
    }
    b.token_ids.push_back(static_cast<int32_t>(id));
  }
  for (uint32_t c : in.cu_seqlens()) b.cu_seqlens.push_back(static_cast<int32_t>(c));
  for (uint32_t t : in.token_type_ids()) b.token_type_ids.push_back(static_cast<int32_t>(t));
  for (uint32_t s : in.span_bounds()) b.span_bounds.push_back(static_cast<int32_t>(s));
  b.output.pooling = ToPooling(in.output().pooling());
  if (in.output().normalize()) b.output.normalize = true;
  b.output.dimensions = in.output().dimensions();
  switch (in.output().output_type()) {
    case quiver::v1::OUTPUT_F16: b.output.output_type = engine::OutputType::kF16; break;
    case quiver::v1::OUTPUT_INT8: b.output.output_type = engine::OutputType::kInt8; break;
    case quiver::v1::OUTPUT_BINARY: b.output.output_type = engine::OutputType::kBinary; break;
    default: b.output.output_type = engine::OutputType::kF32; break;
  }
  if (absl::Status valid = engine_->Validate(b); !valid.ok()) {
    return absl::InvalidArgumentError(StrCat("chunk: ", valid.message()));
  }
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    chunk.deadline = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         context->deadline() - std::chrono::system_clock::now());
  }
  chunk.is_cancelled = [context] { return context->IsCancelled(); };
  return chunk;
}

grpc::ServerUnaryReactor* InferenceService::Serve(
    grpc::CallbackServerContext* context, bool score, const std::string& model,
    const quiver::v1::Chunk& in, std::function<void(scheduler::ChunkResult&)> fill) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto fail = [&](const absl::Status& s) {
    requests_error_->Inc();
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
      [this, reactor, fill = std::move(fill)](absl::StatusOr<scheduler::ChunkResult> r) {
        if (!r.ok()) {
          requests_error_->Inc();
          reactor->Finish(ToGrpcStatus(r.status()));
          return;
        }
        fill(*r);
        requests_ok_->Inc();
        reactor->Finish(grpc::Status::OK);
      });
  if (!admitted.ok()) return fail(admitted);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Embed(grpc::CallbackServerContext* context,
                                                  const quiver::v1::EmbedRequest* request,
                                                  quiver::v1::EmbedResponse* response) {
  return Serve(context, /*score=*/false, request->model(), request->chunk(),
               [response](scheduler::ChunkResult& r) {
                 response->set_num_seqs(static_cast<uint32_t>(r.output.num_seqs));
                 response->set_dimensions(static_cast<uint32_t>(r.output.dimensions));
                 response->set_output_type(
                     static_cast<quiver::v1::OutputType>(r.output.output_type));
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
  const engine::ModelFolder& folder = engine_->folder();
  response->set_name(model_name_);
  response->set_architecture(folder.architecture);
  response->set_max_input_tokens(static_cast<uint32_t>(engine_->max_input_tokens()));
  response->set_hidden_size(static_cast<uint32_t>(engine_->hidden_size()));
  response->set_pooling(FromPoolingMode(folder.pooling.mode));
  response->set_normalize(folder.pooling.normalize);
  response->set_can_embed(!engine_->is_scorer());
  response->set_can_score(engine_->is_scorer());
  response->set_max_batch_tokens(static_cast<uint32_t>(max_batch_tokens_));
  response->set_max_seq_length(static_cast<uint32_t>(
      folder.pooling.max_seq_length.value_or(engine_->max_input_tokens())));
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace quiver::worker
