// A persistent pool of compute threads for the engine's kernels (GEMM tiles, attention, row-wise
// passes). ParallelFor blocks until every index ran; it may be called from one thread at a time
// (the engine's compute thread), which takes a share of the work itself. BLAS runs single-threaded
// inside the tasks.
//
// A forward pass calls ParallelFor a few dozen times in a row, so between calls the workers spin
// for a short while (kSpin) before they sleep: a wake-up through the kernel costs tens of
// microseconds each time, which batch-1 latency would pay on every layer. When a forward pass
// ends with nothing queued behind it, the engine calls Rest(linger): the workers stop spinning
// and poll for the next job for `linger`, offering their CPU to any other runnable thread every
// 50 µs (PollUntil, base/spin.h), then sleep. Spinning on would hold cores that the threads
// delivering the result (scheduler, HTTP) wait for where the pool has as many threads as the
// machine has cores; sleeping at once lets the CPU go idle, and the next forward pass then ran
// slower on it (docs/engine.md, "The compute thread between requests").
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace quiver::engine {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // num_threads - 1 workers; the caller is the last
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  // fn(i) for i in [0, n), spread over the threads; returns when all are done. If any fn(i)
  // threw, the first exception is rethrown here once every index has run.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);
  // No work is coming soon: spinning workers stop spinning, poll politely (PollUntil) for
  // `linger` and then sleep (at once for 0). The next ParallelFor finds them polling or wakes
  // them as usual.
  void Rest(std::chrono::microseconds linger = std::chrono::microseconds(0));

 private:
  void WorkerLoop();
  void RunShare();

  std::vector<std::thread> workers_;
  std::mutex mu_;  // guards sleeping and waking, not the work itself
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int64_t)>* fn_ = nullptr;  // published by generation_
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};  // next index to hand out
  std::atomic<int> active_{0};    // workers still running the current job
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> resting_{false};  // set by Rest(), cleared by ParallelFor
  // Until when resting workers poll (steady_clock ticks since its epoch), set by Rest().
  std::atomic<int64_t> linger_until_{0};
  std::exception_ptr error_;  // guarded by mu_
};

}  // namespace quiver::engine
