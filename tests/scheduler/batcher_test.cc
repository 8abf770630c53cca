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

}  // namespace
}  // namespace quiver::scheduler
