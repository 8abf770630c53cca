// A persistent pool of compute threads for the engine's own kernels (attention, pooling).
// ParallelFor blocks until every index ran; it may be called from one thread at a time (the
// engine's compute thread). BLAS runs its own threads.
#pragma once

#include <condition_variable>
#include <cstdint>
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
  // fn(i) for i in [0, n), spread over the threads; returns when all are done.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void WorkerLoop();
  void RunShare();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t next_ = 0;     // next index to hand out (guarded by mu_)
  int active_ = 0;       // workers still running the current job
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace quiver::engine
