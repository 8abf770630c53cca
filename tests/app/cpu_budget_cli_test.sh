#!/usr/bin/env bash
# `quiver version` names the CPUs the process may use (common/cpu_budget.h), which the compute
# threads default to: the affinity mask (taskset), and a real cgroup CPU quota where this host
# lets the test make a cgroup (root with cgroup v1's cpu controller, or v2 with cpu.max; else
# that part says it is skipped).
#   cpu_budget_cli_test.sh QUIVER
set -euo pipefail
quiver=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

online=$(nproc --all)
line=$(taskset -c 0 "$quiver" version | grep '^cpus usable: ') || fail "no 'cpus usable' line"
echo "pinned to CPU 0: $line"
[[ $line == "cpus usable: 1 (affinity 1 of $online online"* ]] || fail "pinned: $line"

line=$("$quiver" version | grep '^cpus usable: ')
echo "as started: $line"
[[ $line == *"of $online online"* ]] || fail "unpinned: $line"

# A cgroup with a quota of half a CPU: the budget is 1 whatever the affinity.
group=quiver-cpu-budget-test-$$
dir=
trap '[[ -n $dir ]] && rmdir "$dir" 2>/dev/null; true' EXIT
if [[ -w /sys/fs/cgroup/cpu/cgroup.procs ]] && mkdir "/sys/fs/cgroup/cpu/$group" 2>/dev/null; then
  dir=/sys/fs/cgroup/cpu/$group
  echo 100000 > "$dir/cpu.cfs_period_us"
  echo 50000 > "$dir/cpu.cfs_quota_us"
  quota_file=$dir/cpu.cfs_quota_us
elif [[ -w /sys/fs/cgroup/cgroup.procs ]] && mkdir "/sys/fs/cgroup/$group" 2>/dev/null; then
  dir=/sys/fs/cgroup/$group
  if [[ ! -e $dir/cpu.max ]]; then
    echo "SKIPPED the cgroup quota part: cgroup v2 here does not hand its cpu controller down"
    exit 0
  fi
  echo "50000 100000" > "$dir/cpu.max"
  quota_file=$dir/cpu.max
else
  echo "SKIPPED the cgroup quota part: this host does not let the test make a cgroup with a CPU quota"
  exit 0
fi
line=$(bash -c "echo \$\$ > '$dir/cgroup.procs' && exec '$quiver' version" | grep '^cpus usable: ')
echo "in a cgroup with 0.5 CPUs: $line"
[[ $line == "cpus usable: 1 (affinity "*"cgroup quota 0.5 CPUs in $quota_file)" ]] ||
  fail "quota: $line"
echo PASS
