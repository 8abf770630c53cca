#include "common/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

namespace quiver {
namespace {

int g_pipe[2] = {-1, -1};
int g_signal_fd = -1;

void OnStopSignal(int signal_number) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  (void)!write(g_pipe[1], &byte, 1);  // async-signal-safe
  errno = saved;
}

}  // namespace

void CatchStopSignals() {
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
  // signalfd: the kernel then keeps the signal pending for WaitForStopSignal instead of
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
}

const char* WaitForStopSignal() {
  if (g_pipe[0] < 0 && g_signal_fd < 0) return "stop";  // nothing to wait on
  pollfd fds[2] = {{g_pipe[0], POLLIN, 0}, {g_signal_fd, POLLIN, 0}};
  while (true) {
    // A negative descriptor (no pipe, or no signalfd) is ignored by poll.
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return "stop";  // poll failed; treat as a stop request
    }
    if ((fds[1].revents & POLLIN) != 0) {
      signalfd_siginfo info{};
      if (read(g_signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
        return strsignal(static_cast<int>(info.ssi_signo));
      }
    }
    if (fds[0].revents != 0) {
      unsigned char byte = 0;
      const ssize_t n = read(g_pipe[0], &byte, 1);
      if (n == 1) return strsignal(byte);
      if (n < 0 && errno == EINTR) continue;
      return "stop";  // the pipe failed; treat as a stop request
    }
  }
}

}  // namespace quiver
