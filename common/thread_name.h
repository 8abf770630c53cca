// Names the calling thread as `top -H`, `ps -L`, perf, gdb and /proc/PID/task/*/comm show it
// (Linux keeps 15 bytes: longer names are cut there). Every long-lived thread of quiver is
// named "quiver-<role>[-N]" so that a profile or a hung process's stacks read by role.
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace quiver {

inline void SetThreadName(std::string_view name) {
  std::string cut(name.substr(0, 15));
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace quiver
