#include "common/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "common/file.h"
#include "common/strings.h"

namespace quiver {
namespace {

std::string_view Trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\n\r");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t\n\r") - begin + 1);
}

// `text`'s pieces between `separator`s, empty ones left out.
std::vector<std::string_view> Pieces(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find(separator, begin);
    if (end == std::string_view::npos) end = text.size();
    if (end > begin) pieces.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return pieces;
}

// A whole decimal number (an optional '-' and digits), else nullopt.
std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// quota / period as CPUs when both are positive numbers.
std::optional<double> QuotaCpus(std::string_view quota, std::string_view period) {
  const std::optional<int64_t> q = ParseInt(Trim(quota)), p = ParseInt(Trim(period));
  if (!q.has_value() || !p.has_value() || *q <= 0 || *p <= 0) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(*p);
}

// CPUs in the calling thread's affinity mask (the process's, as set before it started threads),
// or 0 if it cannot be read. The mask grows until the kernel's fits (hosts beyond 1,024 CPUs).
int AffinityCpus() {
  for (int cpus = 1024; cpus <= (1 << 16); cpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (set == nullptr) return 0;
    const size_t size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(size, set);
    const int got = sched_getaffinity(0, size, set);
    const int count = got == 0 ? CPU_COUNT_S(size, set) : 0;
    const int error = errno;
    CPU_FREE(set);
    if (got == 0) return count;
    if (error != EINVAL) return 0;
  }
  return 0;
}

// The folders from `mount` + `path` up to `mount` itself, deepest first: a limit set on any of
// them applies to the process. A path that leaves the mount ("/.." when the process sits outside
// a cgroup namespace's root) gives the mount alone.
std::vector<std::string> FoldersUp(const std::string& mount, std::string_view path) {
  std::vector<std::string_view> parts;
  for (std::string_view part : Pieces(path, '/')) {
    if (part == "..") return {mount};
    parts.push_back(part);
  }
  std::vector<std::string> folders;
  for (size_t n = parts.size() + 1; n-- > 0;) {
    std::string folder = mount;
    for (size_t i = 0; i < n; ++i) folder.append("/").append(parts[i]);
    folders.push_back(std::move(folder));
  }
  return folders;
}

// Keeps the smaller of `budget`'s quota and `cpus` (read from `file`).
void TakeTighter(CpuBudget& budget, std::optional<double> cpus, const std::string& file) {
  if (!cpus.has_value()) return;
  if (!budget.quota_cpus.has_value() || *cpus < *budget.quota_cpus) {
    budget.quota_cpus = cpus;
    budget.quota_file = file;
  }
}

}  // namespace

std::optional<double> ParseCpuMax(std::string_view text) {
  const std::vector<std::string_view> fields = Pieces(Trim(text), ' ');
  if (fields.size() != 2) return std::nullopt;  // "max 100000": no limit, and not a number
  return QuotaCpus(fields[0], fields[1]);
}

std::optional<double> ParseCfsQuota(std::string_view quota_us, std::string_view period_us) {
  return QuotaCpus(quota_us, period_us);  // a quota of -1: none
}

std::optional<std::string> CgroupPath(std::string_view proc_self_cgroup,
                                      std::string_view v1_controller) {
  for (std::string_view line : Pieces(proc_self_cgroup, '\n')) {
    // hierarchy-id:controllers:path (the path may itself hold ':')
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, first);
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(Trim(line.substr(second + 1)));
    if (v1_controller.empty()) {
      if (id == "0" && controllers.empty()) return path;
      continue;
    }
    for (std::string_view controller : Pieces(controllers, ',')) {
      if (controller == v1_controller) return path;
    }
  }
  return std::nullopt;
}

int UsableCpus(int affinity_cpus, std::optional<double> quota_cpus) {
  int usable = std::max(1, affinity_cpus);
  if (quota_cpus.has_value()) {
    // A hair under a whole number (1.99999 from a period that does not divide) still counts as it.
    const double cpus = std::ceil(*quota_cpus - 1e-6);
    usable = std::min(usable, static_cast<int>(std::clamp(cpus, 1.0, 1e6)));
  }
  return std::max(1, usable);
}

CpuBudget ReadCpuBudget(const std::string& root) {
  CpuBudget budget;
  budget.online_cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int affinity = AffinityCpus();
  budget.affinity_cpus = affinity > 0 ? affinity : budget.online_cpus;
  if (absl::StatusOr<std::string> cgroups = ReadFile(root + "/proc/self/cgroup"); cgroups.ok()) {
    // cgroup v2, the unified hierarchy (also present beside v1 on hybrid hosts).
    if (std::optional<std::string> path = CgroupPath(*cgroups); path.has_value()) {
      for (const std::string& folder : FoldersUp(root + "/sys/fs/cgroup", *path)) {
        const std::string file = folder + "/cpu.max";
        if (absl::StatusOr<std::string> text = ReadFile(file); text.ok()) {
          TakeTighter(budget, ParseCpuMax(*text), file);
        }
      }
    }
    // cgroup v1's cpu controller, where mounted (a v2 quota, if any, already counted).
    if (std::optional<std::string> path = CgroupPath(*cgroups, "cpu"); path.has_value()) {
      for (const char* mount : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
        bool read_any = false;
        for (const std::string& folder : FoldersUp(root + mount, *path)) {
          absl::StatusOr<std::string> quota = ReadFile(folder + "/cpu.cfs_quota_us");
          absl::StatusOr<std::string> period = ReadFile(folder + "/cpu.cfs_period_us");
          if (!quota.ok() || !period.ok()) continue;
          read_any = true;
          TakeTighter(budget, ParseCfsQuota(*quota, *period), folder + "/cpu.cfs_quota_us");
        }
        if (read_any) break;  // the two names are often one mount and its link
      }
    }
  }
  budget.usable_cpus = UsableCpus(budget.affinity_cpus, budget.quota_cpus);
  return budget;
}

std::string CpuBudget::ToString() const {
  std::string quota = "no cgroup CPU quota";
  if (quota_cpus.has_value()) {
    quota =
        StrCat("cgroup quota ", std::round(*quota_cpus * 100.0) / 100.0, " CPUs in ", quota_file);
  }
  return StrCat(usable_cpus, " (affinity ", affinity_cpus, " of ", online_cpus, " online, ", quota,
                ")");
}

}  // namespace quiver
