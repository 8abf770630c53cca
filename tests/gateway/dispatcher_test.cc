// The gateway's pure decisions: which replica gets a chunk, and where a request is split.
#include "gateway/dispatcher.h"

#include <gtest/gtest.h>

namespace quiver::gateway {
namespace {

TEST(PickReplicaTest, FewestOutstandingTokensAmongHealthy) {
  const std::vector<ReplicaLoad> r = {{true, 500}, {false, 0}, {true, 100}, {true, 300}};
  EXPECT_EQ(PickReplica(r, {}), 2);
  const std::vector<int> tried = {2};
  EXPECT_EQ(PickReplica(r, tried), 3);  // a retry goes elsewhere
  const std::vector<int> all = {0, 2, 3};
  EXPECT_EQ(PickReplica(r, all), -1);  // the unhealthy one is never picked
  EXPECT_EQ(PickReplica(std::vector<ReplicaLoad>{}, {}), -1);
}

TEST(PickReplicaTest, TiesRotate) {
  const std::vector<ReplicaLoad> idle = {{true, 0}, {true, 0}, {true, 0}};
  EXPECT_EQ(PickReplica(idle, {}, 0), 0);
  EXPECT_EQ(PickReplica(idle, {}, 1), 1);
  EXPECT_EQ(PickReplica(idle, {}, 5), 2);
}

TEST(SplitIntoChunksTest, ConsecutiveSequencesUpToTheBudget) {
  const std::vector<int64_t> lengths = {100, 100, 100, 500, 10, 10};
  const auto chunks = SplitIntoChunks(lengths, 250);
  const std::vector<std::pair<size_t, size_t>> want = {{0, 2}, {2, 3}, {3, 4}, {4, 6}};
  EXPECT_EQ(chunks, want);  // the 500-token sequence is a chunk of its own
  EXPECT_TRUE(SplitIntoChunks(std::vector<int64_t>{}, 250).empty());
}

}  // namespace
}  // namespace quiver::gateway
