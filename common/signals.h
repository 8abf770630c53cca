// Orderly shutdown on SIGTERM / SIGINT without signal handlers: block both in every thread
// (call before starting any thread), then wait for one on the main thread.
#pragma once

namespace quiver {

// Blocks SIGTERM and SIGINT in the calling thread and in every thread it starts afterwards.
void BlockStopSignals();

// Waits until SIGTERM or SIGINT arrives (they must be blocked); returns the signal's name.
const char* WaitForStopSignal();

}  // namespace quiver
