// Orderly shutdown on SIGTERM / SIGINT. The signals are blocked in the thread that calls
// CatchStopSignals, and so in every thread started after it, and read from a signalfd; a handler
// also writes them to a pipe, for a thread that started earlier with them unblocked (libraries
// such as OpenBLAS start threads before main, and a process-directed signal may land on one of
// them). WaitForStopSignal waits on both.
#pragma once

#include <string>

namespace quiver {

// Blocks SIGTERM and SIGINT for the signalfd and installs the handler. Call once, early in
// main's command, before it starts threads, and wait on the same thread. Until that thread calls
// WaitForStopSignal (start-up: loading, warming up, finding workers), a stop signal is logged
// ("<command>: <signal> received during start-up, stopping"), from a thread of its own, and ends
// the process at once with status 0: nothing has been admitted yet, so there is nothing to drain.
void CatchStopSignals(std::string command);

// Waits until SIGTERM or SIGINT arrives; returns the signal's name.
const char* WaitForStopSignal();

}  // namespace quiver
