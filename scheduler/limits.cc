#include "scheduler/limits.h"

#include "common/strings.h"

namespace quiver::scheduler {

absl::Status ValidateLimits(const SchedulerLimits& limits) {
  auto positive = [](const char* flag, int64_t value) -> absl::Status {
    if (value > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(StrCat(flag, " must be positive, got ", value));
  };
  if (absl::Status s = positive("--max-batch-tokens", limits.max_batch_tokens); !s.ok()) return s;
  if (absl::Status s = positive("--max-batch-seqs", limits.max_batch_seqs); !s.ok()) return s;
  if (absl::Status s = positive("--max-queued-tokens", limits.max_queued_tokens); !s.ok()) {
    return s;
  }
  if (limits.max_queued_tokens < limits.max_batch_tokens) {
    return absl::InvalidArgumentError(StrCat(
        "--max-queued-tokens (", limits.max_queued_tokens, ") must be at least ",
        "--max-batch-tokens (", limits.max_batch_tokens, "), or no full batch could be admitted"));
  }
  return absl::OkStatus();
}

}  // namespace quiver::scheduler
