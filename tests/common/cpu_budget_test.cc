// The CPUs a process may use (ReadCpuBudget): cgroup quota files parsed (v2 cpu.max, v1
// cpu.cfs_quota_us), the process's cgroup found in /proc/self/cgroup, the tightest quota along
// the cgroup's path taken, rounded up and capped by the affinity mask; over a folder laid out as
// /proc and /sys/fs/cgroup are on cgroup v2, v1 and container hosts, and on this process.
#include "common/cpu_budget.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace quiver {
namespace {

TEST(CpuBudgetTest, CpuMaxIsParsed) {
  EXPECT_EQ(ParseCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(ParseCpuMax("150000 100000\n"), 1.5);
  EXPECT_EQ(ParseCpuMax("400000 100000"), 4.0);
  EXPECT_EQ(ParseCpuMax("50000 100000"), 0.5);
  for (const char* bad :
       {"", "\n", "max", "0 100000", "-5 100000", "100000 0", "1.5 1", "a b", "100000 100000 7"}) {
    EXPECT_EQ(ParseCpuMax(bad), std::nullopt) << bad;
  }
}

TEST(CpuBudgetTest, CfsQuotaIsParsed) {
  EXPECT_EQ(ParseCfsQuota("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(ParseCfsQuota("250000\n", "100000\n"), 2.5);
  EXPECT_EQ(ParseCfsQuota("100000", "0"), std::nullopt);
  EXPECT_EQ(ParseCfsQuota("", "100000"), std::nullopt);
}

TEST(CpuBudgetTest, TheProcessCgroupIsFound) {
  EXPECT_EQ(CgroupPath("0::/kubepods.slice/pod-1/cri-abc\n"), "/kubepods.slice/pod-1/cri-abc");
  EXPECT_EQ(CgroupPath("0::/\n"), "/");
  // v1 (and hybrid) hosts: one line per hierarchy; the cpu controller named exactly.
  const char* v1 =
      "12:pids:/docker/abc\n"
      "3:cpuacct:/acct-only\n"
      "2:cpu,cpuacct:/docker/abc\n"
      "1:name=systemd:/init.scope\n"
      "0::/init.scope\n";
  EXPECT_EQ(CgroupPath(v1, "cpu"), "/docker/abc");
  EXPECT_EQ(CgroupPath(v1), "/init.scope");
  EXPECT_EQ(CgroupPath("2:cpuacct:/a\n1:cpu:/b:c\n", "cpu"), "/b:c");  // ':' inside a path
  EXPECT_EQ(CgroupPath("4:memory:/x\n", "cpu"), std::nullopt);
  EXPECT_EQ(CgroupPath("4:memory:/x\n"), std::nullopt);  // v1 only
  EXPECT_EQ(CgroupPath(""), std::nullopt);
}

TEST(CpuBudgetTest, AQuotaIsRoundedUpAndCappedByTheAffinity) {
  EXPECT_EQ(UsableCpus(64, std::nullopt), 64);
  EXPECT_EQ(UsableCpus(64, 4.0), 4);
  EXPECT_EQ(UsableCpus(64, 1.5), 2);
  EXPECT_EQ(UsableCpus(64, 0.25), 1);
  EXPECT_EQ(UsableCpus(2, 8.0), 2);
  EXPECT_EQ(UsableCpus(64, 2.0000001), 2);  // a period that does not divide the quota evenly
  EXPECT_EQ(UsableCpus(0, std::nullopt), 1);
}

// A folder laid out as a host's /proc/self/cgroup and /sys/fs/cgroup.
class CpuBudgetFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("quiver-cpu-budget-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    const std::filesystem::path file = root_ / path;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  CpuBudget Read() { return ReadCpuBudget(root_.string()); }
  std::filesystem::path root_;
};

TEST_F(CpuBudgetFilesTest, NoCgroupFilesLeaveTheAffinity) {
  const CpuBudget budget = Read();
  EXPECT_EQ(budget.quota_cpus, std::nullopt);
  EXPECT_EQ(budget.usable_cpus, budget.affinity_cpus);
  EXPECT_NE(budget.ToString().find("no cgroup CPU quota"), std::string::npos);
}

TEST_F(CpuBudgetFilesTest, TheTightestV2QuotaOnThePathCounts) {
  Write("proc/self/cgroup", "0::/kubepods.slice/pod-1/cri-abc\n");
  Write("sys/fs/cgroup/cpu.max", "max 100000\n");  // the host's root: no limit
  Write("sys/fs/cgroup/kubepods.slice/cpu.max", "800000 100000\n");
  Write("sys/fs/cgroup/kubepods.slice/pod-1/cpu.max", "150000 100000\n");
  Write("sys/fs/cgroup/kubepods.slice/pod-1/cri-abc/cpu.max", "max 100000\n");
  Write("sys/fs/cgroup/other/cpu.max", "10000 100000\n");  // not on the path
  const CpuBudget budget = Read();
  ASSERT_TRUE(budget.quota_cpus.has_value());
  EXPECT_DOUBLE_EQ(*budget.quota_cpus, 1.5);
  EXPECT_EQ(budget.quota_file, (root_ / "sys/fs/cgroup/kubepods.slice/pod-1/cpu.max").string());
  EXPECT_EQ(budget.usable_cpus, std::min(budget.affinity_cpus, 2));
  EXPECT_NE(budget.ToString().find("cgroup quota 1.5 CPUs in"), std::string::npos)
      << budget.ToString();
}

// Inside a container with its own cgroup namespace the path is "/" and the container's limit is
// the mount's own cpu.max.
TEST_F(CpuBudgetFilesTest, AContainerSeesItsLimitAtTheMountRoot) {
  Write("proc/self/cgroup", "0::/\n");
  Write("sys/fs/cgroup/cpu.max", "50000 100000\n");
  const CpuBudget budget = Read();
  ASSERT_TRUE(budget.quota_cpus.has_value());
  EXPECT_DOUBLE_EQ(*budget.quota_cpus, 0.5);
  EXPECT_EQ(budget.usable_cpus, 1);
}

// cgroup v1 in a container without a cgroup namespace: /proc/self/cgroup names the host's path,
// which the container's mount does not have; its own quota sits at the mount's root.
TEST_F(CpuBudgetFilesTest, V1QuotaIsReadUpToTheMountRoot) {
  Write("proc/self/cgroup", "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/\n");
  Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "300000\n");
  Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  CpuBudget budget = Read();
  ASSERT_TRUE(budget.quota_cpus.has_value());
  EXPECT_DOUBLE_EQ(*budget.quota_cpus, 3.0);
  EXPECT_EQ(budget.usable_cpus, std::min(budget.affinity_cpus, 3));

  // A host whose cpu controller has a mount of its own, a quota on the process's own group.
  std::filesystem::remove_all(root_ / "sys");
  Write("proc/self/cgroup", "3:cpuacct:/\n1:cpu:/qtest\n0::/\n");
  Write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
  Write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  Write("sys/fs/cgroup/cpu/qtest/cpu.cfs_quota_us", "100000\n");
  Write("sys/fs/cgroup/cpu/qtest/cpu.cfs_period_us", "100000\n");
  budget = Read();
  ASSERT_TRUE(budget.quota_cpus.has_value());
  EXPECT_DOUBLE_EQ(*budget.quota_cpus, 1.0);
  EXPECT_EQ(budget.quota_file, (root_ / "sys/fs/cgroup/cpu/qtest/cpu.cfs_quota_us").string());
  EXPECT_EQ(budget.usable_cpus, 1);
}

TEST_F(CpuBudgetFilesTest, UnreadableOrOddFilesMeanNoQuota) {
  Write("proc/self/cgroup", "0::/a\n");
  Write("sys/fs/cgroup/a/cpu.max", "not a quota\n");
  const CpuBudget budget = Read();
  EXPECT_EQ(budget.quota_cpus, std::nullopt);
  EXPECT_EQ(budget.usable_cpus, budget.affinity_cpus);
}

// The affinity mask is the calling thread's: a thread pinned to one CPU has a budget of one.
TEST(CpuBudgetTest, TheAffinityMaskCounts) {
  const CpuBudget whole = ReadCpuBudget();
  EXPECT_GE(whole.usable_cpus, 1);
  EXPECT_LE(whole.affinity_cpus, whole.online_cpus);
  EXPECT_LE(whole.usable_cpus, whole.affinity_cpus);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  EXPECT_EQ(whole.affinity_cpus, CPU_COUNT(&mine));
  int first = 0;
  while (!CPU_ISSET(first, &mine)) ++first;
  CpuBudget pinned;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    pinned = ReadCpuBudget("/nonexistent-root");  // the affinity alone
  }).join();
  EXPECT_EQ(pinned.affinity_cpus, 1);
  EXPECT_EQ(pinned.usable_cpus, 1);
  EXPECT_EQ(pinned.quota_cpus, std::nullopt);
}

}  // namespace
}  // namespace quiver
