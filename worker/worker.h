// `quiver worker`: the gRPC inference server. Loads the model, starts the scheduler, serves
// quiver.v1.Inference and grpc.health.v1.Health, exposes Prometheus metrics, and on SIGTERM or
// SIGINT drains: stops admitting (new RPCs get UNAVAILABLE, health turns NOT_SERVING), finishes
// every admitted chunk, then exits 0.
#pragma once

#include <string_view>

#include "engine/engine.h"
#include "worker/worker_options.h"

namespace quiver::worker {

// One short sequence through `engine`, before a server says it is ready, so that the first real
// batch does not pay for first-touch allocations and the threads' start; the time (or the
// failure) logged under `who`. A GPU's fidelity gate runs its own batches after it.
void WarmUp(engine::Engine& engine, std::string_view who);

// Blocks until a stop signal and the drain are done. Returns the process exit code.
int RunWorker(const WorkerOptions& options);

}  // namespace quiver::worker
