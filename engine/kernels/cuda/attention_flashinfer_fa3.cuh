// FlashInfer's FA3 ragged prefill for Hopper (attention/hopper/prefill_sm90.cuh: wgmma, TMA,
// warp specialisation; sm_90a only) for one head_dim, as RunFa3<head_dim>: included only by the
// attention_flashinfer_fa3_d<head_dim>.cu units, each of which instantiates it once. Instantiates
// bf16 q/k/v/out, int32 indices, no sliding window, no soft cap, the default variant; both masks
// (kNone, kCausal) times both schedulers (same_schedule_for_all_heads true / false).
#pragma once

#include <cstdint>
#include <exception>
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/variants.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/cutlass_utils.cuh>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/kernels/cuda/attention_flashinfer_impl.h"
#include "engine/kernels/cuda/status.h"

namespace quiver::engine::cuda::flashinfer_internal {

// The ragged Params type prefill_sm90.cuh reads. FlashInfer's bindings generate one per module
// (batch_prefill_sm90_customize_config.jinja); this is that struct with the default variant's
// additional parameters. (flashinfer/attention/hopper/default_params.cuh is not used: it defines
// flashinfer::BatchPrefillRaggedParams, the name the FA2 units take from
// default_prefill_params.cuh with another definition.)
struct Fa3RaggedParams {
  using DTypeQ = cutlass::bfloat16_t;
  using DTypeKV = cutlass::bfloat16_t;
  using DTypeO = cutlass::bfloat16_t;
  using IdType = int32_t;

  DTypeQ* q_ptr = nullptr;
  DTypeKV* k_ptr = nullptr;
  DTypeKV* v_ptr = nullptr;
  DTypeO* o_ptr = nullptr;
  float* lse_ptr = nullptr;

  // The schedule: per work item (CTA iteration) its query tile, offsets, lengths, head, request.
  IdType* qo_tile_indices = nullptr;
  IdType* qo_indptr = nullptr;
  IdType* kv_indptr = nullptr;
  IdType* qo_lens = nullptr;
  IdType* kv_lens = nullptr;
  IdType* head_indices = nullptr;
  IdType* work_indptr = nullptr;
  IdType* batch_indices = nullptr;

  struct AdditionalParams {
    float logits_soft_cap = 0.0f;
    float sm_scale = 0.0f;
  } additional_params;

  int64_t q_stride_n = 0;
  int64_t k_stride_n = 0;
  int64_t v_stride_n = 0;
  int64_t o_stride_n = 0;
  int64_t q_stride_h = 0;
  int64_t k_stride_h = 0;
  int64_t v_stride_h = 0;
  int64_t o_stride_h = 0;
  int64_t nnz_qo = 0;  // TMA extents: rows of q / out and of k / v
  int64_t nnz_kv = 0;

  int num_qo_heads = 0;
  int num_kv_heads = 0;
  int group_size = 0;
  int window_left = -1;

  bool causal = false;
};

using Fa3Variant = flashinfer::DefaultAttention</*use_logits_soft_cap=*/false>;

// q/k/v/out are [num_tokens, heads, head_dim] views with per-token strides (one fused qkv
// buffer). The TMA descriptors built here span args.num_tokens rows; a CUDA graph keeps them,
// so a captured Run must be given the bucket's token count.
inline Fa3RaggedParams MakeFa3Params(const RaggedAttentionArgs& args,
                                     const flashinfer::PrefillPlanSM90Info& plan,
                                     const Workspace& workspace) {
  using T = cutlass::bfloat16_t;
  Fa3RaggedParams params;
  params.q_ptr = const_cast<T*>(static_cast<const T*>(args.q));
  params.k_ptr = const_cast<T*>(static_cast<const T*>(args.k));
  params.v_ptr = const_cast<T*>(static_cast<const T*>(args.v));
  params.o_ptr = static_cast<T*>(args.out);

  const auto schedule = [&](int64_t offset) {
    return flashinfer::GetPtrFromBaseOffset<int32_t>(workspace.schedule, offset);
  };
  params.qo_tile_indices = schedule(plan.qo_tile_indices_offset);
  params.qo_indptr = schedule(plan.qo_indptr_offset);
  params.kv_indptr = schedule(plan.kv_indptr_offset);
  params.qo_lens = schedule(plan.qo_len_offset);
  params.kv_lens = schedule(plan.kv_len_offset);
  params.head_indices = schedule(plan.head_indices_offset);
  params.work_indptr = schedule(plan.work_indptr_offset);
  params.batch_indices = schedule(plan.batch_indices_offset);

  params.additional_params.sm_scale = args.scale;
  params.q_stride_n = args.q_stride;
  params.k_stride_n = args.kv_stride;
  params.v_stride_n = args.kv_stride;
  params.o_stride_n = args.out_stride;
  params.q_stride_h = args.head_dim;
  params.k_stride_h = args.head_dim;
  params.v_stride_h = args.head_dim;
  params.o_stride_h = args.head_dim;
  params.nnz_qo = args.num_tokens;
  params.nnz_kv = args.num_tokens;
  params.num_qo_heads = args.num_heads;
  params.num_kv_heads = args.num_kv_heads;
  params.group_size = args.num_heads / args.num_kv_heads;
  params.causal = args.causal;
  return params;
}

inline constexpr const char* kFa3Call = "FlashInfer BatchPrefillWithRaggedKVCacheDispatched (FA3)";

template <uint32_t kHeadDim, flashinfer::MaskMode kMask>
absl::Status DispatchFa3Schedule(Fa3RaggedParams& params,
                                 const flashinfer::PrefillPlanSM90Info& plan, cudaStream_t stream) {
  // The plan gives all heads one schedule (BatchPrefillTileScheduler) when the per-head work
  // list would exceed 4096 items, else one per head (the persistent scheduler).
  const auto launch = [&]<bool kSameScheduleForAllHeads>() {
    return CudaStatus(
        flashinfer::BatchPrefillWithRaggedKVCacheDispatched<kHeadDim, kHeadDim, kMask,
                                                            /*LEFT_SLIDING_WINDOW=*/false,
                                                            kSameScheduleForAllHeads, Fa3Variant>(
            params, /*enable_pdl=*/false, stream),
        kFa3Call);
  };
  return plan.same_schedule_for_all_heads ? launch.template operator()<true>()
                                          : launch.template operator()<false>();
}

template <uint32_t kHeadDim>
absl::Status RunFa3(const RaggedAttentionArgs& args, const flashinfer::PrefillPlanSM90Info& plan,
                    const Workspace& workspace, cudaStream_t stream) {
  Fa3RaggedParams params = MakeFa3Params(args, plan, workspace);
  try {
    return args.causal
               ? DispatchFa3Schedule<kHeadDim, flashinfer::MaskMode::kCausal>(params, plan, stream)
               : DispatchFa3Schedule<kHeadDim, flashinfer::MaskMode::kNone>(params, plan, stream);
  } catch (const std::exception& e) {  // FlashInfer throws flashinfer::Error for bad configs
    return absl::InternalError(absl::StrCat(kFa3Call, ": ", e.what()));
  }
}

}  // namespace quiver::engine::cuda::flashinfer_internal
