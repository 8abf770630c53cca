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

// Whether an engine loaded with `options` gets the gate: a GPU engine or reduced-precision
// weights.
bool NeedsFidelityGate(const engine::EngineOptions& options);

// The gate's reference side: the texts tokenized and cut to what an engine with the options given
// admits (at most 256 tokens each, 14 of them within max_batch_tokens and max_batch_seqs), and
// the outputs of a CPU f32 engine loaded from the folder for them. That engine is unloaded (and
// its memory handed back) before this returns: computed before the engine under test is loaded,
// the two never hold memory at once (an int8 all-MiniLM-L6-v2 server peaked 52 MB above its
// ready size with both loaded; a model's whole f32 weights for larger ones).
struct FidelityReference {
  static absl::StatusOr<FidelityReference> Compute(const std::string& model_dir,
                                                   const engine::EngineOptions& options);
  engine::RaggedBatch batch;
  engine::EngineOutput want;
};

// OK (logging the numbers) when `engine` runs on the CPU in f32 or agrees with the reference;
// FAILED_PRECONDITION with the numbers when it does not; the reference's own error when it could
// not be computed (the tokenizer or the CPU engine failed to load).
absl::Status CheckFidelity(engine::Engine& engine,
                           const absl::StatusOr<FidelityReference>& reference,
                           double min_int8_cosine = 0.99);

// Both steps for an engine already loaded (the reference engine then loads beside it).
absl::Status CheckFidelity(engine::Engine& engine, const std::string& model_dir,
                           double min_int8_cosine = 0.99);

}  // namespace quiver::app
