// `quiver worker` configuration: where it listens, which model, and the scheduler limits.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "engine/models/model.h"
#include "proto/grpc_limits.h"
#include "scheduler/limits.h"

namespace quiver::worker {

struct WorkerOptions {
  std::string model_dir;
  std::string model_name;                // "" = the folder's name
  std::string listen = "0.0.0.0:50051";  // host:port for gRPC (port 0 picks one, logged)
  std::string metrics_host = "0.0.0.0";
  int metrics_port = 9090;  // Prometheus /metrics; -1 disables
  int threads = 0;          // compute threads; 0 = all cores
  int max_message_bytes = kMaxGrpcMessageBytes;
  int drain_grace_ms = 500;  // after draining, refuse with UNAVAILABLE this long
  scheduler::SchedulerLimits limits;
  // The engine's model options from outside the engine (ResolveModelOptions: a yes/no
  // reranker's token ids, from its tokenizer), for the folder as loaded; none: the defaults.
  std::function<absl::StatusOr<engine::ModelOptions>(const engine::ModelFolder&)> resolve_model;
  engine::DeviceSettings device;  // --device, --cuda-graphs, ...
  // --otlp-endpoint: one span per chunk to this OpenTelemetry collector (telemetry/tracing.h),
  // in the trace the chunk's traceparent names. "" = none.
  std::string otlp_endpoint;
  std::string otlp_service_name = "quiver-worker";
  // Runs once the engine is loaded, before the worker reports SERVING: a failure keeps it
  // NOT_SERVING (logged), e.g. the GPU engine's fidelity gate (app/fidelity_gate.h).
  std::function<absl::Status(engine::Engine&)> readiness_gate;
  // Runs before the engine is loaded, with the options it will be loaded with: what the gate
  // needs beforehand (the fidelity gate's reference, computed with its own engine, unloaded
  // before this one loads).
  std::function<void(const engine::EngineOptions&)> before_load;
};

// INVALID_ARGUMENT naming the flag.
absl::Status ValidateWorkerOptions(const WorkerOptions& options);

}  // namespace quiver::worker
