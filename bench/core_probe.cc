// How much of its cores this process gets right now: the f32 GEMM kernel (PackedGemm, gemm.h) on
// weights that stay in L2, timed on each CPU alone in turn, then on all of them at once, each
// thread pinned to its CPU. On a virtual machine whose vCPUs are hyperthreads of cores shared with
// other tenants, an FMA-bound kernel gets a part of its core that changes within seconds: on the
// Xeon of docs/benchmarks.md this kernel ran at 150-160 GFLOP/s on a CPU at some moments and at
// 80-100 at others, alone or with the other CPU busy too (a pure chain of dependent FMAs, which
// leaves the units idle, ran at the same rate throughout: the units were taken, not the time).
// bench/int8_peers.py runs this before every timed block, so that each comparison can say in
// which state the host was.
//
//   quiver_core_probe [--threads 2] [--ms 60]
//
// Prints one JSON line: the CPUs, each one's GFLOP/s alone and all together, and "share", the sum
// together over the sum alone (1: each CPU's core to itself; near 1 / threads: this process's
// threads take turns on one core's units).
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/kernels/cpu/gemm.h"

namespace {

using quiver::engine::cpu::PackedGemm;
using quiver::engine::cpu::PackedWeights;

// A 112 x 384 by 384 x 256 product (the shape of a feed-forward slice): weights 384 KB, in L2.
constexpr int64_t kRows = 112, kDepth = 384, kCols = 256;
constexpr double kFlops = 2.0 * kRows * kDepth * kCols;

struct Work {
  std::vector<float> x, y;
  Work() : x(kRows * kDepth, 0.001f), y(kRows * kCols) {}
};

bool Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// GFLOP/s of the kernel on this thread for `ms` milliseconds.
double Run(const PackedWeights& w, Work& work, int ms) {
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::milliseconds(ms);
  int64_t calls = 0;
  auto now = start;
  while (now < end) {
    PackedGemm(work.x.data(), kDepth, w, nullptr, work.y.data(), kCols, kRows, 0, kCols);
    ++calls;
    now = std::chrono::steady_clock::now();
  }
  return static_cast<double>(calls) * kFlops / std::chrono::duration<double>(now - start).count() *
         1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, ms = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--threads" && value >= 1 && value <= 256) {
      threads = value;
    } else if (flag == "--ms" && value >= 1 && value <= 10000) {
      ms = value;
    } else {
      std::fprintf(stderr, "usage: quiver_core_probe [--threads N] [--ms MS]\n");
      return 2;
    }
  }
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    std::perror("sched_getaffinity");
    return 1;
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && static_cast<int>(cpus.size()) < threads; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  const std::vector<float> weights(kCols * kDepth, 0.001f);
  const PackedWeights w(weights.data(), kCols, kDepth);
  const int n = static_cast<int>(cpus.size());
  std::vector<Work> work(n);
  std::vector<double> alone(n), together(n);
  std::atomic<bool> pinned{true};
  for (int i = 0; i < n; ++i) {  // each alone, in turn
    std::thread([&, i] {
      if (!Pin(cpus[i])) pinned = false;
      Run(w, work[i], 5);  // warm
      alone[i] = Run(w, work[i], ms);
    }).join();
  }
  std::atomic<int> ready{0};
  std::vector<std::thread> all;
  for (int i = 0; i < n; ++i) {
    all.emplace_back([&, i] {
      const bool ok = Pin(cpus[i]);
      Run(w, work[i], 5);
      ready.fetch_add(1);
      while (ready.load() < n) {
      }
      together[i] = Run(w, work[i], ms);
      if (!ok) pinned = false;
    });
  }
  for (std::thread& t : all) t.join();
  double sum_alone = 0, sum_together = 0;
  std::string cpu_list, alone_list, together_list;
  for (int i = 0; i < n; ++i) {
    sum_alone += alone[i];
    sum_together += together[i];
    const char* sep = i ? ", " : "";
    cpu_list += sep + std::to_string(cpus[i]);
    char a[32], t[32];
    std::snprintf(a, sizeof(a), "%s%.1f", sep, alone[i]);
    std::snprintf(t, sizeof(t), "%s%.1f", sep, together[i]);
    alone_list += a;
    together_list += t;
  }
  std::printf(
      "{\"cpus\": [%s], \"pinned\": %s, \"ms\": %d, \"alone_gflops\": [%s], "
      "\"together_gflops\": [%s], \"share\": %.3f}\n",
      cpu_list.c_str(), pinned.load() ? "true" : "false", ms, alone_list.c_str(),
      together_list.c_str(), sum_alone > 0 ? sum_together / sum_alone : 0.0);
  return 0;
}
