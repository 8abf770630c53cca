// FlashInfer FA3 (Hopper) ragged prefill, head_dim 64 (see attention_flashinfer_fa3.cuh).
#include "engine/kernels/cuda/attention_flashinfer_fa3.cuh"

namespace quiver::engine::cuda::flashinfer_internal {

absl::Status RunFa3HeadDim64(const RaggedAttentionArgs& args,
                             const flashinfer::PrefillPlanSM90Info& plan,
                             const Workspace& workspace, cudaStream_t stream) {
  return RunFa3<64>(args, plan, workspace, stream);
}

}  // namespace quiver::engine::cuda::flashinfer_internal
