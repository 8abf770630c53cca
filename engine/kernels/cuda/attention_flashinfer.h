// FlashInfer's ragged prefill kernels (flashinfer-python 0.7.2.post1, headers from
// scripts/fetch-flashinfer.sh) behind quiver's own interface, so that no other file sees a
// FlashInfer type: the FA2 kernel (attention/prefill.cuh, mma.sync; head_dim 64 and 128: this
// FlashInfer prunes FA2 below 64) and the Hopper FA3 kernel (attention/hopper/prefill_sm90.cuh,
// wgmma + TMA, sm_90a; head_dim 64 and 128). bf16 q/k/v/out, causal or not, GQA, strided views
// (FA2 writes a dense out: out_stride must be num_heads · head_dim).
//
// Plan and run are split as in FlashInfer: Plan() runs on the host for every batch (never inside
// a CUDA-graph capture) from the batch's host cu_seqlens, writes the tile schedule into the
// page-locked buffer of `slot` and enqueues its copy into the one device schedule buffer on
// `stream`; Run() enqueues the kernels (graph-capturable: every per-batch value reaches the
// kernels through device buffers). A slot's page-locked buffer must not be rewritten before the
// copy enqueued from it has executed: the caller plans slot s only after slot s's previous batch
// completed (its event), which is what the engine's slot ring guarantees (runtime/slot_ring.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/kernels/cuda/attention.h"

namespace quiver::engine::cuda {

enum class FlashInferKernel { kFa2, kFa3 };
std::string_view FlashInferKernelName(
    FlashInferKernel kernel);  // "flashinfer_fa2", "flashinfer_fa3"

// Whether this build has the (kernel, head_dim) instantiation.
bool FlashInferSupports(FlashInferKernel kernel, int head_dim);

struct FlashInferConfig {
  FlashInferKernel kernel = FlashInferKernel::kFa3;
  int head_dim = 128;
  int num_heads = 0;
  int num_kv_heads = 0;
  int64_t max_tokens = 0;  // the largest batch (bucket) this instance will plan
  int64_t max_seqs = 0;
  int num_slots = 2;        // page-locked plan buffers, one per batch in flight
  bool cuda_graph = false;  // plan fixed grids per bucket (FlashInfer's enable_cuda_graph)
};

class FlashInferPrefill {
 public:
  virtual ~FlashInferPrefill() = default;
  // Allocates the device schedule buffer, the float workspace and num_slots page-locked buffers,
  // sized for (max_tokens, max_seqs); needs a device.
  static absl::StatusOr<std::unique_ptr<FlashInferPrefill>> Create(const FlashInferConfig& config);

  virtual const FlashInferConfig& config() const = 0;
  // host_cu_seqlens [num_seqs + 1] in host memory.
  virtual absl::Status Plan(int slot, const int32_t* host_cu_seqlens, int64_t num_seqs, bool causal,
                            cudaStream_t stream) = 0;
  // Runs the batch planned last (args.cu_seqlens is the device copy of the planned cu_seqlens;
  // args.causal must match the plan).
  virtual absl::Status Run(const RaggedAttentionArgs& args, cudaStream_t stream) = 0;
  // Device bytes held (schedule + workspace).
  virtual size_t device_bytes() const = 0;
};

}  // namespace quiver::engine::cuda
