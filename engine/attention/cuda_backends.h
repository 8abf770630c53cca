// The CUDA attention backends (builds with QUIVER_WITH_CUDA only), registered in registry.cc:
//   cuda_varlen      quiver's own varlen flash attention (kernels/cuda/attention.h): head_dim
//                    32, 64, 128; the fallback that needs no FlashInfer instantiation
//   cuda_reference   the slow exact-max kernel the others are tested against
//   flashinfer_fa2   FlashInfer's mma.sync ragged prefill (head_dim 64, 128)
//   flashinfer_fa3   FlashInfer's Hopper wgmma/TMA ragged prefill (head_dim 64, 128; sm_90a)
// All run bf16 q/k/v/out on ctx.cuda's stream and read plan.device_cu_seqlens.
#pragma once

#include <memory>

#include "engine/attention/backend.h"

namespace quiver::engine {

std::unique_ptr<AttentionBackend> MakeCudaVarlenAttention();
std::unique_ptr<AttentionBackend> MakeCudaReferenceAttention();
std::unique_ptr<AttentionBackend> MakeFlashInferFa2Attention();
std::unique_ptr<AttentionBackend> MakeFlashInferFa3Attention();

}  // namespace quiver::engine
