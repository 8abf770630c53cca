// The per-batch inputs a device forward pass reads, packed into one block of int32 so that a
// batch costs one host-to-device copy: token ids, type ids, positions, cu_seqlens and the bounds
// of the rows to pool, each at a fixed offset for the engine's largest batch. The offsets depend
// only on (max_tokens, max_seqs, max_rows), never on the batch, so a CUDA graph captured for one
// batch reads the next batch's inputs from the same addresses. Device-independent: the GPU
// runtime stages the block in a slot's pinned buffer (base/slot_ring.h); unit-tested on CPU.
#pragma once

#include <cstdint>

#include "engine/runtime/plan.h"

namespace quiver::engine {

// Offsets and lengths in int32 elements; every array starts on a 16-byte boundary (vector loads).
struct DeviceInputLayout {
  int64_t max_tokens = 0, max_seqs = 0, max_rows = 0;
  int64_t ids = 0;         // [max_tokens]
  int64_t type_ids = 0;    // [max_tokens] (zeros where the batch has none)
  int64_t positions = 0;   // [max_tokens]
  int64_t cu_seqlens = 0;  // [max_seqs + 1]
  int64_t row_bounds = 0;  // [max_rows, 3] (begin, end, origin)
  int64_t seq_bounds = 0;  // [max_seqs, 2]: the real sequences' (begin, end), for scoring
  int64_t tiles = 0;       // [max_tiles, 2]: attention's query tiles (base/attention_plan.h)
  int64_t max_tiles = 0;   // MaxAttentionTiles(max_tokens, max_seqs)
  int64_t total = 0;       // elements in the block
};

DeviceInputLayout DeviceInputLayoutFor(int64_t max_tokens, int64_t max_seqs, int64_t max_rows);

// What a packed batch holds (host copies of the sizes the launches need).
struct PackedInputs {
  int64_t num_tokens = 0;
  int64_t num_seqs = 0;  // including bucket padding's sequences
  int64_t num_rows = 0;  // rows to pool (the real sequences, or the spans)
  int64_t max_seqlen = 0;
  int64_t num_tiles = 0;  // the tile list's bound for this batch: MaxAttentionTiles(tokens, seqs)
  // The parts of the block this batch wrote, [offset, offset + count) in int32 elements, in
  // order (neighbours less than a few KB apart merged): all a kernel reads for this batch, so
  // all that a copy to the device needs to move. A small batch moves a few KB, whatever the
  // layout's maxima.
  struct Range {
    int64_t offset = 0, count = 0;
  };
  int num_ranges = 0;
  Range ranges[8];
};

// Writes `plan`'s arrays into block (host memory): ids, type ids (zeros where the batch has
// none), positions for its num_tokens; cu_seqlens for its num_seqs (bucket padding included:
// kernels are launched for those); the row and sequence bounds; the tile list up to num_tiles,
// its unused entries (-1, -1). Nothing past those is written (nor read by a kernel). The tiles
// are ordered by the keys they read, most first (causal: a sequence's last tile), so the longest
// blocks start first. INVALID_ARGUMENT-style
// std::invalid_argument when the batch exceeds the layout (a bug: batches are validated and
// bucketed before they are packed).
PackedInputs PackDeviceInputs(const BatchPlan& plan, const DeviceInputLayout& layout,
                              int32_t* block);

}  // namespace quiver::engine
