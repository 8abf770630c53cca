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

engine::RaggedBatch PackChunks(std::span<const engine::RaggedBatch* const> chunks) {
  engine::RaggedBatch packed;
  packed.cu_seqlens.push_back(0);
  if (chunks.empty()) return packed;
  packed.output = chunks.front()->output;
  bool any_types = false, any_prompts = false;
  for (const engine::RaggedBatch* b : chunks) {
    any_types |= !b->token_type_ids.empty();
    any_prompts |= !b->prompt_lengths.empty();
  }
  for (const engine::RaggedBatch* b : chunks) {
    const int32_t base = packed.cu_seqlens.back();
    for (int32_t bound : b->span_bounds) packed.span_bounds.push_back(base + bound);
    packed.token_ids.insert(packed.token_ids.end(), b->token_ids.begin(), b->token_ids.end());
    if (any_types) {
      if (b->token_type_ids.empty()) {
        packed.token_type_ids.resize(packed.token_ids.size(), 0);
      } else {
        packed.token_type_ids.insert(packed.token_type_ids.end(), b->token_type_ids.begin(),
                                     b->token_type_ids.end());
      }
    }
    if (any_prompts) {  // a chunk without prompts contributes zeros
      if (b->prompt_lengths.empty()) {
        packed.prompt_lengths.resize(packed.prompt_lengths.size() + b->cu_seqlens.size() - 1, 0);
      } else {
        packed.prompt_lengths.insert(packed.prompt_lengths.end(), b->prompt_lengths.begin(),
                                     b->prompt_lengths.end());
      }
    }
    for (size_t s = 1; s < b->cu_seqlens.size(); ++s) {
      packed.cu_seqlens.push_back(base + b->cu_seqlens[s]);
    }
  }
  return packed;
}

}  // namespace quiver::scheduler
