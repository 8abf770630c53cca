// `quiver worker`: the gRPC inference server. Loads the model, starts the scheduler, serves
// quiver.v1.Inference and grpc.health.v1.Health, exposes Prometheus metrics, and on SIGTERM or
// SIGINT drains: stops admitting (new RPCs get UNAVAILABLE, health turns NOT_SERVING), finishes
// every admitted chunk, then exits 0.
#pragma once

#include "worker/worker_options.h"

namespace quiver::worker {

// Blocks until a stop signal and the drain are done. Returns the process exit code.
int RunWorker(const WorkerOptions& options);

}  // namespace quiver::worker
