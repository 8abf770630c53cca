// The GPU runtime (runtime/device_runtime.h) for builds with QUIVER_WITH_CUDA; this header has
// no CUDA type, so the engine includes it in every build and a CPU-only build gets the
// UNAVAILABLE answers of cuda_runtime_none.cc.
//
// Per engine: one non-blocking stream (inputs, forward, pooling, the copy back and each slot's
// event, in that order), one device block of per-batch inputs (runtime/device_inputs.h) at fixed
// addresses, the model's workspace sized once at load and frozen (CUDA graphs hold its
// addresses), and 2-3 slots, each with pinned input staging, a pinned output buffer and a
// blocking-sync event. A slot is reused only after its event completed (base/slot_ring.h). The
// attention backends keep their own page-locked plan buffers per slot (FlashInfer).
//
// Forward passes of batches padded to their bucket go through the graph cache
// (runtime/graph_cache.h): eager on a key's first use, captured on the second, replayed after;
// batches above graph_max_tokens, with a backend that is not Capturable, or with graphs off run
// eagerly. Pooling (or scoring) runs after the graph, eagerly, into a persistent f32 buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/runtime/device_runtime.h"

namespace quiver::engine {

struct CudaRuntimeOptions {
  int device = 0;
  GraphMode graphs = GraphMode::kLazy;
  int64_t max_graphs = 1024;
  int64_t graph_max_tokens = 16384;  // larger batches run eagerly
  // The largest batch: inputs, the pooled-row buffer and the pinned buffers are sized for its
  // bucket (BucketFor), once.
  int64_t max_tokens = 16384;
  int64_t max_seqs = 512;
  int64_t max_rows = 16384;  // rows to pool (late-chunking spans may outnumber sequences)
  int64_t row_width = 0;     // floats per answer row (hidden size or num_labels)
  int slots = 2;
};

struct CudaMemory {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

// Makes `device` current on the calling thread, checking that it exists: UNAVAILABLE naming why
// not (not compiled with CUDA, no driver, no such device).
absl::Status CudaUseDevice(int device);
// The current device's memory (cudaMemGetInfo).
absl::StatusOr<CudaMemory> CudaMemoryInfo();

// The runtime for `model` (whose weights are on `options.device` already); model_ws and own_ws
// are CUDA workspaces the runtime alone uses from now on.
absl::StatusOr<std::unique_ptr<DeviceRuntime>> MakeCudaRuntime(const CudaRuntimeOptions& options,
                                                               const Model& model,
                                                               Workspace& model_ws,
                                                               Workspace& own_ws);

}  // namespace quiver::engine
