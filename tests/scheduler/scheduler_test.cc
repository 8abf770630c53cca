// The Scheduler around a real engine, at its end of life: destroyed right after its last chunk
// was answered, while the engine still runs (as `quiver embed` and a draining worker do). The
// engine calls one completion hook per batch, and a hook may find its batch already delivered by
// the hook before it; the destructor must wait for every hook, or the engine's thread runs one on
// a destroyed scheduler (it did: `quiver embed` crashed at exit under load, 13 of 60 runs).
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "common/metrics.h"
#include "engine/engine.h"

namespace quiver::scheduler {
namespace {

TEST(SchedulerTest, DestroyedRightAfterItsLastAnswerWhileTheEngineRuns) {
  engine::EngineOptions options;
  options.num_threads = 1;
  auto engine = engine::Engine::Load(
      (std::filesystem::path(QUIVER_SOURCE_DIR) / "models" / "all-MiniLM-L6-v2").string(), options);
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

}  // namespace
}  // namespace quiver::scheduler
