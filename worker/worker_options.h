// `quiver worker` configuration: where it listens, which model, and the scheduler limits.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "scheduler/limits.h"

namespace quiver::worker {

struct WorkerOptions {
  std::string model_dir;
  std::string listen = "0.0.0.0:50051";  // host:port for gRPC
  scheduler::SchedulerLimits limits;
};

// INVALID_ARGUMENT naming the flag.
absl::Status ValidateWorkerOptions(const WorkerOptions& options);

}  // namespace quiver::worker
