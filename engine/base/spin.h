// Polling for a condition that another thread is about to make true, without a system call: the
// thread pool's workers between the kernels of a forward pass, and the engine's compute thread
// between requests (EngineOptions::spin_wait). A thread that sleeps instead pays a wake-up
// through the kernel, and on a virtual machine its vCPU may halt: the next forward pass on it
// then runs slower for a while (docs/engine.md, "The compute thread between requests").
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace quiver::engine {

// A pause between two polls: on x86, `pause` leaves the core's resources to a hyperthread
// sibling and ends the loop without a memory-order misprediction.
inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Polls done() until it holds or `deadline` passed; whether it holds.
template <typename Done>
bool SpinUntil(std::chrono::steady_clock::time_point deadline, Done done) {
  while (!done()) {
    for (int i = 0; i < 64; ++i) CpuRelax();
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
  return true;
}

// SpinUntil for longer waits (the compute thread between requests): the thread offers its CPU
// to any other runnable thread every 50 µs (std::this_thread::yield, which returns at once when
// there is none), so that where threads outnumber CPUs the polling delays no one; the CPU
// itself stays busy either way.
template <typename Done>
bool PollUntil(std::chrono::steady_clock::time_point deadline, Done done) {
  constexpr std::chrono::microseconds kStretch{50};
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (SpinUntil(std::min(deadline, now + kStretch), done)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
}

}  // namespace quiver::engine
