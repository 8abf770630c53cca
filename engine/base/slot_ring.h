// A ring of N slots for batches in flight on a device. Each slot owns host buffers that a batch's
// asynchronous work reads or writes after the host moved on (pinned input staging, a page-locked
// attention schedule, the pinned output): a slot may be handed out again only after the work of
// the batch that used it completed. The ring knows nothing of CUDA: completion is asked through
// `wait` (an event's synchronize on the GPU; a fake in the CPU unit test), so the ordering rule
// is tested without a device.
//
// Not thread-safe: owned by the engine's compute thread.
#pragma once

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace quiver::engine {

class SlotRing {
 public:
  // wait(slot) blocks until the work last recorded for `slot` completed (OK), or returns why it
  // failed.
  using Wait = std::function<absl::Status(int slot)>;

  SlotRing(int num_slots, Wait wait)
      : in_flight_(static_cast<size_t>(std::max(1, num_slots)), false), wait_(std::move(wait)) {}

  int size() const { return static_cast<int>(in_flight_.size()); }

  // The next slot in turn; when its previous batch is still in flight, waits for it first. A
  // failed wait leaves the slot in flight (its buffers may still be in use) and returns the error.
  absl::StatusOr<int> Acquire() {
    const int slot = next_;
    if (in_flight_[slot]) {
      absl::Status done = wait_(slot);
      if (!done.ok()) return done;
      in_flight_[slot] = false;
    }
    next_ = (next_ + 1) % size();
    return slot;
  }

  // The slot's work was enqueued (its completion recorded): it is in flight until waited for.
  void Submitted(int slot) { in_flight_[slot] = true; }

  // The caller itself saw the slot's work complete (e.g. it waited for the result).
  void Completed(int slot) { in_flight_[slot] = false; }

  // Waits for every slot still in flight (before freeing what the slots' work uses).
  absl::Status Drain() {
    for (int s = 0; s < size(); ++s) {
      if (!in_flight_[s]) continue;
      absl::Status done = wait_(s);
      if (!done.ok()) return done;
      in_flight_[s] = false;
    }
    return absl::OkStatus();
  }

  int in_flight() const {
    int n = 0;
    for (bool b : in_flight_) n += b;
    return n;
  }

 private:
  std::vector<bool> in_flight_;
  int next_ = 0;
  Wait wait_;
};

}  // namespace quiver::engine
