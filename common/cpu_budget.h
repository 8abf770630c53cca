// How many CPUs this process may really use: what the compute threads default to.
//
// std::thread::hardware_concurrency() counts the machine's online CPUs. It ignores the process's
// affinity mask (taskset, Docker's --cpuset-cpus, Kubernetes' static CPU manager) and any cgroup
// CPU quota (Docker's --cpus, a Kubernetes container's CPU limit): a worker given 2 CPUs on a
// 64-core node would start 64 spinning compute threads that share 2 CPUs' time, and under a
// quota the kernel stops them all for the rest of each period once the quota is spent. The
// budget here is the affinity mask's CPUs, capped by the tightest cgroup quota on the process's
// cgroup path (v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us), rounded up (as Java's
// and Go's runtimes round a fractional limit), and at least 1.
//
// Thread-safe (reads files, keeps no state).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace quiver {

struct CpuBudget {
  int online_cpus = 1;    // hardware_concurrency()
  int affinity_cpus = 1;  // CPUs in the process's affinity mask (online_cpus if unreadable)
  // The tightest quota on the cgroup path in CPUs (quota / period, e.g. 1.5), if any.
  std::optional<double> quota_cpus;
  std::string quota_file;  // where quota_cpus came from (empty without one)
  int usable_cpus = 1;     // min(affinity_cpus, ceil(quota_cpus)), at least 1

  // "2 (affinity 2 of 64 online, cgroup quota 1.5 CPUs in /sys/fs/cgroup/cpu.max)".
  std::string ToString() const;
};

// Reads the budget of the calling process. `root` prefixes every path read (/proc/self/cgroup,
// /sys/fs/cgroup/...): empty for the real files, a folder laid out the same way in tests.
CpuBudget ReadCpuBudget(const std::string& root = "");

// The pure parts, for tests.

// A cgroup v2 cpu.max ("max 100000" or "150000 100000") as CPUs; nullopt for no limit or text
// that is not one.
std::optional<double> ParseCpuMax(std::string_view text);
// cgroup v1's cpu.cfs_quota_us ("-1": none) and cpu.cfs_period_us as CPUs.
std::optional<double> ParseCfsQuota(std::string_view quota_us, std::string_view period_us);
// The cgroup path in /proc/self/cgroup's text of the v2 hierarchy (its "0::" line) or, with
// `v1_controller`, of the v1 hierarchy whose controllers include it ("4:cpu,cpuacct:/a" for
// "cpu"); nullopt if absent.
std::optional<std::string> CgroupPath(std::string_view proc_self_cgroup,
                                      std::string_view v1_controller = "");
// min(affinity_cpus, ceil(quota_cpus)), at least 1.
int UsableCpus(int affinity_cpus, std::optional<double> quota_cpus);

}  // namespace quiver
