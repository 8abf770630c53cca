#include "common/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "spdlog/spdlog.h"

namespace quiver {
namespace {

int g_pipe[2] = {-1, -1};
int g_signal_fd = -1;
int g_wake_fd = -1;  // tells the start-up watcher that start-up is over
// The start-up watcher, until WaitForStopSignal joins it. A pointer, never destroyed unjoined: a
// command that fails during start-up returns without joining it, and a joinable std::thread
// destroyed at exit would end the process with std::terminate.
std::thread* g_watcher;

void OnStopSignal(int signal_number) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  (void)!write(g_pipe[1], &byte, 1);  // async-signal-safe
  errno = saved;
}

// Waits for a stop signal (from the signalfd or the handler's pipe) or, where wake_fd >= 0, for a
// write to it: the signal's number, 0 for the wake-up, -1 where waiting failed.
int NextStopSignal(int wake_fd) {
  // A negative descriptor (no pipe, no signalfd, no wake-up) is ignored by poll.
  pollfd fds[3] = {{g_pipe[0], POLLIN, 0}, {g_signal_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  while (true) {
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if ((fds[1].revents & POLLIN) != 0) {
      signalfd_siginfo info{};
      if (read(g_signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
        return static_cast<int>(info.ssi_signo);
      }
    }
    if (fds[0].revents != 0) {
      unsigned char byte = 0;
      const ssize_t n = read(g_pipe[0], &byte, 1);
      if (n == 1) return byte;
      if (n < 0 && errno == EINTR) continue;
      return -1;
    }
    if (fds[2].revents != 0) return 0;
  }
}

const char* SignalName(int signal_number) {
  return signal_number > 0 ? strsignal(signal_number) : "stop";
}

}  // namespace

void CatchStopSignals(std::string command) {
  if (g_pipe[0] >= 0 || g_signal_fd >= 0) return;
  if (pipe2(g_pipe, O_CLOEXEC) == 0) {
    struct sigaction action {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
  }
  // Blocked in this thread and so in every thread it starts from now on, and read from a
  // signalfd: the kernel then keeps the signal pending for the thread that waits instead of
  // interrupting whichever thread it picks (a ThreadSanitizer build runs a handler only when
  // that thread next makes an intercepted call, which a gRPC poller may never do).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  if (pthread_sigmask(SIG_BLOCK, &stop, nullptr) == 0) {
    g_signal_fd = signalfd(-1, &stop, SFD_CLOEXEC);
    // Without a signalfd, the handler (and without a pipe either, the signals' default action).
    if (g_signal_fd < 0) pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
  }
  if (g_pipe[0] < 0 && g_signal_fd < 0) return;
  // Start-up (loading a model, warming up, waiting for workers) has admitted nothing, so there is
  // nothing to drain: a stop signal then ends the process at once rather than when start-up ends.
  g_wake_fd = eventfd(0, EFD_CLOEXEC);
  if (g_wake_fd < 0) return;
  g_watcher = new std::thread([command = std::move(command)] {
    const int signal_number = NextStopSignal(g_wake_fd);
    if (signal_number == 0) return;  // start-up is over
    spdlog::info("{}: {} received during start-up, stopping", command, SignalName(signal_number));
    std::_Exit(0);
  });
}

const char* WaitForStopSignal() {
  if (g_watcher != nullptr) {  // start-up is over: the signals are this thread's to read now
    const uint64_t one = 1;
    (void)!write(g_wake_fd, &one, sizeof(one));
    g_watcher->join();
    delete g_watcher;
    g_watcher = nullptr;
  }
  if (g_pipe[0] < 0 && g_signal_fd < 0) return "stop";  // nothing to wait on
  return SignalName(NextStopSignal(-1));
}

}  // namespace quiver
