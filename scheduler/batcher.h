// The scheduler's decisions as pure functions of a queue snapshot and the limits: no threads, no
// clocks, no sockets, so each rule is unit-tested directly (tests/scheduler/batcher_test.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/batch.h"
#include "scheduler/limits.h"

namespace quiver::scheduler {

// What the batcher needs to know of a queued chunk.
struct ChunkShape {
  int64_t num_tokens = 0;
  int64_t num_seqs = 0;
  const engine::OutputOptions* output = nullptr;  // chunks batch together only with equal options
  bool by_spans = false;                          // ... and the same row kind (late chunking)
};

bool SameOutput(const engine::OutputOptions& a, const engine::OutputOptions& b);

// How many chunks from the front of `queue` form the next batch, first come first served: add
// chunks in order and stop at the first one that would exceed max_batch_tokens or
// max_batch_seqs, or whose output options differ from the first's. A first chunk larger than the
// limits still runs, alone (admission already checked it against the model's limit). 0 only for
// an empty queue.
size_t FormBatch(std::span<const ChunkShape> queue, const SchedulerLimits& limits);

// Admission of a new chunk, given the tokens already admitted and not finished:
// INVALID_ARGUMENT when a sequence is longer than `max_input_tokens` (naming the limit) or the
// chunk is empty; RESOURCE_EXHAUSTED when admitting it would pass max_queued_tokens.
absl::Status Admit(int64_t chunk_tokens, int64_t chunk_seqs, int64_t longest_seq,
                   int64_t queued_tokens, int64_t max_input_tokens, const SchedulerLimits& limits);

// Indices (ascending) of chunks to drop before compute: cancelled, or past their deadline at
// `now`.
struct ChunkLiveness {
  bool cancelled = false;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};
std::vector<size_t> DeadChunks(std::span<const ChunkLiveness> queue,
                               std::chrono::steady_clock::time_point now);

// The chunks of one batch (FormBatch's, equal output options: the first's are kept) as one ragged
// batch, in order: their sequences, token type ids and prompt lengths (zeros for a chunk without
// them, where another has them; none where no chunk has them) and span bounds (shifted by the
// tokens before the chunk).
engine::RaggedBatch PackChunks(std::span<const engine::RaggedBatch* const> chunks);

}  // namespace quiver::scheduler
