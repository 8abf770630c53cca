// `quiver serve`: the gateway's HTTP APIs over an in-process replica (scheduler + engine), on one
// machine with no gRPC hop. Runs until SIGTERM or SIGINT, then stops accepting, finishes what
// was admitted, and exits 0.
#include <cstring>
#include <filesystem>

#include "app/commands.h"
#include "app/fidelity_gate.h"
#include "app/local_replica.h"
#include "app/model_description.h"
#include "common/file.h"
#include "common/metrics.h"
#include "common/signals.h"
#include "common/strings.h"
#include "engine/engine.h"
#include "gateway/api/api.h"
#include "gateway/http_server.h"
#include "scheduler/scheduler.h"
#include "spdlog/spdlog.h"
#include "tokenizer/tokenizer.h"
#include "worker/model_info.h"
#include "worker/worker.h"

namespace quiver::app {
namespace {

// What `quiver serve` answers with: the engine, its tokenizer, the model as the API describes it,
// and the fidelity gate's reference (computed before the engine loaded; its f32 engine is gone).
struct ServedModel {
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  gateway::api::ModelDescription model;
  absl::StatusOr<FidelityReference> reference = absl::UnavailableError("no fidelity gate");
};

// Loads the engine and the tokenizer and describes the model (the folder's prompts and labels,
// the flags over them). Logs and returns the exit code on failure: 2 for a flag, 1 for the model.
int LoadServedModel(const ServeOptions& options, ServedModel& served) {
  absl::StatusOr<engine::ModelFolder> folder = engine::LoadModelFolder(options.model_dir);
  if (!folder.ok()) {
    spdlog::error("cannot load model: {}", folder.status().message());
    return 1;
  }
  absl::StatusOr<engine::ModelOptions> model_options = ResolveModelOptions(*folder);
  if (!model_options.ok()) {
    spdlog::error("cannot load model: {}", model_options.status().message());
    return 1;
  }
  engine::EngineOptions engine_options;
  engine_options.num_threads = options.threads;
  engine_options.model = *model_options;
  if (absl::Status s = engine::ApplyDeviceSettings(options.device, options.limits.max_batch_tokens,
                                                   options.limits.max_batch_seqs, engine_options);
      !s.ok()) {
    spdlog::error("{}", s.message());
    return 2;
  }
  if (NeedsFidelityGate(engine_options)) {
    served.reference = FidelityReference::Compute(options.model_dir, engine_options);
  }
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Load(*std::move(folder), engine_options);
  if (!engine.ok()) {
    spdlog::error("cannot load model: {}", engine.status().message());
    return 1;
  }
  served.engine = *std::move(engine);
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok =
      tokenizer::Tokenizer::FromFile(served.engine->folder().tokenizer_path);
  if (!tok.ok()) {
    spdlog::error("cannot load tokenizer: {}", tok.status().message());
    return 1;
  }
  served.tokenizer = *std::move(tok);
  // Described as a worker describes its engine to a gateway (the same description either way).
  const std::string name =
      options.model_name.empty() ? FolderName(options.model_dir) : options.model_name;
  gateway::api::ModelDescription& model = served.model;
  model = DescribeModel(worker::DescribeEngine(
      *served.engine, name, options.limits.max_batch_tokens, options.limits.max_queued_tokens));
  // --max-input-tokens over the folder's max_seq_length, up to the position table.
  if (options.max_input_tokens > 0) {
    if (options.max_input_tokens > served.engine->max_input_tokens()) {
      spdlog::error("--max-input-tokens {} is more than the model's position limit {}",
                    options.max_input_tokens, served.engine->max_input_tokens());
      return 1;
    }
    model.max_input_tokens = options.max_input_tokens;
  }
  model.max_concurrent_requests = options.handler_threads;
  if (absl::Status s = gateway::api::ReadPrompts(options.model_dir, model); !s.ok()) {
    spdlog::error("cannot load model: {}", s.message());
    return 1;
  }
  if (absl::Status s = gateway::api::ApplyDefaultPrompt(options.default_prompt_name,
                                                        options.default_prompt, model);
      !s.ok()) {
    spdlog::error("quiver serve: {}", s.message());
    return 2;
  }
  if (absl::Status s = gateway::api::ReadLabels(options.model_dir, model); !s.ok()) {
    spdlog::error("cannot load model: {}", s.message());
    return 1;
  }
  return 0;
}

void LogServing(const ServeOptions& options, const ServedModel& served, int port) {
  const gateway::api::ModelDescription& model = served.model;
  const engine::ModelFolder& folder = served.engine->folder();
  spdlog::info(
      "quiver serve: model={} path={} architecture={} hidden={} max_input_tokens={} pooling={} "
      "normalize={} kind={} weights={} tensors ({:.1f} MB) host={} port={} max_batch_tokens={} "
      "max_batch_seqs={} max_queued_tokens={} max_inputs={} max_body_bytes={} auto_truncate={} "
      "auth={}",
      model.name, folder.dir, model.architecture, model.hidden_size, model.max_input_tokens,
      folder.pooling.ModesName(), folder.pooling.normalize, model.can_score ? "score" : "embed",
      folder.weight_names.size(), folder.weights.weights_bytes() / 1e6, options.host, port,
      options.limits.max_batch_tokens, options.limits.max_batch_seqs,
      options.limits.max_queued_tokens, options.api.max_inputs, options.max_body_bytes,
      options.api.auto_truncate, options.api.api_key.empty() ? "off" : "bearer");
  spdlog::info("quiver serve: {}", served.engine->DeviceSummary());
}

}  // namespace

int RunServe(const ServeOptions& options) {
  CatchStopSignals("quiver serve");

  if (absl::Status status = scheduler::ValidateLimits(options.limits); !status.ok()) {
    spdlog::error("{}", status.message());
    return 2;
  }
  absl::StatusOr<gateway::api::CorsPolicy> cors =
      gateway::api::CorsPolicy::Create(options.cors_allow_origins);
  if (!cors.ok()) {
    spdlog::error("quiver serve: {}", cors.status().message());
    return 2;
  }
  MetricsRegistry metrics;
  absl::StatusOr<std::shared_ptr<telemetry::SpanExporter>> tracer =
      telemetry::SpanExporter::CreateIfAsked(options.otlp_endpoint, options.otlp_service_name,
                                             &metrics);
  if (!tracer.ok()) {
    spdlog::error("quiver serve: {}", tracer.status().message());
    return 2;
  }
  ServedModel served;
  if (int code = LoadServedModel(options, served); code != 0) return code;
  engine::Engine& engine = *served.engine;

  scheduler::Scheduler sched(&engine, options.limits, &metrics);
  auto replica = std::make_shared<LocalReplica>("local", &engine, &sched);
  auto dispatcher = std::make_shared<gateway::Dispatcher>(
      std::vector<std::shared_ptr<gateway::Replica>>{replica}, options.limits.max_batch_tokens);
  dispatcher->ExportMetrics(&metrics);
  gateway::api::Api api(served.model, std::move(served.tokenizer), dispatcher, options.api,
                        &metrics, options.access_log);
  api.set_cors(*std::move(cors));
  api.set_tracer(*tracer);
  replica->set_tracer(*tracer);
  gateway::HttpServer server(HttpOptions(options.host, options.port, options.handler_threads,
                                         options.max_body_bytes, options.timeouts, api),
                             [&api](const gateway::HttpRequest& r) { return api.Handle(r); });
  if (absl::Status s = server.Start(); !s.ok()) {
    spdlog::error("quiver serve: {}", s.message());
    return 1;
  }
  LogServing(options, served, server.port());
  // Warm up (first-use allocations, the threads' start) before saying ready.
  worker::WarmUp(engine, "quiver serve");
  // A GPU or reduced-precision engine must agree with the CPU f32 engine first; without that,
  // /ready stays 503.
  if (absl::Status gate = CheckFidelity(engine, served.reference, options.device.min_int8_cosine);
      gate.ok()) {
    api.set_ready(true);
  } else {
    spdlog::error("quiver serve: not ready: {}", gate.message());
  }
  spdlog::info(
      "quiver serve: ready on http://{}:{} (model {}, max_input_tokens={}, "
      "max_inputs={}, auto_truncate={})",
      options.host, server.port(), served.model.name, served.model.max_input_tokens,
      options.api.max_inputs, options.api.auto_truncate);

  spdlog::info("quiver serve: {} received, stopping", WaitForStopSignal());
  DrainAndStop(server, api, options.timeouts.drain_s, "quiver serve");
  sched.Drain();  // what is still admitted completes (cancelled chunks are dropped)
  spdlog::info("quiver serve: stopped");
  return 0;
}

}  // namespace quiver::app
