// The Scheduler around a fake engine (an engine::BatchRunner that holds every batch until the
// test completes it): two batches in the engine and the next packed when one completes, first
// come first served up to the token budget, each chunk answered with its own rows, chunks
// cancelled or expired while queued answered without reaching the engine, an engine error
// answering every chunk of its batch, overload refused at once, and Drain. No model, no timing:
// each test decides when each batch completes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "engine/batch_runner.h"
#include "scheduler/scheduler.h"

namespace quiver::scheduler {
namespace {

// Holds the batches submitted until CompleteNext answers the oldest: one f32 value per row, the
// row's sequence's first token id (so that a test can tell whose rows a chunk got), or an error.
class FakeRunner final : public engine::BatchRunner {
 public:
  engine::LazyResult Submit(engine::RaggedBatch batch, std::function<void()> on_ready) override {
    engine::LazyResult result;
    std::lock_guard<std::mutex> lock(mu_);
    submitted_tokens_.push_back(batch.num_tokens());
    pending_.push_back({std::move(batch), result, std::move(on_ready)});
    return result;
  }
  int64_t max_input_tokens() const override { return 64; }
  engine::EngineStats stats() const override {
    engine::EngineStats stats;
    stats.device = "fake";
    return stats;
  }
  bool stats_change() const override { return false; }

  size_t pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size();
  }
  // The token count of every batch submitted so far, in order.
  std::vector<int64_t> submitted_tokens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_tokens_;
  }
  // Every first token id the engine was given, in order.
  std::vector<int32_t> first_ids_seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_ids_seen_;
  }

  // Answers the oldest batch on the calling thread, as the engine's compute thread would: the
  // result, then its hook (which may submit the next batch).
  void CompleteNext(absl::Status error = absl::OkStatus()) {
    Pending item;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ASSERT_FALSE(pending_.empty());
      item = std::move(pending_.front());
      pending_.pop_front();
      for (int64_t s = 0; s < item.batch.num_seqs(); ++s) {
        first_ids_seen_.push_back(item.batch.token_ids[item.batch.cu_seqlens[s]]);
      }
    }
    if (!error.ok()) {
      item.result.Fulfil(error);
    } else {
      engine::EngineOutput out;
      out.num_seqs = item.batch.num_rows();
      out.dimensions = 1;
      out.data.resize(static_cast<size_t>(out.num_seqs) * sizeof(float));
      for (int64_t s = 0; s < out.num_seqs; ++s) {
        const auto value = static_cast<float>(item.batch.token_ids[item.batch.cu_seqlens[s]]);
        std::memcpy(out.data.data() + s * sizeof(float), &value, sizeof(float));
      }
      item.result.Fulfil(std::move(out));
    }
    if (item.on_ready) item.on_ready();
  }
  void CompleteAll() {
    while (pending() > 0) CompleteNext();
  }

 private:
  struct Pending {
    engine::RaggedBatch batch;
    engine::LazyResult result;
    std::function<void()> on_ready;
  };
  mutable std::mutex mu_;
  std::deque<Pending> pending_;
  std::vector<int64_t> submitted_tokens_;
  std::vector<int32_t> first_ids_seen_;
};

// A chunk of `seqs` sequences of `tokens_each` tokens; sequence s starts with id first + s.
Chunk MakeChunk(int32_t first, int64_t tokens_each, int64_t seqs = 1) {
  Chunk chunk;
  for (int64_t s = 0; s < seqs; ++s) {
    std::vector<int32_t> ids(static_cast<size_t>(tokens_each), 7);
    ids[0] = first + static_cast<int32_t>(s);
    chunk.batch.Add(ids);
  }
  return chunk;
}

// Every answer, by chunk name, and the order they came in.
struct Answers {
  std::mutex mu;
  std::map<int, absl::StatusOr<ChunkResult>> by_chunk;
  std::vector<int> order;

  ChunkDone For(int name) {
    return [this, name](absl::StatusOr<ChunkResult> r) {
      std::lock_guard<std::mutex> lock(mu);
      by_chunk.emplace(name, std::move(r));
      order.push_back(name);
    };
  }
  bool Has(int name) {
    std::lock_guard<std::mutex> lock(mu);
    return by_chunk.count(name) > 0;
  }
  // The chunk's rows as floats (its sequences' first ids), or the status it got.
  absl::StatusOr<std::vector<float>> Rows(int name) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = by_chunk.find(name);
    if (it == by_chunk.end()) return absl::NotFoundError("no answer");
    if (!it->second.ok()) return it->second.status();
    const engine::EngineOutput& out = it->second->output;
    std::vector<float> rows(static_cast<size_t>(out.num_seqs));
    if (out.data.size() != rows.size() * sizeof(float)) return absl::InternalError("row bytes");
    std::memcpy(rows.data(), out.data.data(), out.data.size());
    return rows;
  }
};

