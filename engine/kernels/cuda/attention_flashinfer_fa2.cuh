// FlashInfer's FA2 ragged prefill (attention/prefill.cuh, mma.sync) for one head_dim, as
// RunFa2<head_dim>: included only by the attention_flashinfer_fa2_d<head_dim>.cu units, each of
// which instantiates it once. Instantiates bf16 q/k/v/out, int32 indices, no positional
// encoding, no sliding window, no soft cap, the default variant; both masks (kNone, kCausal)
// times the CTA_TILE_Q values PrefillPlan picks for head_dim < 256 (16, 64, 128).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <exception>
#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/kernels/cuda/attention_flashinfer_impl.h"
#include "engine/kernels/cuda/status.h"

namespace quiver::engine::cuda::flashinfer_internal {

// FlashInfer's default ragged Params type; its constructor nulls every optional input.
using Fa2Params =
    flashinfer::BatchPrefillRaggedParams<nv_bfloat16, nv_bfloat16, nv_bfloat16, int32_t>;
using Fa2Variant = flashinfer::DefaultAttention</*use_custom_mask=*/false,
                                                /*use_sliding_window=*/false,
                                                /*use_logits_soft_cap=*/false,
                                                /*use_alibi=*/false>;

// The plan addresses its arrays by byte offset into the workspace buffers.
template <typename T>
T* AtByteOffset(void* base, int64_t offset_bytes) {
  return flashinfer::GetPtrFromBaseOffset<T>(base, offset_bytes);
}

// q/k/v are [num_tokens, heads, head_dim] views with per-token strides (one fused qkv buffer);
// the FA2 kernel writes out densely ([num_tokens, num_heads · head_dim], checked by the caller)
// and reads q and kv rows of the same sequence at cu_seqlens[i] (self-attention).
inline Fa2Params MakeFa2Params(const RaggedAttentionArgs& args,
                               const flashinfer::PrefillPlanInfo& plan,
                               const Workspace& workspace) {
  Fa2Params params;  // no custom mask, alibi, rope offsets, lse or multi-item scoring
  params.q = const_cast<nv_bfloat16*>(static_cast<const nv_bfloat16*>(args.q));
  params.k = const_cast<nv_bfloat16*>(static_cast<const nv_bfloat16*>(args.k));
  params.v = const_cast<nv_bfloat16*>(static_cast<const nv_bfloat16*>(args.v));
  params.o = static_cast<nv_bfloat16*>(args.out);
  params.q_indptr = const_cast<int32_t*>(args.cu_seqlens);
  params.kv_indptr = const_cast<int32_t*>(args.cu_seqlens);
  params.num_qo_heads = static_cast<uint32_t>(args.num_heads);
  params.num_kv_heads = static_cast<uint32_t>(args.num_kv_heads);
  params.group_size = flashinfer::uint_fastdiv(args.num_heads / args.num_kv_heads);
  params.q_stride_n = static_cast<uint32_t>(args.q_stride);
  params.q_stride_h = static_cast<uint32_t>(args.head_dim);
  params.k_stride_n = static_cast<uint32_t>(args.kv_stride);
  params.k_stride_h = static_cast<uint32_t>(args.head_dim);
  params.v_stride_n = static_cast<uint32_t>(args.kv_stride);
  params.v_stride_h = static_cast<uint32_t>(args.head_dim);
  params.window_left = -1;
  params.sm_scale = args.scale;

  params.request_indices = AtByteOffset<int32_t>(workspace.schedule, plan.request_indices_offset);
  params.qo_tile_indices = AtByteOffset<int32_t>(workspace.schedule, plan.qo_tile_indices_offset);
  params.kv_tile_indices = AtByteOffset<int32_t>(workspace.schedule, plan.kv_tile_indices_offset);
  params.o_indptr = AtByteOffset<int32_t>(workspace.schedule, plan.o_indptr_offset);
  params.kv_chunk_size_ptr =
      AtByteOffset<int32_t>(workspace.schedule, plan.kv_chunk_size_ptr_offset);
  if (plan.split_kv) {
    params.merge_indptr = AtByteOffset<int32_t>(workspace.schedule, plan.merge_indptr_offset);
  }
  params.padded_batch_size = static_cast<uint32_t>(plan.padded_batch_size);
  params.max_total_num_rows = static_cast<uint32_t>(plan.total_num_rows);
  if (plan.enable_cuda_graph) {
    // The grid (padded_batch_size) and every offset follow from (total rows, num_seqs) alone;
    // the mask retires the padding CTAs and the device row count bounds the merge, so a graph
    // replays any batch planned with the same two numbers from a new schedule copy.
    params.block_valid_mask = AtByteOffset<bool>(workspace.schedule, plan.block_valid_mask_offset);
    params.total_num_rows = AtByteOffset<uint32_t>(workspace.schedule, plan.total_num_rows_offset);
  }
  return params;
}

inline constexpr const char* kFa2Call = "FlashInfer BatchPrefillWithRaggedKVCacheDispatched (FA2)";

template <uint32_t kHeadDim, flashinfer::MaskMode kMask>
absl::Status DispatchFa2CtaTileQ(const Fa2Params& params, const flashinfer::PrefillPlanInfo& plan,
                                 const Workspace& workspace, cudaStream_t stream) {
  // Split-kv plans send partial outputs through the float workspace, then merge them into out.
  nv_bfloat16* tmp_v = nullptr;
  float* tmp_s = nullptr;
  if (plan.split_kv) {
    tmp_v = AtByteOffset<nv_bfloat16>(workspace.partials, plan.v_offset);
    tmp_s = AtByteOffset<float>(workspace.partials, plan.s_offset);
  }
  const auto launch = [&]<uint32_t kCtaTileQ>() {
    return CudaStatus(flashinfer::BatchPrefillWithRaggedKVCacheDispatched<
                          kCtaTileQ, kHeadDim, kHeadDim, flashinfer::PosEncodingMode::kNone,
                          /*USE_FP16_QK_REDUCTION=*/false, kMask, Fa2Variant, Fa2Params>(
                          params, tmp_v, tmp_s, /*enable_pdl=*/false, stream),
                      kFa2Call);
  };
  switch (plan.cta_tile_q) {
    case 16:
      return launch.template operator()<16>();
    case 64:
      return launch.template operator()<64>();
    case 128:
      return launch.template operator()<128>();
    default:  // PrefillPlan picks 32 only for head_dim >= 512, which is not instantiated
      return absl::InternalError(
          absl::StrCat(kFa2Call, ": no instantiation for cta_tile_q ", plan.cta_tile_q));
  }
}

template <uint32_t kHeadDim>
absl::Status RunFa2(const RaggedAttentionArgs& args, const flashinfer::PrefillPlanInfo& plan,
                    const Workspace& workspace, cudaStream_t stream) {
  const Fa2Params params = MakeFa2Params(args, plan, workspace);
  try {
    return args.causal ? DispatchFa2CtaTileQ<kHeadDim, flashinfer::MaskMode::kCausal>(
                             params, plan, workspace, stream)
                       : DispatchFa2CtaTileQ<kHeadDim, flashinfer::MaskMode::kNone>(
                             params, plan, workspace, stream);
  } catch (const std::exception& e) {  // FlashInfer throws flashinfer::Error for bad configs
    return absl::InternalError(absl::StrCat(kFa2Call, ": ", e.what()));
  }
}

}  // namespace quiver::engine::cuda::flashinfer_internal
