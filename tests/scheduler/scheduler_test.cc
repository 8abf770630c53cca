// The Scheduler around a real engine, at its end of life: destroyed right after its last chunk
// was answered, while the engine still runs (as `quiver embed` and a draining worker do). The
// engine calls one completion hook per batch, and a hook may find its batch already delivered by
// the hook before it; the destructor must wait for every hook, or the engine's thread runs one on
// a destroyed scheduler (it did: `quiver embed` crashed at exit under load, 13 of 60 runs). And
// the answers to chunks dropped before compute come without the scheduler's lock held, so that a
// caller may enqueue again from one (a retry), and before Drain returns.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "common/metrics.h"
#include "engine/engine.h"

namespace quiver::scheduler {
namespace {

absl::StatusOr<std::unique_ptr<engine::Engine>> LoadMiniLm() {
  engine::EngineOptions options;
  options.num_threads = 1;
  return engine::Engine::Load(
      (std::filesystem::path(QUIVER_SOURCE_DIR) / "models" / "all-MiniLM-L6-v2").string(), options);
}

TEST(SchedulerTest, DestroyedRightAfterItsLastAnswerWhileTheEngineRuns) {
  auto engine = LoadMiniLm();
  ASSERT_TRUE(engine.ok()) << engine.status();
  SchedulerLimits limits;
  limits.max_batch_tokens = 16;  // one chunk per batch: two batches in the engine at once
  for (int round = 0; round < 400; ++round) {
    MetricsRegistry metrics;
    auto scheduler = std::make_unique<Scheduler>(engine->get(), limits, &metrics);
    std::mutex mu;
    std::condition_variable cv;
    int answered = 0, ok = 0;
    constexpr int kChunks = 4;
    for (int c = 0; c < kChunks; ++c) {
      Chunk chunk;
      const std::vector<int32_t> ids = {101, 2000 + c, 2001 + round % 50, 2002, 102};
      chunk.batch.Add(ids);
      ASSERT_TRUE(scheduler
                      ->Enqueue(std::move(chunk),
                                [&](absl::StatusOr<ChunkResult> r) {
                                  std::lock_guard<std::mutex> lock(mu);
                                  ++answered;
                                  ok += r.ok() ? 1 : 0;
                                  cv.notify_all();
                                })
                      .ok());
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return answered == kChunks; });
    }
    scheduler.reset();  // at once: the engine may still be inside a completion hook
    ASSERT_EQ(ok, kChunks) << "round " << round;
  }
}

// A chunk cancelled before compute, answered CANCELLED, whose answer enqueues a fresh chunk on the
// same scheduler (as a caller retrying would): dropped when it is enqueued into an idle engine
// (Enqueue's own submission), and when it waits behind two batches (the engine's completion hook).
// Both answers arrive and the fresh chunks are computed.
TEST(SchedulerTest, AnAnswerToADroppedChunkMayEnqueueAgain) {
  auto engine = LoadMiniLm();
  ASSERT_TRUE(engine.ok()) << engine.status();
  SchedulerLimits limits;
  limits.max_batch_tokens = 256;  // one chunk per batch below
  for (const int ahead : {0, 2}) {
    MetricsRegistry metrics;
    auto scheduler = std::make_unique<Scheduler>(engine->get(), limits, &metrics);
    std::mutex mu;
    std::condition_variable cv;
    int computed = 0, cancelled = 0, retried = 0, retried_ok = 0;
    auto chunk_of = [](int tokens) {
      Chunk chunk;
      std::vector<int32_t> ids(static_cast<size_t>(tokens), 2000);
      ids.front() = 101;
      ids.back() = 102;
      chunk.batch.Add(ids);
      return chunk;
    };
    for (int i = 0; i < ahead; ++i) {  // two long batches: the engine full
      ASSERT_TRUE(scheduler
                      ->Enqueue(chunk_of(250),
                                [&](absl::StatusOr<ChunkResult> r) {
                                  std::lock_guard<std::mutex> lock(mu);
                                  computed += r.ok() ? 1 : 0;
                                })
                      .ok());
    }
    Chunk doomed = chunk_of(8);
    doomed.is_cancelled = [] { return true; };
    Scheduler* const s = scheduler.get();
    ASSERT_TRUE(s->Enqueue(std::move(doomed), [&, s](absl::StatusOr<ChunkResult> r) {
                   {
                     std::lock_guard<std::mutex> lock(mu);
                     cancelled += absl::IsCancelled(r.status()) ? 1 : 0;
                   }
                   // Under the scheduler's lock this deadlocked (a second lock of
                   // mu_ on the thread that holds it).
                   const absl::Status again =
                       s->Enqueue(chunk_of(8), [&](absl::StatusOr<ChunkResult> r2) {
                         std::lock_guard<std::mutex> lock(mu);
                         ++retried;
                         retried_ok += r2.ok() ? 1 : 0;
                         cv.notify_all();
                       });
                   EXPECT_TRUE(again.ok()) << again;
                 }).ok());
    {  // (an engine thread deadlocked in the hook would never answer: fail, not hang)
      std::unique_lock<std::mutex> lock(mu);
      ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return retried == 1; }))
          << ahead;
    }
    scheduler.reset();
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(computed, ahead) << ahead;
    EXPECT_EQ(cancelled, 1) << ahead;
    EXPECT_EQ(retried_ok, 1) << ahead;
  }
}

}  // namespace
}  // namespace quiver::scheduler