SchedulerLimits Limits(int64_t batch_tokens, int64_t queued_tokens = 1000) {
  SchedulerLimits limits;
  limits.max_batch_tokens = batch_tokens;
  limits.max_batch_seqs = 16;
  limits.max_queued_tokens = queued_tokens;
  return limits;
}

// A scheduler over a fake engine, as every test sets one up. The last member is destroyed first:
// it answers whatever a failed test left in the engine, where the scheduler's destructor (which
// drains) would otherwise wait for ever.
struct Pipeline {
  explicit Pipeline(const SchedulerLimits& limits) : scheduler(&runner, limits, &metrics) {}
  ~Pipeline() { runner.CompleteAll(); }

  FakeRunner runner;
  MetricsRegistry metrics;
  Answers answers;
  Scheduler scheduler;
};

TEST(SchedulerPipelineTest, TwoBatchesInTheEngineAndTheNextSubmittedWhenOneCompletes) {
  Pipeline p(Limits(/*batch_tokens=*/4));
  for (int c = 0; c < 3; ++c) {
    ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(100 + c, 3), p.answers.For(c)).ok());
  }
  // 3 + 3 tokens pass the budget of 4: one chunk per batch, two in the engine, one queued.
  EXPECT_EQ(p.runner.pending(), 2u);
  EXPECT_EQ(p.scheduler.admitted_tokens(), 9);
  p.runner.CompleteNext();
  EXPECT_EQ(p.answers.Rows(0).value(), std::vector<float>{100});
  EXPECT_FALSE(p.answers.Has(1));
  // The completion refilled the engine with the queued chunk.
  EXPECT_EQ(p.runner.pending(), 2u);
  EXPECT_EQ(p.scheduler.admitted_tokens(), 6);
  p.runner.CompleteAll();
  EXPECT_EQ(p.answers.Rows(1).value(), std::vector<float>{101});
  EXPECT_EQ(p.answers.Rows(2).value(), std::vector<float>{102});
  EXPECT_EQ(p.answers.order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(p.scheduler.admitted_tokens(), 0);
}

TEST(SchedulerPipelineTest, QueuedChunksArePackedInArrivalOrderUpToTheBudget) {
  Pipeline p(Limits(/*batch_tokens=*/10));
  // Two chunks of 8 fill the engine; then 3, 3 (two sequences), 8, 3 and 3 wait.
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(100, 8), p.answers.For(0)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(200, 8), p.answers.For(1)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(300, 3), p.answers.For(2)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(400, 3, /*seqs=*/2), p.answers.For(3)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(500, 8), p.answers.For(4)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(600, 3), p.answers.For(5)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(700, 3), p.answers.For(6)).ok());
  EXPECT_EQ(p.runner.submitted_tokens(), (std::vector<int64_t>{8, 8}));
  p.runner.CompleteAll();
  // 3 + 6 = 9 fit in 10 and the 8 after them does not: it starts the next batch, and the chunks
  // of 3 behind it are not moved ahead of it (first come, first served), though one would fit.
  EXPECT_EQ(p.runner.submitted_tokens(), (std::vector<int64_t>{8, 8, 9, 8, 6}));
  EXPECT_EQ(p.runner.first_ids_seen(),
            (std::vector<int32_t>{100, 200, 300, 400, 401, 500, 600, 700}));
  // Each chunk got its own rows out of the packed batch.
  EXPECT_EQ(p.answers.Rows(2).value(), std::vector<float>{300});
  EXPECT_EQ(p.answers.Rows(3).value(), (std::vector<float>{400, 401}));
  EXPECT_EQ(p.answers.Rows(4).value(), std::vector<float>{500});
  EXPECT_EQ(p.answers.Rows(5).value(), std::vector<float>{600});
  EXPECT_EQ(p.answers.Rows(6).value(), std::vector<float>{700});
  EXPECT_EQ(p.answers.order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(SchedulerPipelineTest, ChunksCancelledOrExpiredWhileQueuedNeverReachTheEngine) {
  Pipeline p(Limits(/*batch_tokens=*/4));
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(100, 3), p.answers.For(0)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(200, 3), p.answers.For(1)).ok());
  std::atomic<bool> client_left{false};
  Chunk cancelled = MakeChunk(300, 3);
  cancelled.is_cancelled = [&] { return client_left.load(); };
  ASSERT_TRUE(p.scheduler.Enqueue(std::move(cancelled), p.answers.For(2)).ok());
  Chunk expires = MakeChunk(400, 3);
  expires.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  ASSERT_TRUE(p.scheduler.Enqueue(std::move(expires), p.answers.For(3)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(500, 3), p.answers.For(4)).ok());
  client_left = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(40));  // past chunk 3's deadline
  EXPECT_EQ(p.scheduler.admitted_tokens(), 15);
  p.runner.CompleteNext();
  // The completion dropped both before packing the next batch.
  EXPECT_EQ(p.answers.Rows(2).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(p.answers.Rows(3).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(p.scheduler.admitted_tokens(), 6);
  p.runner.CompleteAll();
  EXPECT_EQ(p.runner.first_ids_seen(), (std::vector<int32_t>{100, 200, 500}));
  EXPECT_EQ(p.answers.Rows(4).value(), std::vector<float>{500});
  // A chunk already past its deadline when it comes, with room in the engine, is answered at
  // once on the enqueuing thread.
  Chunk late = MakeChunk(600, 3);
  late.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  ASSERT_TRUE(p.scheduler.Enqueue(std::move(late), p.answers.For(5)).ok());
  EXPECT_EQ(p.answers.Rows(5).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(p.runner.pending(), 0u);
  EXPECT_EQ(p.scheduler.admitted_tokens(), 0);
}

TEST(SchedulerPipelineTest, AnEngineErrorAnswersEveryChunkOfItsBatchAndTheNextBatchRuns) {
  Pipeline p(Limits(/*batch_tokens=*/10));
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(100, 8), p.answers.For(0)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(200, 8), p.answers.For(1)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(300, 4), p.answers.For(2)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(400, 4), p.answers.For(3)).ok());
  p.runner.CompleteNext();
  p.runner.CompleteNext(absl::InternalError("the device fell over"));
  EXPECT_EQ(p.answers.Rows(1).status().code(), absl::StatusCode::kInternal);
  p.runner.CompleteNext(absl::ResourceExhaustedError("out of device memory"));
  // Chunks 2 and 3 shared a batch: both get its error.
  EXPECT_EQ(p.answers.Rows(2).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(p.answers.Rows(3).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(p.scheduler.admitted_tokens(), 0);
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(500, 4), p.answers.For(4)).ok());
  p.runner.CompleteAll();
  EXPECT_EQ(p.answers.Rows(4).value(), std::vector<float>{500});
}

