// The slot ring's one rule, without a device: a slot comes back only after the work of the batch
// that used it completed (the fake `wait` stands for an event's synchronize).
#include "engine/base/slot_ring.h"

#include <gtest/gtest.h>

#include <vector>

namespace quiver::engine {
namespace {

TEST(SlotRingTest, HandsOutSlotsInTurnAndWaitsOnlyForOnesInFlight) {
  std::vector<int> waited;
  SlotRing ring(2, [&](int slot) {
    waited.push_back(slot);
    return absl::OkStatus();
  });
  EXPECT_EQ(*ring.Acquire(), 0);
  ring.Submitted(0);
  EXPECT_EQ(*ring.Acquire(), 1);
  ring.Submitted(1);
  EXPECT_TRUE(waited.empty());
  EXPECT_EQ(ring.in_flight(), 2);
  // Slot 0 again: its batch is still in flight, so the ring waits for it first.
  EXPECT_EQ(*ring.Acquire(), 0);
  EXPECT_EQ(waited, std::vector<int>({0}));
  EXPECT_EQ(ring.in_flight(), 1);
  // Slot 1 completed and was seen complete by the caller: no wait.
  ring.Completed(1);
  EXPECT_EQ(*ring.Acquire(), 1);
  EXPECT_EQ(waited, std::vector<int>({0}));
}

TEST(SlotRingTest, AFailedWaitKeepsTheSlotInFlight) {
  bool fail = true;
  SlotRing ring(1,
                [&](int) { return fail ? absl::InternalError("device lost") : absl::OkStatus(); });
  ASSERT_EQ(*ring.Acquire(), 0);
  ring.Submitted(0);
  absl::StatusOr<int> again = ring.Acquire();
  EXPECT_EQ(again.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ring.in_flight(), 1);  // its buffers may still be in use
  fail = false;
  EXPECT_EQ(*ring.Acquire(), 0);
  EXPECT_EQ(ring.in_flight(), 0);
}

TEST(SlotRingTest, DrainWaitsForEverySlotInFlight) {
  std::vector<int> waited;
  SlotRing ring(3, [&](int slot) {
    waited.push_back(slot);
    return absl::OkStatus();
  });
  for (int i = 0; i < 3; ++i) ring.Submitted(*ring.Acquire());
  ring.Completed(1);
  ASSERT_TRUE(ring.Drain().ok());
  EXPECT_EQ(waited, std::vector<int>({0, 2}));
  EXPECT_EQ(ring.in_flight(), 0);
}

}  // namespace
}  // namespace quiver::engine
