// How many compute threads an engine starts (EngineOptions::num_threads 0: the CPUs the process
// may use, common/cpu_budget.h) and what its start-up summary says about them.
#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>
#include <string>
#include <thread>

#include "common/cpu_budget.h"
#include "engine/engine.h"

namespace quiver::engine {
namespace {

const std::filesystem::path kModel =
    std::filesystem::path(QUIVER_SOURCE_DIR) / "tests" / "fixtures" / "tiny" / "bert_mean";

// Loads the tiny model with `threads` on a thread pinned to one CPU (the engine's threads start
// from it and inherit its mask) and returns the engine's DeviceSummary.
std::string SummaryPinnedToOneCpu(int threads) {
  std::string summary;
  std::thread([&] {
    cpu_set_t mine, one;
    CPU_ZERO(&mine);
    ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
    int first = 0;
    while (!CPU_ISSET(first, &mine)) ++first;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    EngineOptions options;
    options.num_threads = threads;
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Load(kModel.string(), options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    summary = (*engine)->DeviceSummary();
  }).join();
  return summary;
}

TEST(EngineThreadsTest, TheDefaultIsTheCpusTheProcessMayUse) {
  EXPECT_NE(
      SummaryPinnedToOneCpu(0).find("threads=1 (the CPUs this process may use: 1 (affinity 1 of"),
      std::string::npos)
      << SummaryPinnedToOneCpu(0);
  EngineOptions options;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Load(kModel.string(), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::string expected = "threads=" + std::to_string(ReadCpuBudget().usable_cpus) + " (";
  EXPECT_NE((*engine)->DeviceSummary().find(expected), std::string::npos)
      << (*engine)->DeviceSummary();
}

TEST(EngineThreadsTest, MoreThreadsThanCpusAreRunButNamed) {
  const std::string summary = SummaryPinnedToOneCpu(3);
  EXPECT_NE(summary.find("threads=3 (as set, over the 1 (affinity 1 of"), std::string::npos)
      << summary;
  const std::string within = SummaryPinnedToOneCpu(1);
  EXPECT_NE(within.find("threads=1 (as set)"), std::string::npos) << within;
}

}  // namespace
}  // namespace quiver::engine
