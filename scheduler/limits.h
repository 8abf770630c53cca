// The scheduler's limits. Every one is a worker/serve flag; the comments say how to size them.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace quiver::scheduler {

struct SchedulerLimits {
  // Tokens in one forward pass. Larger batches raise throughput until compute saturates, and
  // raise the latency of everything in the batch; on CPU a few thousand, on a GPU 16k-64k.
  int64_t max_batch_tokens = 8192;
  // Sequences in one forward pass; bounds per-batch metadata and pooling output size.
  int64_t max_batch_seqs = 256;
  // Tokens admitted but not finished. Beyond it new requests are refused at once
  // (RESOURCE_EXHAUSTED / HTTP 429) instead of queueing without bound: size it to the latency
  // you accept, about throughput_tokens_per_s x acceptable queue wait.
  int64_t max_queued_tokens = 262144;
};

// INVALID_ARGUMENT naming the flag when a limit is not positive or contradicts another.
absl::Status ValidateLimits(const SchedulerLimits& limits);

}  // namespace quiver::scheduler
