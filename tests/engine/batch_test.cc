// RaggedBatch's host-side edits: DropTrailingTokens, which the engine applies for decoder
// sequence classifiers (ModelInfo::score_before_trailing_id).
#include "engine/batch.h"

#include <gtest/gtest.h>

#include <vector>

namespace quiver::engine {
namespace {

TEST(RaggedBatchTest, DropTrailingTokensKeepsTheRestAndOneTokenAtLeast) {
  RaggedBatch b;
  const std::vector<int32_t> types_a{1, 1, 0}, types_b{0, 0, 0}, types_c{1, 0}, types_d{1},
      types_e{0, 1, 1, 0};
  b.Add({5, 0, 0}, &types_a);
  b.Add({0, 0, 0}, &types_b);
  b.Add({7, 8}, &types_c);
  b.Add({0}, &types_d);
  b.Add({9, 0, 4, 0}, &types_e);  // only the end is trimmed, not a pad token inside
  b.prompt_lengths = {2, 2, 1, 0, 3};
  ASSERT_TRUE(ValidateBatch(b, 10, 2, 16).ok());
  DropTrailingTokens(b, 0);
  EXPECT_EQ(b.token_ids, (std::vector<int32_t>{5, 0, 7, 8, 0, 9, 0, 4}));
  EXPECT_EQ(b.token_type_ids, (std::vector<int32_t>{1, 0, 1, 0, 1, 0, 1, 1}));
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 1, 2, 4, 5, 8}));
  EXPECT_EQ(b.prompt_lengths, (std::vector<int32_t>{0, 0, 1, 0, 2}));
  EXPECT_TRUE(ValidateBatch(b, 10, 2, 16).ok());
}

TEST(RaggedBatchTest, DropTrailingTokensWithoutTypeIdsOrThatIdChangesNothingElse) {
  RaggedBatch b;
  b.Add({3, 4, 5});
  b.Add({6});
  const RaggedBatch before = b;
  DropTrailingTokens(b, 9);
  EXPECT_EQ(b.token_ids, before.token_ids);
  EXPECT_EQ(b.cu_seqlens, before.cu_seqlens);
  EXPECT_TRUE(b.token_type_ids.empty());
  DropTrailingTokens(b, 5);
  EXPECT_EQ(b.token_ids, (std::vector<int32_t>{3, 4, 6}));
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 2, 3}));
}

}  // namespace
}  // namespace quiver::engine
