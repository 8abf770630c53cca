#include "worker/worker_options.h"

#include "common/strings.h"

namespace quiver::worker {

absl::Status ValidateWorkerOptions(const WorkerOptions& options) {
  if (options.model_dir.empty()) return absl::InvalidArgumentError("--model is required");
  if (options.listen.rfind(':') == std::string::npos) {
    return absl::InvalidArgumentError(StrCat("--listen '", options.listen, "' must be host:port"));
  }
  return scheduler::ValidateLimits(options.limits);
}

}  // namespace quiver::worker
