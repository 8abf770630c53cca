#include "common/signals.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

namespace quiver {
namespace {

int g_pipe[2] = {-1, -1};

void OnStopSignal(int signal_number) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  (void)!write(g_pipe[1], &byte, 1);  // async-signal-safe
  errno = saved;
}

}  // namespace

void CatchStopSignals() {
  if (g_pipe[0] >= 0) return;
  if (pipe2(g_pipe, O_CLOEXEC) != 0) return;
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

const char* WaitForStopSignal() {
  unsigned char byte = 0;
  while (true) {
    const ssize_t n = read(g_pipe[0], &byte, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return "stop";  // the pipe failed; treat as a stop request
  }
  return strsignal(byte);
}

}  // namespace quiver
