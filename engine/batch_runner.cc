#include "engine/batch_runner.h"

#include <utility>

namespace quiver::engine {

bool LazyResult::Ready() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

const absl::StatusOr<EngineOutput>& LazyResult::Wait() const {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->result;
}

void LazyResult::Fulfil(absl::StatusOr<EngineOutput> out) const {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->done) return;
    state_->result = std::move(out);
    state_->done = true;
  }
  state_->cv.notify_all();
}

}  // namespace quiver::engine
