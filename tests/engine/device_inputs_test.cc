// The packed per-batch device inputs (runtime/device_inputs.h): the exact arrays the GPU kernels
// read, built on the host, so they are checked here without a device.
#include "engine/runtime/device_inputs.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace quiver::engine {
namespace {

ModelInfo SmallModel() {
  ModelInfo m;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 8;
  return m;
}

TEST(DeviceInputsTest, OffsetsAreAlignedAndDependOnlyOnTheMaxima) {
  const DeviceInputLayout l = DeviceInputLayoutFor(67, 5, 9);
  for (int64_t offset : {l.ids, l.type_ids, l.positions, l.cu_seqlens, l.row_bounds, l.seq_bounds,
                         l.tiles, l.total}) {
    EXPECT_EQ(offset % 4, 0) << offset;
  }
  EXPECT_GE(l.type_ids - l.ids, 67);
  EXPECT_GE(l.row_bounds - l.cu_seqlens, 6);
  EXPECT_GE(l.seq_bounds - l.row_bounds, 27);
  EXPECT_GE(l.tiles - l.seq_bounds, 10);
  EXPECT_EQ(l.max_tiles, 2 + 5);  // ceil(67 / 64) + 5
  EXPECT_GE(l.total - l.tiles, 2 * l.max_tiles);
  EXPECT_THROW(DeviceInputLayoutFor(0, 1, 1), std::invalid_argument);
}

TEST(DeviceInputsTest, PacksABucketPaddedBatch) {
  RaggedBatch b;
  b.Add({5, 6, 7}, nullptr);
  b.Add({8, 9}, nullptr);
  BatchPlan plan;
  BuildPlan(b, /*pad_to_buckets=*/true, SmallModel(), plan);
  const RaggedBatch& padded = *plan.batch;
  ASSERT_EQ(padded.num_tokens(), 64);  // 5 tokens padded to the 64-token bucket
  const DeviceInputLayout l = DeviceInputLayoutFor(128, 16, 16);
  constexpr int32_t kPoison = 0x5a5a5a5a;
  std::vector<int32_t> block(static_cast<size_t>(l.total), kPoison);
  const PackedInputs p = PackDeviceInputs(plan, l, block.data());
  EXPECT_EQ(p.num_tokens, 64);
  EXPECT_EQ(p.num_seqs, padded.num_seqs());
  EXPECT_EQ(p.num_rows, 2);  // the real sequences only
  EXPECT_EQ(p.max_seqlen, padded.max_seqlen());
  for (int64_t t = 0; t < 5; ++t) EXPECT_EQ(block[l.ids + t], padded.token_ids[t]);
  // Positions restart in each sequence; the padding sequence counts from 0 too.
  EXPECT_EQ(block[l.positions + 0], 0);
  EXPECT_EQ(block[l.positions + 2], 2);
  EXPECT_EQ(block[l.positions + 3], 0);
  EXPECT_EQ(block[l.positions + 5], 0);
  // cu_seqlens: the padded batch's (its empty sequences repeat the last value).
  for (int64_t s = 0; s <= padded.num_seqs(); ++s) {
    EXPECT_EQ(block[l.cu_seqlens + s], padded.cu_seqlens[s]);
  }
  EXPECT_EQ(block[l.cu_seqlens + padded.num_seqs()], 64);
  EXPECT_EQ(std::vector<int32_t>(block.begin() + l.row_bounds, block.begin() + l.row_bounds + 6),
            std::vector<int32_t>({0, 3, 0, 3, 5, 3}));
  // No type ids in the batch: zeros for its tokens, never what the block held before.
  for (int64_t t = 0; t < 64; ++t) EXPECT_EQ(block[l.type_ids + t], 0);
  // The ranges cover exactly what was written: inside them nothing is left as it was, outside
  // them nothing was touched (the copy to the device moves the ranges alone).
  std::vector<bool> in_range(block.size(), false);
  ASSERT_GT(p.num_ranges, 0);
  for (int i = 0; i < p.num_ranges; ++i) {
    const PackedInputs::Range& r = p.ranges[i];
    ASSERT_LE(r.offset + r.count, l.total);
    if (i > 0) {
      EXPECT_GT(r.offset, p.ranges[i - 1].offset + p.ranges[i - 1].count);
    }
    for (int64_t k = r.offset; k < r.offset + r.count; ++k) in_range[static_cast<size_t>(k)] = true;
  }
  for (size_t k = 0; k < block.size(); ++k) {
    if (!in_range[k]) {
      EXPECT_EQ(block[k], kPoison) << "element " << k << " written outside";
    }
  }
  for (int64_t k : {l.ids, l.ids + 63, l.type_ids + 63, l.positions + 63, l.cu_seqlens + 8,
                    l.row_bounds + 5, l.seq_bounds + 3, l.tiles + 2 * p.num_tiles - 1}) {
    EXPECT_TRUE(in_range[static_cast<size_t>(k)]) << k;
    EXPECT_NE(block[static_cast<size_t>(k)], kPoison) << k;
  }
}

TEST(DeviceInputsTest, ASmallBatchInALargeLayoutMovesAFewKilobytes) {
  RaggedBatch b;
  b.Add(std::vector<int32_t>(128, 1), nullptr);
  BatchPlan plan;
  BuildPlan(b, /*pad_to_buckets=*/true, SmallModel(), plan);
  const DeviceInputLayout l = DeviceInputLayoutFor(40960, 40960, 40960);
  std::vector<int32_t> block(static_cast<size_t>(l.total));
  const PackedInputs p = PackDeviceInputs(plan, l, block.data());
  int64_t moved = 0;
  for (int i = 0; i < p.num_ranges; ++i) moved += p.ranges[i].count;
  EXPECT_LT(moved * 4, 4096) << "of " << l.total * 4 << " bytes in the layout";
  EXPECT_EQ(p.num_ranges, 7);  // the arrays lie far apart in this layout
}

TEST(DeviceInputsTest, RefusesABatchLargerThanTheLayout) {
  RaggedBatch b;
  b.Add(std::vector<int32_t>(70, 1), nullptr);
  BatchPlan plan;
  BuildPlan(b, /*pad_to_buckets=*/false, SmallModel(), plan);
  const DeviceInputLayout l = DeviceInputLayoutFor(64, 4, 4);
  std::vector<int32_t> block(static_cast<size_t>(l.total));
  EXPECT_THROW(PackDeviceInputs(plan, l, block.data()), std::invalid_argument);
}

}  // namespace
}  // namespace quiver::engine
