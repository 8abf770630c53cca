// `quiver gateway --workers host:port,... | dns:NAME:PORT --model DIR`: the HTTP APIs in front of
// `quiver worker` processes. The model folder gives the tokenizer only (no weights, no config);
// sizes, lengths and the model's kind come from the workers' ModelInfo.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "app/commands.h"
#include "app/model_description.h"
#include "common/metrics.h"
#include "common/signals.h"
#include "common/status.h"
#include "common/strings.h"
#include "gateway/api/api.h"
#include "gateway/dispatcher.h"
#include "gateway/grpc_replica.h"
#include "gateway/http_server.h"
#include "spdlog/spdlog.h"
#include "tokenizer/tokenizer.h"

namespace quiver::app {
namespace {

// Logs "ready on URL DETAILS" once /ready first answers 200, which takes a worker that passed its
// health check: a worker answers ModelInfo (awaited at start-up) before its warm-up and fidelity
// gate, so when the gateway starts listening none may pass yet (the line said "ready" while
// /ready still answered 503). Until then a line says what it waits for. The caller stops the
// thread (request_stop, join) before draining.
std::jthread AnnounceReadyOnce(const gateway::Dispatcher& dispatcher, std::string url,
                               std::string details) {
  return std::jthread([&dispatcher, url = std::move(url),
                       details = std::move(details)](const std::stop_token& stop) {
    if (!dispatcher.any_healthy()) {
      spdlog::info(
          "quiver gateway: listening on {}; ready (GET /ready 200) once a worker passes its "
          "health check",
          url);
    }
    while (!stop.stop_requested() && !dispatcher.any_healthy()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!stop.stop_requested()) spdlog::info("quiver gateway: ready on {} {}", url, details);
  });
}

// The served model: the workers' description, the name and concurrency from the flags, the
// folder's prompts (the default one from the flags) and labels. On failure `exit_code` says
// whose: 1 a file's, 2 a flag's.
absl::StatusOr<gateway::api::ModelDescription> GatewayModel(
    const GatewayOptions& options, const quiver::v1::ModelInfoResponse& info, int& exit_code) {
  gateway::api::ModelDescription model = DescribeModel(info);
  if (!options.model_name.empty()) model.name = options.model_name;
  model.max_concurrent_requests = options.handler_threads;
  exit_code = 1;
  QUIVER_RETURN_IF_ERROR(gateway::api::ReadPrompts(options.model_dir, model));
  exit_code = 2;
  QUIVER_RETURN_IF_ERROR(
      gateway::api::ApplyDefaultPrompt(options.default_prompt_name, options.default_prompt, model));
  exit_code = 1;
  QUIVER_RETURN_IF_ERROR(gateway::api::ReadLabels(options.model_dir, model));
  exit_code = 0;
  return model;
}

}  // namespace

int RunGateway(const GatewayOptions& options) {
  CatchStopSignals("quiver gateway");

  absl::StatusOr<gateway::api::CorsPolicy> cors =
      gateway::api::CorsPolicy::Create(options.cors_allow_origins);
  if (!cors.ok()) {
    spdlog::error("quiver gateway: {}", cors.status().message());
    return 2;
  }

  const std::string tokenizer_path =
      (std::filesystem::path(options.model_dir) / "tokenizer.json").string();
  auto tok = tokenizer::Tokenizer::FromFile(tokenizer_path);
  if (!tok.ok()) {
    spdlog::error("quiver gateway: {}", tok.status().message());
    return 1;
  }
  MetricsRegistry metrics;
  absl::StatusOr<std::shared_ptr<telemetry::SpanExporter>> tracer =
      telemetry::SpanExporter::CreateIfAsked(options.otlp_endpoint, options.otlp_service_name,
                                             &metrics);
  if (!tracer.ok()) {
    spdlog::error("quiver gateway: {}", tracer.status().message());
    return 2;
  }
  gateway::GrpcReplicaSet replicas(
      options.workers, std::chrono::milliseconds(options.health_interval_ms),
      std::chrono::milliseconds(options.resolve_interval_ms), &metrics);
  absl::StatusOr<quiver::v1::ModelInfoResponse> info =
      replicas.FirstModelInfo(std::chrono::seconds(options.startup_timeout_s));
  if (!info.ok()) {
    spdlog::error("quiver gateway: {}", info.status().message());
    return 1;
  }
  int exit_code = 0;
  absl::StatusOr<gateway::api::ModelDescription> described =
      GatewayModel(options, *info, exit_code);
  if (!described.ok()) {
    spdlog::error("quiver gateway: {}", described.status().message());
    return exit_code;
  }
  const gateway::api::ModelDescription& model = *described;
  const int64_t chunk_tokens = options.max_chunk_tokens > 0
                                   ? options.max_chunk_tokens
                                   : static_cast<int64_t>(info->max_batch_tokens());
  auto dispatcher = std::make_shared<gateway::Dispatcher>(
      [&replicas] { return replicas.Snapshot(); }, chunk_tokens);
  dispatcher->ExportMetrics(&metrics);
  gateway::api::Api api(model, *std::move(tok), dispatcher, options.api, &metrics,
                        options.access_log);
  api.set_cors(*std::move(cors));
  api.set_tracer(*tracer);
  gateway::HttpServer server(HttpOptions(options.host, options.port, options.handler_threads,
                                         options.max_body_bytes, options.timeouts, api),
                             [&api](const gateway::HttpRequest& r) { return api.Handle(r); });
  if (absl::Status s = server.Start(); !s.ok()) {
    spdlog::error("quiver gateway: {}", s.message());
    return 1;
  }
  spdlog::info(
      "quiver gateway: model={} architecture={} workers={} ({} now) host={} port={} "
      "max_chunk_tokens={} max_input_tokens={} health_interval_ms={} auth={}",
      model.name, model.architecture, options.workers, replicas.All().size(), options.host,
      server.port(), chunk_tokens, model.max_input_tokens, options.health_interval_ms,
      options.api.api_key.empty() ? "off" : "bearer");
  api.set_ready(true);
  std::jthread announce =
      AnnounceReadyOnce(*dispatcher, StrCat("http://", options.host, ":", server.port()),
                        StrCat("(model ", model.name, ", max_input_tokens=", model.max_input_tokens,
                               ", max_inputs=", options.api.max_inputs,
                               ", auto_truncate=", options.api.auto_truncate, ")"));
  spdlog::info("quiver gateway: {} received, stopping", WaitForStopSignal());
  announce.request_stop();
  announce.join();
  DrainAndStop(server, api, options.timeouts.drain_s, "quiver gateway");
  spdlog::info("quiver gateway: stopped");
  return 0;
}

}  // namespace quiver::app
