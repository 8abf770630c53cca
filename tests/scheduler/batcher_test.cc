// The scheduler's decisions, without threads or gRPC: FCFS order, budgets, oversize chunks,
// output-option boundaries, admission limits, dropping cancelled and expired chunks.
#include "scheduler/batcher.h"

#include <gtest/gtest.h>

namespace quiver::scheduler {
namespace {

SchedulerLimits Limits(int64_t tokens, int64_t seqs, int64_t queued = 100000) {
  SchedulerLimits l;
  l.max_batch_tokens = tokens;
  l.max_batch_seqs = seqs;
  l.max_queued_tokens = queued;
  return l;
}

TEST(FormBatchTest, TakesChunksInOrderUntilTheFirstThatDoesNotFit) {
  const std::vector<ChunkShape> queue = {{300, 3}, {500, 2}, {250, 1}, {10, 1}};
  // 300 + 500 = 800 fits 1000; + 250 would be 1050: stop there, even though 10 would fit after.
  EXPECT_EQ(FormBatch(queue, Limits(1000, 64)), 2u);
  EXPECT_EQ(FormBatch(queue, Limits(1050, 64)), 3u);
  EXPECT_EQ(FormBatch(queue, Limits(5000, 64)), 4u);
}

TEST(FormBatchTest, SequenceBudgetBindsToo) {
  const std::vector<ChunkShape> queue = {{10, 4}, {10, 4}, {10, 4}};
  EXPECT_EQ(FormBatch(queue, Limits(1000, 8)), 2u);
  EXPECT_EQ(FormBatch(queue, Limits(1000, 7)), 1u);
}

TEST(FormBatchTest, OversizeFirstChunkRunsAlone) {
  const std::vector<ChunkShape> queue = {{5000, 10}, {10, 1}};
  EXPECT_EQ(FormBatch(queue, Limits(1000, 64)), 1u);
  const std::vector<ChunkShape> second_oversize = {{10, 1}, {5000, 10}, {10, 1}};
  EXPECT_EQ(FormBatch(second_oversize, Limits(1000, 64)), 1u);  // it waits for its own batch
  EXPECT_EQ(FormBatch(std::span(second_oversize).subspan(1), Limits(1000, 64)), 1u);
}

TEST(FormBatchTest, EmptyQueueGivesNothing) { EXPECT_EQ(FormBatch({}, Limits(1000, 64)), 0u); }

TEST(FormBatchTest, DifferentOutputOptionsStartANewBatch) {
  engine::OutputOptions plain, truncated;
  truncated.dimensions = 64;
  const std::vector<ChunkShape> queue = {
      {10, 1, &plain}, {10, 1, &plain}, {10, 1, &truncated}, {10, 1, &plain}};
  EXPECT_EQ(FormBatch(queue, Limits(1000, 64)), 2u);
  EXPECT_EQ(FormBatch(std::span(queue).subspan(2), Limits(1000, 64)), 1u);
}

TEST(AdmitTest, RefusesBeyondQueuedTokensAndOverlongSequences) {
  const SchedulerLimits l = Limits(1000, 64, 2000);
  EXPECT_TRUE(Admit(500, 2, 300, 1500, 512, l).ok());  // exactly at the limit
  absl::Status over = Admit(501, 2, 300, 1500, 512, l);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(over.message()).find("max_queued_tokens is 2000"), std::string::npos);
  absl::Status too_long = Admit(600, 1, 600, 0, 512, l);
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(too_long.message()).find("at most 512"), std::string::npos);
  // Larger than a batch but within the model's limit: admitted (it will run alone).
  EXPECT_TRUE(Admit(1500, 3, 500, 0, 512, l).ok());
  EXPECT_EQ(Admit(0, 0, 0, 0, 512, l).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeadChunksTest, DropsCancelledAndExpiredOnly) {
  const auto now = std::chrono::steady_clock::now();
  const std::vector<ChunkLiveness> queue = {
      {false, now + std::chrono::seconds(1)},
      {true, now + std::chrono::seconds(1)},
      {false, now - std::chrono::milliseconds(1)},
      {false, std::chrono::steady_clock::time_point::max()},
      {false, now},
  };
  EXPECT_EQ(DeadChunks(queue, now), (std::vector<size_t>{1, 2, 4}));
}

engine::RaggedBatch Chunk(std::vector<std::vector<int32_t>> seqs) {
  engine::RaggedBatch b;
  for (const auto& ids : seqs) b.Add(ids);
  return b;
}

TEST(PackChunksTest, SequencesInOrderWithTypesAndPromptsFilledWhereAChunkHasNone) {
  engine::RaggedBatch a = Chunk({{1, 2, 3}, {4, 5}});
  a.output.dimensions = 8;
  engine::RaggedBatch b = Chunk({{6, 7, 8, 9}});
  b.token_type_ids = {0, 0, 1, 1};
  b.prompt_lengths = {2};
  engine::RaggedBatch c = Chunk({{10}});
  const std::vector<const engine::RaggedBatch*> chunks = {&a, &b, &c};
  const engine::RaggedBatch packed = PackChunks(chunks);
  EXPECT_EQ(packed.token_ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(packed.cu_seqlens, (std::vector<int32_t>{0, 3, 5, 9, 10}));
  EXPECT_EQ(packed.token_type_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(packed.prompt_lengths, (std::vector<int32_t>{0, 0, 2, 0}));
  EXPECT_TRUE(packed.span_bounds.empty());
  EXPECT_EQ(packed.output.dimensions, 8);  // the first chunk's options
}

TEST(PackChunksTest, NoTypesOrPromptsWhereNoChunkHasThem) {
  engine::RaggedBatch a = Chunk({{1, 2}});
  engine::RaggedBatch b = Chunk({{3}, {4, 5, 6}});
  const std::vector<const engine::RaggedBatch*> chunks = {&a, &b};
  const engine::RaggedBatch packed = PackChunks(chunks);
  EXPECT_EQ(packed.cu_seqlens, (std::vector<int32_t>{0, 2, 3, 6}));
  EXPECT_TRUE(packed.token_type_ids.empty());
  EXPECT_TRUE(packed.prompt_lengths.empty());
  EXPECT_EQ(PackChunks({}).num_seqs(), 0);
}

TEST(PackChunksTest, SpanBoundsShiftByTheTokensBefore) {
  engine::RaggedBatch a = Chunk({{1, 2, 3, 4}});
  a.span_bounds = {0, 2, 2, 4};
  engine::RaggedBatch b = Chunk({{5, 6, 7}});
  b.span_bounds = {1, 3};
  const std::vector<const engine::RaggedBatch*> chunks = {&a, &b};
  const engine::RaggedBatch packed = PackChunks(chunks);
  EXPECT_EQ(packed.span_bounds, (std::vector<int32_t>{0, 2, 2, 4, 5, 7}));
  EXPECT_EQ(packed.num_rows(), 3);
}

}  // namespace
}  // namespace quiver::scheduler
