// FlashInfer FA2 ragged prefill, head_dim 64 (see attention_flashinfer_fa2.cuh).
#include "engine/kernels/cuda/attention_flashinfer_fa2.cuh"

namespace quiver::engine::cuda::flashinfer_internal {

absl::Status RunFa2HeadDim64(const RaggedAttentionArgs& args,
                             const flashinfer::PrefillPlanInfo& plan, const Workspace& workspace,
                             cudaStream_t stream) {
  return RunFa2<64>(args, plan, workspace, stream);
}

}  // namespace quiver::engine::cuda::flashinfer_internal
