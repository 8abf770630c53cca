// Private to attention_flashinfer*.cu: the per-(kernel, head_dim) entry points that the
// instantiation translation units define (attention_flashinfer_fa{2,3}_d<head_dim>.cu), so that
// attention_flashinfer.cu never compiles a FlashInfer kernel template and no unit has to compile
// more than one head_dim (each FA3 one alone needs gigabytes of compiler memory). FA2 has no
// head_dim 32: FlashInfer 0.7.2.post1's KernelTraits::IsInvalid() prunes every FA2
// configuration below 64, so an instantiation compiles no kernel (quiver's own varlen kernel
// covers 32).
//
// Every function enqueues the batch `plan` describes on `stream` and returns INTERNAL naming
// the FlashInfer call for a launch error or an exception FlashInfer threw. The arguments are
// checked by FlashInferPrefill::Run (dtype bf16, shapes matching the plan, strides aligned).
#pragma once

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "engine/kernels/cuda/attention.h"

// flashinfer/attention/scheduler.cuh; declared here so that this header stays FlashInfer-free.
namespace flashinfer {
struct PrefillPlanInfo;
struct PrefillPlanSM90Info;
}  // namespace flashinfer

namespace quiver::engine::cuda::flashinfer_internal {

// The device buffers a plan addresses by byte offset.
struct Workspace {
  void* schedule = nullptr;  // FlashInfer's int workspace: the tile schedule Plan copied in
  void* partials = nullptr;  // FlashInfer's float workspace: FA2 split-kv partial outputs
};

absl::Status RunFa2HeadDim64(const RaggedAttentionArgs& args,
                             const flashinfer::PrefillPlanInfo& plan, const Workspace& workspace,
                             cudaStream_t stream);
absl::Status RunFa2HeadDim128(const RaggedAttentionArgs& args,
                              const flashinfer::PrefillPlanInfo& plan, const Workspace& workspace,
                              cudaStream_t stream);

absl::Status RunFa3HeadDim64(const RaggedAttentionArgs& args,
                             const flashinfer::PrefillPlanSM90Info& plan,
                             const Workspace& workspace, cudaStream_t stream);
absl::Status RunFa3HeadDim128(const RaggedAttentionArgs& args,
                              const flashinfer::PrefillPlanSM90Info& plan,
                              const Workspace& workspace, cudaStream_t stream);

}  // namespace quiver::engine::cuda::flashinfer_internal
