#include "scheduler/limits.h"

#include <gtest/gtest.h>

namespace quiver::scheduler {
namespace {

TEST(SchedulerLimitsTest, DefaultsAreValid) { EXPECT_TRUE(ValidateLimits({}).ok()); }

TEST(SchedulerLimitsTest, ErrorsNameTheFlag) {
  SchedulerLimits limits;
  limits.max_batch_tokens = 0;
  EXPECT_NE(ValidateLimits(limits).message().find("--max-batch-tokens"), std::string::npos);
  limits = {};
  limits.max_batch_seqs = -1;
  EXPECT_NE(ValidateLimits(limits).message().find("--max-batch-seqs"), std::string::npos);
  limits = {};
  limits.max_queued_tokens = limits.max_batch_tokens - 1;
  EXPECT_NE(ValidateLimits(limits).message().find("--max-queued-tokens"), std::string::npos);
}

}  // namespace
}  // namespace quiver::scheduler
