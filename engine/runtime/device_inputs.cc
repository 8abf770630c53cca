#include "engine/runtime/device_inputs.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/strings.h"

namespace quiver::engine {
namespace {

constexpr int64_t kAlign = 4;  // int32 elements in 16 bytes

int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

DeviceInputLayout DeviceInputLayoutFor(int64_t max_tokens, int64_t max_seqs, int64_t max_rows) {
  if (max_tokens <= 0 || max_seqs <= 0 || max_rows <= 0) {
    throw std::invalid_argument(StrCat("DeviceInputLayoutFor: sizes must be positive, got tokens ",
                                       max_tokens, ", seqs ", max_seqs, ", rows ", max_rows));
  }
  DeviceInputLayout l;
  l.max_tokens = max_tokens;
  l.max_seqs = max_seqs;
  l.max_rows = max_rows;
  int64_t at = 0;
  auto place = [&](int64_t n) {
    const int64_t offset = at;
    at = AlignUp(at + n);
    return offset;
  };
  l.ids = place(max_tokens);
  l.type_ids = place(max_tokens);
  l.positions = place(max_tokens);
  l.cu_seqlens = place(max_seqs + 1);
  l.row_bounds = place(3 * max_rows);
  l.seq_bounds = place(2 * max_seqs);
  l.max_tiles = MaxAttentionTiles(max_tokens, max_seqs);
  l.tiles = place(2 * l.max_tiles);
  l.total = at;
  return l;
}

PackedInputs PackDeviceInputs(const BatchPlan& plan, const DeviceInputLayout& l, int32_t* block) {
  const RaggedBatch& b = *plan.batch;
  PackedInputs p;
  p.num_tokens = b.num_tokens();
  p.num_seqs = b.num_seqs();
  p.num_rows = static_cast<int64_t>(plan.row_bounds.size() / 3);
  p.max_seqlen = plan.attention.max_seqlen;
  if (p.num_tokens > l.max_tokens || p.num_seqs > l.max_seqs || p.num_rows > l.max_rows) {
    throw std::invalid_argument(StrCat("PackDeviceInputs: batch of ", p.num_tokens, " tokens, ",
                                       p.num_seqs, " sequences, ", p.num_rows,
                                       " rows exceeds the layout's ", l.max_tokens, ", ",
                                       l.max_seqs, ", ", l.max_rows));
  }
  std::copy(b.token_ids.begin(), b.token_ids.end(), block + l.ids);
  if (b.token_type_ids.empty()) {
    std::fill(block + l.type_ids, block + l.type_ids + p.num_tokens, 0);
  } else {
    std::copy(b.token_type_ids.begin(), b.token_type_ids.end(), block + l.type_ids);
  }
  std::copy(plan.positions.begin(), plan.positions.end(), block + l.positions);
  std::copy(b.cu_seqlens.begin(), b.cu_seqlens.end(), block + l.cu_seqlens);
  std::copy(plan.row_bounds.begin(), plan.row_bounds.end(), block + l.row_bounds);
  std::copy(plan.seq_bounds.begin(), plan.seq_bounds.end(), block + l.seq_bounds);
  // The tile list: (keys read, sequence, tile), sorted by keys descending, then in order.
  p.num_tiles = MaxAttentionTiles(p.num_tokens, p.num_seqs);
  struct Tile {
    int64_t keys;
    int32_t seq, tile;
  };
  std::vector<Tile> tiles;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const int64_t len = b.cu_seqlens[s + 1] - b.cu_seqlens[s];
    for (int64_t t = 0; t * kAttentionTileRows < len; ++t) {
      const int64_t keys =
          plan.attention.causal ? std::min(len, (t + 1) * kAttentionTileRows) : len;
      tiles.push_back({keys, static_cast<int32_t>(s), static_cast<int32_t>(t)});
    }
  }
  std::stable_sort(tiles.begin(), tiles.end(),
                   [](const Tile& a, const Tile& c) { return a.keys > c.keys; });
  std::fill(block + l.tiles, block + l.tiles + 2 * p.num_tiles, -1);
  for (size_t i = 0; i < tiles.size(); ++i) {
    block[l.tiles + 2 * i] = tiles[i].seq;
    block[l.tiles + 2 * i + 1] = tiles[i].tile;
  }
  // What was written, merged where the gap is small (one copy moves it faster than two calls).
  constexpr int64_t kMergeGap = 1024;  // int32 elements: 4 KB
  const PackedInputs::Range written[] = {
      {l.ids, p.num_tokens},          {l.type_ids, p.num_tokens},
      {l.positions, p.num_tokens},    {l.cu_seqlens, p.num_seqs + 1},
      {l.row_bounds, 3 * p.num_rows}, {l.seq_bounds, static_cast<int64_t>(plan.seq_bounds.size())},
      {l.tiles, 2 * p.num_tiles}};
  for (const PackedInputs::Range& r : written) {
    if (r.count == 0) continue;
    if (p.num_ranges > 0) {
      PackedInputs::Range& last = p.ranges[p.num_ranges - 1];
      if (r.offset - (last.offset + last.count) <= kMergeGap) {
        last.count = r.offset + r.count - last.offset;
        continue;
      }
    }
    p.ranges[p.num_ranges++] = r;
  }
  return p;
}

}  // namespace quiver::engine
