#include "engine/base/thread_pool.h"

#include <chrono>

#include "common/strings.h"
#include "common/thread_name.h"
#include "engine/base/spin.h"

namespace quiver::engine {
namespace {

// How long an idle thread polls before it sleeps: longer than the gap between two kernels of a
// forward pass, short enough that an idle server does not hold the cores.
constexpr std::chrono::microseconds kSpin{200};

// Polls done() until it holds or kSpin passed; true if it holds.
template <typename Done>
bool SpinBriefly(Done done) {
  return SpinUntil(std::chrono::steady_clock::now() + kSpin, done);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) {
    workers_.emplace_back([this, i] {
      SetThreadName(StrCat("quiver-pool-", i));
      WorkerLoop();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunShare() {
  while (true) {
    const int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n_) return;
    try {
      (*fn_)(i);
    } catch (...) {  // kept for ParallelFor's caller; the other indices still run
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    auto has_work = [&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    };
    auto stop_spinning = [&] { return has_work() || resting_.load(std::memory_order_acquire); };
    if (!SpinBriefly(stop_spinning) || !has_work()) {
      if (resting_.load(std::memory_order_acquire)) {  // poll until Rest's deadline, if any
        const std::chrono::steady_clock::time_point until{
            std::chrono::steady_clock::duration(linger_until_.load(std::memory_order_relaxed))};
        PollUntil(until, has_work);
      }
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, has_work);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    RunShare();
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  fn_ = &fn;
  n_ = n;
  next_.store(0, std::memory_order_relaxed);
  active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  resting_.store(false, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);  // a worker about to sleep sees the new generation
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  RunShare();
  auto all_done = [&] { return active_.load(std::memory_order_acquire) == 0; };
  if (!SpinBriefly(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
  fn_ = nullptr;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(error, error_);
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::Rest(std::chrono::microseconds linger) {
  const std::chrono::steady_clock::time_point until = std::chrono::steady_clock::now() + linger;
  linger_until_.store(until.time_since_epoch().count(), std::memory_order_relaxed);
  resting_.store(true, std::memory_order_release);  // after the deadline: workers read it first
}

}  // namespace quiver::engine
