#include "scheduler/batcher.h"

#include "common/strings.h"

namespace quiver::scheduler {

bool SameOutput(const engine::OutputOptions& a, const engine::OutputOptions& b) {
  return a.pooling == b.pooling && a.normalize == b.normalize && a.dimensions == b.dimensions &&
         a.output_type == b.output_type && a.raw_hidden == b.raw_hidden;
}

size_t FormBatch(std::span<const ChunkShape> queue, const SchedulerLimits& limits) {
  if (queue.empty()) return 0;
  int64_t tokens = 0, seqs = 0;
  size_t taken = 0;
  for (const ChunkShape& chunk : queue) {
    const bool fits = tokens + chunk.num_tokens <= limits.max_batch_tokens &&
                      seqs + chunk.num_seqs <= limits.max_batch_seqs;
    const bool compatible = taken == 0 || (chunk.by_spans == queue[0].by_spans &&
                                           (chunk.output == nullptr || queue[0].output == nullptr ||
                                            SameOutput(*chunk.output, *queue[0].output)));
    if (taken > 0 && (!fits || !compatible)) break;
    tokens += chunk.num_tokens;
    seqs += chunk.num_seqs;
    ++taken;
    if (!fits) break;  // an oversize first chunk runs alone
  }
  return taken;
}

absl::Status Admit(int64_t chunk_tokens, int64_t chunk_seqs, int64_t longest_seq,
                   int64_t queued_tokens, int64_t max_input_tokens, const SchedulerLimits& limits) {
  if (chunk_tokens <= 0 || chunk_seqs <= 0) {
    return absl::InvalidArgumentError("empty chunk: no tokens or no sequences");
  }
  if (longest_seq > max_input_tokens) {
    return absl::InvalidArgumentError(StrCat("a sequence has ", longest_seq,
                                             " tokens; the model accepts at most ",
                                             max_input_tokens, " (max_input_tokens)"));
  }
  if (queued_tokens + chunk_tokens > limits.max_queued_tokens) {
    return absl::ResourceExhaustedError(
        StrCat("overloaded: ", queued_tokens, " tokens queued, this chunk has ", chunk_tokens,
               ", max_queued_tokens is ", limits.max_queued_tokens, "; retry later"));
  }
  return absl::OkStatus();
}

std::vector<size_t> DeadChunks(std::span<const ChunkLiveness> queue,
                               std::chrono::steady_clock::time_point now) {
  std::vector<size_t> dead;
  for (size_t i = 0; i < queue.size(); ++i) {
    if (queue[i].cancelled || queue[i].deadline <= now) dead.push_back(i);
  }
  return dead;
}

}  // namespace quiver::scheduler