TEST(SchedulerPipelineTest, OverloadIsRefusedAtOnceAndRoomComesBackWithEachAnswer) {
  Pipeline p(Limits(/*batch_tokens=*/10, /*queued_tokens=*/20));
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(100, 8), p.answers.For(0)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(200, 8), p.answers.For(1)).ok());
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(300, 3), p.answers.For(2)).ok());
  const absl::Status refused = p.scheduler.Enqueue(MakeChunk(400, 3), p.answers.For(3));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("max_queued_tokens is 20"), std::string::npos) << refused;
  const absl::Status too_long = p.scheduler.Enqueue(MakeChunk(500, 65), p.answers.For(4));
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument) << too_long;
  p.runner.CompleteNext();
  ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(400, 3), p.answers.For(3)).ok());
  p.runner.CompleteAll();
  EXPECT_EQ(p.answers.Rows(3).value(), std::vector<float>{400});
  // Refused chunks are never answered through `done`.
  EXPECT_FALSE(p.answers.Has(4));
  EXPECT_EQ(p.answers.order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(SchedulerPipelineTest, DrainRefusesNewChunksAndReturnsOnlyWhenTheEngineIsEmpty) {
  Pipeline p(Limits(/*batch_tokens=*/4));
  for (int c = 0; c < 3; ++c) {
    ASSERT_TRUE(p.scheduler.Enqueue(MakeChunk(100 + c, 3), p.answers.For(c)).ok());
  }
  std::atomic<bool> drained{false};
  std::thread drainer([&] {
    p.scheduler.Drain();
    drained = true;
  });
  // Once draining, new chunks are refused (an empty chunk tells when without being admitted:
  // INVALID_ARGUMENT before, UNAVAILABLE after); what was admitted still runs.
  while (p.scheduler.Enqueue(Chunk{}, p.answers.For(9)).code() != absl::StatusCode::kUnavailable) {
    std::this_thread::yield();
  }
  EXPECT_EQ(p.scheduler.Enqueue(MakeChunk(900, 3), p.answers.For(9)).code(),
            absl::StatusCode::kUnavailable);
  p.runner.CompleteNext();
  EXPECT_FALSE(drained.load());  // two chunks still admitted
  p.runner.CompleteAll();
  drainer.join();
  EXPECT_TRUE(drained.load());
  EXPECT_EQ(p.answers.order, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace quiver::scheduler
