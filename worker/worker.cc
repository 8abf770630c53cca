#include "worker/worker.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/file.h"
#include "common/metrics.h"
#include "common/signals.h"
#include "common/status.h"
#include "common/strings.h"
#include "engine/engine.h"
#include "proto/grpc_limits.h"
#include "scheduler/scheduler.h"
#include "spdlog/spdlog.h"
#include "telemetry/tracing.h"
#include "worker/inference_service.h"
#include "worker/metrics_http.h"

namespace quiver::worker {
namespace {

// The gRPC server on options.listen with the inference and health services; null when it cannot
// listen. `bound_port` is the port it got (for a listen address with port 0).
std::unique_ptr<grpc::Server> StartGrpcServer(const WorkerOptions& options,
                                              InferenceService& service, int& bound_port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // The gateways' keepalive pings (proto/grpc_limits.h), never taken for abuse.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             kMinPingIntervalMs);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (bound_port == 0) return nullptr;
  return server;
}

// Health NOT_SERVING, every admitted chunk finished (new ones refused with UNAVAILABLE), a grace
// period of clean refusals, then the server shut down.
void Drain(const WorkerOptions& options, grpc::Server& server, scheduler::Scheduler& scheduler) {
  server.GetHealthCheckService()->SetServingStatus(false);
  scheduler.Drain();
  // Keep answering UNAVAILABLE for a moment, so that clients and balancers that have not yet seen
  // NOT_SERVING get a clean refusal to retry elsewhere rather than a cut connection.
  std::this_thread::sleep_for(std::chrono::milliseconds(options.drain_grace_ms));
  server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server.Wait();
}

}  // namespace

void WarmUp(engine::Engine& engine, std::string_view who) {
  engine::RaggedBatch warm;
  const std::vector<int32_t> ids(8, 0);
  warm.Add(ids);
  const auto start = std::chrono::steady_clock::now();
  if (absl::StatusOr<engine::EngineOutput> out = engine.Run(std::move(warm)); !out.ok()) {
    spdlog::warn("{}: warm-up batch failed: {}", who, out.status().message());
    return;
  }
  spdlog::info(
      "{}: warm-up batch in {:.1f} ms", who,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

namespace {

// The engine's options: the threads, the model's own (options.resolve_model: the config file and
// the flags) and the device's. On failure `exit_code` says whose: 1 the model's, 2 a flag's.
absl::StatusOr<engine::EngineOptions> EngineOptionsFor(const WorkerOptions& options,
                                                       const engine::ModelFolder& folder,
                                                       int& exit_code) {
  engine::EngineOptions engine_options;
  engine_options.num_threads = options.threads;
  if (options.resolve_model) {
    exit_code = 1;
    QUIVER_ASSIGN_OR_RETURN(engine_options.model, options.resolve_model(folder));
  }
  exit_code = 2;
  QUIVER_RETURN_IF_ERROR(
      engine::ApplyDeviceSettings(options.device, options.limits.max_batch_tokens,
                                  options.limits.max_batch_seqs, engine_options));
  exit_code = 0;
  return engine_options;
}

}  // namespace

int RunWorker(const WorkerOptions& options) {
  CatchStopSignals("quiver worker");

  if (absl::Status s = ValidateWorkerOptions(options); !s.ok()) {
    spdlog::error("quiver worker: {}", s.message());
    return 2;
  }
  absl::StatusOr<engine::ModelFolder> folder = engine::LoadModelFolder(options.model_dir);
  if (!folder.ok()) {
    spdlog::error("quiver worker: cannot load model: {}", folder.status().message());
    return 1;
  }
  int exit_code = 0;
  absl::StatusOr<engine::EngineOptions> made = EngineOptionsFor(options, *folder, exit_code);
  if (!made.ok()) {
    spdlog::error("quiver worker: {}", made.status().message());
    return exit_code;
  }
  engine::EngineOptions& engine_options = *made;
  MetricsRegistry metrics;
  absl::StatusOr<std::shared_ptr<telemetry::SpanExporter>> tracer =
      telemetry::SpanExporter::CreateIfAsked(options.otlp_endpoint, options.otlp_service_name,
                                             &metrics);
  if (!tracer.ok()) {
    spdlog::error("quiver worker: {}", tracer.status().message());
    return 2;
  }
  if (options.before_load) options.before_load(engine_options);
  auto engine = engine::Engine::Load(*std::move(folder), engine_options);
  if (!engine.ok()) {
    spdlog::error("quiver worker: cannot load model: {}", engine.status().message());
    return 1;
  }
  const std::string model_name =
      options.model_name.empty() ? FolderName(options.model_dir) : options.model_name;
  scheduler::Scheduler scheduler(engine->get(), options.limits, &metrics);
  InferenceService service(engine->get(), &scheduler, model_name, options.limits.max_batch_tokens,
                           &metrics);
  service.set_tracer(*tracer);

  int bound_port = 0;
  std::unique_ptr<grpc::Server> server = StartGrpcServer(options, service, bound_port);
  if (server == nullptr) {
    spdlog::error("quiver worker: cannot listen on {}", options.listen);
    return 1;
  }
  // The default health service starts SERVING; gateways must not send chunks before the warm-up
  // and the fidelity gate below (nor ever, when the gate fails).
  server->GetHealthCheckService()->SetServingStatus(false);
  MetricsHttpServer metrics_http(&metrics);
  std::atomic<bool> ready{false};  // the gate passed and no stop signal yet: GET /ready is 200
  metrics_http.SetReadiness([&ready] { return ready.load(); });
  if (options.metrics_port >= 0) {
    if (absl::Status s = metrics_http.Start(options.metrics_host, options.metrics_port); !s.ok()) {
      spdlog::error("quiver worker: {}", s.message());
      return 1;
    }
  }
  spdlog::info(
      "quiver worker: model={} ({}, {}) listen={} port={} metrics_port={} max_batch_tokens={} "
      "max_batch_seqs={} max_queued_tokens={} threads={}",
      model_name, (*engine)->folder().architecture, (*engine)->is_scorer() ? "score" : "embed",
      options.listen, bound_port, metrics_http.port(), options.limits.max_batch_tokens,
      options.limits.max_batch_seqs, options.limits.max_queued_tokens, options.threads);
  spdlog::info("quiver worker: {}", (*engine)->DeviceSummary());
  WarmUp(**engine, "quiver worker");
  absl::Status gate = options.readiness_gate ? options.readiness_gate(**engine) : absl::OkStatus();
  if (gate.ok()) {
    server->GetHealthCheckService()->SetServingStatus(true);
    ready = true;
  } else {
    spdlog::error("quiver worker: not ready: {}", gate.message());
  }

  const char* signal_name = WaitForStopSignal();
  spdlog::info("quiver worker: {} received; draining ({} tokens admitted)", signal_name,
               scheduler.admitted_tokens());
  ready = false;
  Drain(options, *server, scheduler);
  metrics_http.Stop();
  spdlog::info("quiver worker: stopped");
  return 0;
}

}  // namespace quiver::worker
