// Orderly shutdown on SIGTERM / SIGINT. A handler writes the signal to a pipe and the main thread
// waits on it. (Blocking the signals in every thread is not enough: libraries such as OpenBLAS
// start threads before main, and a process-directed signal may land on one of them.)
#pragma once

namespace quiver {

// Installs the handler for SIGTERM and SIGINT. Call once, early in main's command.
void CatchStopSignals();

// Waits until SIGTERM or SIGINT arrives; returns the signal's name.
const char* WaitForStopSignal();

}  // namespace quiver
