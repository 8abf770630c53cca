// The engine's thread pool: every index runs exactly once, on more than one thread when there is
// more than one; a task's exception reaches the caller after the other indices ran; and Rest()
// (workers stop spinning, poll for a while if asked, then sleep) neither loses the next job nor
// leaves work unfinished, whether the next job comes at once, while they poll or after they went
// to sleep, nor keeps a pool that is destroyed while its workers poll.
#include "engine/base/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace quiver::engine {
namespace {

// Runs ParallelFor(n), each index taking at least `task`, and checks every index ran once;
// returns how many threads took part.
size_t RunOnce(ThreadPool& pool, int64_t n,
               std::chrono::microseconds task = std::chrono::microseconds(0)) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::mutex mu;
  std::set<std::thread::id> threads;
  pool.ParallelFor(n, [&](int64_t i) {
    hits[static_cast<size_t>(i)].fetch_add(1);
    if (task.count() > 0) std::this_thread::sleep_for(task);
    std::lock_guard<std::mutex> lock(mu);
    threads.insert(std::this_thread::get_id());
  });
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
  return threads.size();
}

TEST(ThreadPoolTest, EveryIndexRunsOnce) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.num_threads(), 3);
  for (int64_t n : {1, 2, 3, 7, 64, 1000}) RunOnce(pool, n);
  pool.ParallelFor(0, [](int64_t) { FAIL() << "no index to run"; });
}

TEST(ThreadPoolTest, WorkersTakePart) {
  ThreadPool pool(2);
  size_t most = 0;
  // Slow tasks, so that the worker wakes while the caller is still busy.
  for (int round = 0; round < 20 && most < 2; ++round) {
    most = std::max(most, RunOnce(pool, 8, std::chrono::milliseconds(1)));
  }
  EXPECT_EQ(most, 2u);
}

TEST(ThreadPoolTest, ExceptionReachesTheCallerAfterEveryIndexRan) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.ParallelFor(100,
                                [&](int64_t i) {
                                  ran.fetch_add(1);
                                  if (i == 17) throw std::runtime_error("task 17");
                                }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 100);
  RunOnce(pool, 50);  // the pool is usable afterwards, with no stale error
}

TEST(ThreadPoolTest, RestThenWorkAgain) {
  ThreadPool pool(2);
  for (int round = 0; round < 200; ++round) {
    RunOnce(pool, 1 + round % 13);
    pool.Rest();
    // Sometimes the next job comes while the workers are still going to sleep, sometimes after.
    if (round % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  pool.Rest();
  pool.Rest();
  RunOnce(pool, 5);
}

// Workers told to poll for half a minute take the next job while polling (a job they missed
// would hold ParallelFor until their half minute ended) and stop when the pool goes; the bound
// is a third of it (liveness, not speed).
TEST(ThreadPoolTest, WorkersPollingAfterRestTakeTheNextJobAndStopWithThePool) {
  const auto start = std::chrono::steady_clock::now();
  const auto bound = std::chrono::seconds(10);
  {
    ThreadPool pool(3);
    for (int round = 0; round < 20; ++round) {
      RunOnce(pool, 64, std::chrono::microseconds(50));
      pool.Rest(std::chrono::seconds(30));
      if (round % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (std::chrono::steady_clock::now() - start > bound) {
        ADD_FAILURE() << "round " << round << ": a job waited for the workers' polling to end";
        break;
      }
    }
  }  // destroyed while its workers poll
  EXPECT_LT(std::chrono::steady_clock::now() - start, bound);
}

}  // namespace
}  // namespace quiver::engine
