#include "app/fidelity_gate.h"

#include <malloc.h>

#include <algorithm>

#include "common/status.h"
#include "common/strings.h"
#include "engine/runtime/fidelity.h"
#include "spdlog/spdlog.h"
#include "tokenizer/tokenizer.h"

namespace quiver::app {

bool NeedsFidelityGate(const engine::EngineOptions& options) {
  return options.device.device != engine::Device::kCpu ||
         options.quantize != engine::ops::WeightPrecision::kF32;
}

absl::StatusOr<FidelityReference> FidelityReference::Compute(const std::string& model_dir,
                                                             const engine::EngineOptions& options) {
  FidelityReference r;
  {
    // The same folder on the CPU in f32, never padded.
    engine::EngineOptions cpu_options;
    cpu_options.model = options.model;
    cpu_options.pooling = options.pooling;  // the same embeddings as the engine under test
    auto reference = engine::Engine::Load(model_dir, cpu_options);
    if (!reference.ok()) {
      return WithContext(reference.status(), "fidelity gate: loading the CPU reference engine");
    }
    auto tok = tokenizer::Tokenizer::FromFile((*reference)->folder().tokenizer_path);
    if (!tok.ok()) return tok.status();
    // Short enough for any model and any batch limit: 14 texts of at most 256 tokens.
    const int64_t max_tokens =
        std::min<int64_t>({256, (*reference)->max_input_tokens(), options.max_batch_tokens / 14});
    tokenizer::EncodeOptions encode;
    encode.truncation =
        tokenizer::Truncation{static_cast<size_t>(std::max<int64_t>(2, max_tokens))};
    tokenizer::Encoding enc;
    for (const std::string& text : FidelityTexts()) {
      if (absl::Status s = (*tok)->Encode(text, encode, &enc); !s.ok()) return s;
      std::vector<int32_t> ids(enc.ids.begin(), enc.ids.end());
      r.batch.Add(ids);
      if (r.batch.num_seqs() >= options.max_batch_seqs) break;
    }
    absl::StatusOr<engine::EngineOutput> want = (*reference)->Run(r.batch);
    if (!want.ok()) return WithContext(want.status(), "fidelity gate: the CPU reference");
    r.want = *std::move(want);
  }
  spdlog::info(
      "fidelity gate: the CPU f32 reference ran its {} tokens and was unloaded, before "
      "the engine under test loads",
      r.batch.num_tokens());
  // What the reference held goes back to the system: glibc keeps freed blocks below its mmap
  // threshold in the heap, which kept an int8 all-MiniLM-L6-v2 server 46 MB above its f32 one.
  malloc_trim(0);
  return r;
}

absl::Status CheckFidelity(engine::Engine& engine,
                           const absl::StatusOr<FidelityReference>& reference,
                           double min_int8_cosine) {
  if (!NeedsFidelityGate(engine.options())) return absl::OkStatus();
  if (!reference.ok()) return reference.status();
  const engine::ops::WeightPrecision precision = engine.options().quantize;
  const bool int8 = precision == engine::ops::WeightPrecision::kInt8;
  // bf16 weights on the CPU are held to the GPU's bound (it computes in bf16 too).
  const std::string what = precision != engine::ops::WeightPrecision::kF32
                               ? StrCat(engine.options().device.ToString(), " with ",
                                        engine::ops::WeightPrecisionName(precision), " weights")
                               : engine.options().device.ToString();
  const engine::RaggedBatch& batch = reference->batch;
  // Three runs: with lazy graphs the first is eager, the second captures, the third replays; the
  // graph runs must give the eager run's bytes exactly (same bucket, same kernels).
  absl::StatusOr<engine::EngineOutput> got = engine.Run(batch);
  if (!got.ok()) return WithContext(got.status(), "fidelity gate: the device engine");
  for (const char* run : {"second", "third"}) {
    absl::StatusOr<engine::EngineOutput> again = engine.Run(batch);
    if (!again.ok()) return WithContext(again.status(), "fidelity gate: the device engine");
    if (again->data != got->data) {
      return absl::FailedPreconditionError(
          StrCat("fidelity gate on ", what, ": the ", run,
                 " run of the same batch (a CUDA graph's capture or replay) differs from the "
                 "first (eager) in its bytes"));
    }
  }
  const engine::FidelityResult r = engine::CompareForFidelity(
      *got, reference->want, engine.is_scorer(), int8 ? min_int8_cosine : 0.999);
  const engine::GraphStats graphs = engine.stats().graphs;
  const std::string line = StrCat("fidelity gate on ", what, ": ", batch.num_tokens(), " tokens, ",
                                  r.message, "; three runs bit-equal (graphs: ", graphs.captures,
                                  " captured, ", graphs.replays, " replayed)");
  if (!r.ok) return absl::FailedPreconditionError(line);
  spdlog::info("{}", line);
  return absl::OkStatus();
}

absl::Status CheckFidelity(engine::Engine& engine, const std::string& model_dir,
                           double min_int8_cosine) {
  if (!NeedsFidelityGate(engine.options())) return absl::OkStatus();
  return CheckFidelity(engine, FidelityReference::Compute(model_dir, engine.options()),
                       min_int8_cosine);
}

}  // namespace quiver::app
