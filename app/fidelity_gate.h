// The fidelity gate of a GPU engine or an int8 CPU engine, run before a worker or `quiver serve`
// says it is ready: the fixed texts below, tokenized with the model's tokenizer, go through the
// engine and a CPU f32 engine loaded from the same folder; readiness is refused (the numbers
// logged) when a cosine falls below 0.999 on a GPU (engine/runtime/fidelity.h) or below
// `min_int8_cosine` for int8 weights (--min-int8-cosine, 0.99 by default; bf16 weights on the
// CPU are held to 0.999, as a GPU), or when running the
// same batch again (with lazy graphs: captured, then replayed) does not give the first run's
// bytes. A CPU f32 engine needs no gate.
// Composition code: it joins the tokenizer and the engine, which never see each other.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"

namespace quiver::app {

// Queries and document openings from corpus/ in several languages (fidelity_texts.cc).
const std::vector<std::string>& FidelityTexts();

// OK (logging the numbers) when `engine` runs on the CPU or agrees with the CPU f32 engine;
// FAILED_PRECONDITION with the numbers when it does not; another error when the check could
// not run (the tokenizer or the CPU engine failed to load).
absl::Status CheckFidelity(engine::Engine& engine, const std::string& model_dir,
                           double min_int8_cosine = 0.99);

}  // namespace quiver::app
