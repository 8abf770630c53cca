// FlashInferPrefill: checks the configuration, owns the schedule and workspace buffers, plans
// each batch on the host with FlashInfer's scheduler (PrefillPlan for FA2, PrefillSM90Plan for
// FA3) and runs it through the instantiation units (attention_flashinfer_impl.h). No kernel
// template is compiled here.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <flashinfer/attention/scheduler.cuh>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/kernels/cuda/attention_flashinfer.h"
#include "engine/kernels/cuda/attention_flashinfer_impl.h"
#include "engine/kernels/cuda/memory.h"
#include "engine/kernels/cuda/status.h"

namespace quiver::engine::cuda {

std::string_view FlashInferKernelName(FlashInferKernel kernel) {
  return kernel == FlashInferKernel::kFa2 ? "flashinfer_fa2" : "flashinfer_fa3";
}

// Both kernels: head_dim 64 and 128. FA2 has no head_dim 32 in FlashInfer 0.7.2.post1
// (attention_flashinfer_impl.h).
bool FlashInferSupports(FlashInferKernel /*kernel*/, int head_dim) {
  return head_dim == 64 || head_dim == 128;
}

namespace {

using flashinfer_internal::Workspace;

// Bytes FlashInfer's AlignedAllocator may skip before one allocation (alignment <= 16).
constexpr size_t kAlignmentSlack = 16;
constexpr size_t kBf16Bytes = 2;

size_t WithSlack(size_t bytes) { return bytes + kAlignmentSlack; }
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct WorkspaceBytes {
  size_t schedule = 0;  // device int buffer, and each page-locked copy of it
  size_t partials = 0;  // device float buffer
};

// Upper bounds on what PrefillPlanImpl (flashinfer/attention/scheduler.cuh) allocates for any
// batch of at most T = max_tokens tokens in B = max_seqs sequences (it fails, and Plan returns
// INTERNAL, rather than overrun a buffer that is too small). FlashInfer's own
// PrefillPlanWorkspaceSize sizes one given batch, and neither the eager nor the graph-mode size
// is monotone in (tokens, seqs), so it cannot size a buffer for all batches up to a bound.
//
// With g = num_heads / num_kv_heads and S = 2 · num_sms / num_kv_heads (its
// max_batch_size_if_split), padded_batch_size <= P = max(S, ceil(T · g / 16) + B): CTA_TILE_Q
// >= 16 and each sequence adds at most one partial tile; split-kv plans stay within S eagerly
// and within max(S, tiles) in graph mode. The schedule holds three int arrays of P, a bool mask
// of P, o_indptr [B + 1], merge_indptr [T + 1] and two scalars. Partial outputs (split-kv plans,
// every graph-mode plan) take ceil(padded · cta_tile_q / g) rows of num_heads · (head_dim + 1)
// floats, and padded · cta_tile_q <= 128 · S eagerly, <= max(128 · S, T · g + 128 · B) in graph
// mode (CTA_TILE_Q <= 128 below head_dim 256).
WorkspaceBytes Fa2WorkspaceBytes(const FlashInferConfig& config, int num_sms) {
  const int64_t tokens = config.max_tokens, seqs = config.max_seqs;
  const int64_t group = config.num_heads / config.num_kv_heads;
  const int64_t split_ctas = 2 * int64_t{num_sms} / config.num_kv_heads;
  const int64_t padded = std::max(split_ctas, CeilDiv(tokens * group, 16) + seqs);
  WorkspaceBytes bytes;
  bytes.schedule = 3 * WithSlack(sizeof(int32_t) * padded) + WithSlack(padded) +
                   WithSlack(sizeof(int32_t) * (seqs + 1)) +
                   WithSlack(sizeof(int32_t) * (tokens + 1)) + 2 * WithSlack(sizeof(int32_t));
  const int64_t packed_rows = config.cuda_graph
                                  ? std::max(128 * split_ctas, tokens * group + 128 * seqs)
                                  : 128 * split_ctas;
  const int64_t partial_rows = CeilDiv(packed_rows, group);
  bytes.partials = WithSlack(sizeof(float) * config.num_heads * partial_rows * config.head_dim) +
                   WithSlack(sizeof(float) * config.num_heads * partial_rows);
  return bytes;
}

// PrefillSM90Plan lists per head at most W = ceil(T / 128) + B - 1 work items (its CTA_Q is 128
// or 192), once for all heads when W > 4096, else once per head: at most
// max(min(W, 4096) · num_heads, W) items in each of seven int arrays, plus work_indptr
// [num_sms + 1]. The FA3 kernel never splits kv, so it takes no float workspace.
WorkspaceBytes Fa3WorkspaceBytes(const FlashInferConfig& config, int num_sms) {
  constexpr int64_t kSameScheduleAbove = 4096;
  const int64_t works_per_head = CeilDiv(config.max_tokens, 128) + config.max_seqs - 1;
  const int64_t works =
      std::max(std::min(works_per_head, kSameScheduleAbove) * config.num_heads, works_per_head);
  WorkspaceBytes bytes;
  bytes.schedule =
      7 * WithSlack(sizeof(int32_t) * works) + WithSlack(sizeof(int32_t) * (num_sms + 1));
  return bytes;
}

absl::Status ValidateConfig(const FlashInferConfig& config) {
  if (!FlashInferSupports(config.kernel, config.head_dim)) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim ", config.head_dim, " is not built for ",
                     std::string(FlashInferKernelName(config.kernel))));
  }
  if (config.num_heads <= 0 || config.num_kv_heads <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_heads (", config.num_heads,
                                                   ") and num_kv_heads (", config.num_kv_heads,
                                                   ") must be positive"));
  }
  if (config.num_heads % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_heads ", config.num_heads,
                                                   " is not a multiple of num_kv_heads ",
                                                   config.num_kv_heads));
  }
  // FlashInfer's scheduler counts packed rows (tokens · group) in 32 bits.
  constexpr int64_t kMaxPackedRows = std::numeric_limits<int32_t>::max();
  const int64_t group = config.num_heads / config.num_kv_heads;
  if (config.max_tokens <= 0 || config.max_tokens * group > kMaxPackedRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_tokens ", config.max_tokens, " is not in [1, 2^31 / group size ", group, "]"));
  }
  if (config.max_seqs <= 0 || config.max_seqs > kMaxPackedRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_seqs ", config.max_seqs, " is not in [1, 2^31)"));
  }
  if (config.num_slots <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_slots ", config.num_slots, " must be positive"));
  }
  return absl::OkStatus();
}

// The FA3 kernel is sm_90a code: it runs on compute capability 9.0 only.
absl::Status CheckDeviceRunsFa3(int device) {
  int major = 0, minor = 0;
  QUIVER_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  QUIVER_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("flashinfer_fa3 needs a compute capability 9.0 (Hopper) device; device ",
                     device, " is ", major, ".", minor));
  }
  return absl::OkStatus();
}

// Offsets into a 16-byte-aligned buffer must keep 16-byte vector loads (cp.async, TMA) aligned:
// 8 bf16 elements.
bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
bool StrideAligned(int64_t stride_elements) { return stride_elements % 8 == 0; }

class FlashInferPrefillImpl final : public FlashInferPrefill {
 public:
  FlashInferPrefillImpl(const FlashInferConfig& config, WorkspaceBytes bytes, DeviceBuffer schedule,
                        DeviceBuffer partials, std::vector<PinnedBuffer> host_schedules)
      : config_(config),
        bytes_(bytes),
        schedule_(std::move(schedule)),
        partials_(std::move(partials)),
        host_schedules_(std::move(host_schedules)) {}

  const FlashInferConfig& config() const override { return config_; }

  absl::Status Plan(int slot, const int32_t* host_cu_seqlens, int64_t num_seqs, bool causal,
                    cudaStream_t stream) override;
  absl::Status Run(const RaggedAttentionArgs& args, cudaStream_t stream) override;

  size_t device_bytes() const override { return bytes_.schedule + bytes_.partials; }

 private:
  absl::Status ValidatePlan(int slot, const int32_t* host_cu_seqlens, int64_t num_seqs) const;
  absl::Status ValidateRun(const RaggedAttentionArgs& args) const;
  cudaError_t PlanFa2(int slot, int32_t* cu_seqlens, int64_t num_seqs, cudaStream_t stream);
  cudaError_t PlanFa3(int slot, int32_t* cu_seqlens, int64_t num_seqs, bool causal,
                      cudaStream_t stream);
  Workspace workspace() const { return {schedule_.data(), partials_.data()}; }

  const FlashInferConfig config_;
  const WorkspaceBytes bytes_;
  DeviceBuffer schedule_;
  DeviceBuffer partials_;                     // FA2 only
  std::vector<PinnedBuffer> host_schedules_;  // [num_slots]

  // The batch planned last: Run launches what it describes.
  bool planned_ = false;
  int64_t planned_num_seqs_ = 0;
  int64_t planned_num_tokens_ = 0;
  bool planned_causal_ = false;
  flashinfer::PrefillPlanInfo fa2_plan_;
  flashinfer::PrefillPlanSM90Info fa3_plan_;
};

absl::Status FlashInferPrefillImpl::ValidatePlan(int slot, const int32_t* host_cu_seqlens,
                                                 int64_t num_seqs) const {
  if (slot < 0 || slot >= config_.num_slots) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot ", slot, " is not in [0, num_slots ", config_.num_slots, ")"));
  }
  if (num_seqs <= 0 || num_seqs > config_.max_seqs) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_seqs ", num_seqs, " is not in [1, max_seqs ", config_.max_seqs, "]"));
  }
  if (host_cu_seqlens == nullptr) {
    return absl::InvalidArgumentError("host_cu_seqlens is null");
  }
  // The FA2 kernel writes sequence i's rows from the plan's own offsets, which start at 0.
  if (host_cu_seqlens[0] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cu_seqlens[0] is ", host_cu_seqlens[0], ", not 0"));
  }
  for (int64_t i = 0; i < num_seqs; ++i) {
    if (host_cu_seqlens[i + 1] < host_cu_seqlens[i]) {
      return absl::InvalidArgumentError(absl::StrCat("cu_seqlens decreases at ", i + 1));
    }
  }
  if (host_cu_seqlens[num_seqs] > config_.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("cu_seqlens[num_seqs] ",
                                                   host_cu_seqlens[num_seqs],
                                                   " exceeds max_tokens ", config_.max_tokens));
  }
  return absl::OkStatus();
}

// Self-attention: the kv rows of a sequence are its query rows (qo_indptr = kv_indptr), pages of
// one token. Split-kv as FlashInfer chooses it (no fixed split size), no sliding window.
cudaError_t FlashInferPrefillImpl::PlanFa2(int slot, int32_t* cu_seqlens, int64_t num_seqs,
                                           cudaStream_t stream) {
  return flashinfer::PrefillPlan<int32_t>(
      partials_.data(), bytes_.partials, schedule_.data(), host_schedules_[slot].data(),
      bytes_.schedule, fa2_plan_, cu_seqlens, cu_seqlens,
      /*total_num_rows=*/static_cast<uint32_t>(cu_seqlens[num_seqs]),
      /*batch_size=*/static_cast<uint32_t>(num_seqs), config_.num_heads, config_.num_kv_heads,
      /*head_dim_qk=*/config_.head_dim, /*head_dim_vo=*/config_.head_dim, /*page_size=*/1,
      /*enable_cuda_graph=*/config_.cuda_graph, /*sizeof_dtype_o=*/kBf16Bytes,
      /*window_left=*/-1, /*fixed_split_size=*/-1, /*disable_split_kv=*/false,
      /*num_colocated_ctas=*/0, /*uniform_q_len=*/0, stream, /*kv_dtype_bytes=*/kBf16Bytes);
}

cudaError_t FlashInferPrefillImpl::PlanFa3(int slot, int32_t* cu_seqlens, int64_t num_seqs,
                                           bool causal, cudaStream_t stream) {
  std::vector<int32_t> kv_lens(num_seqs);
  for (int64_t i = 0; i < num_seqs; ++i) kv_lens[i] = cu_seqlens[i + 1] - cu_seqlens[i];
  return flashinfer::PrefillSM90Plan<int32_t>(
      /*float_buffer=*/nullptr, /*float_workspace_size_in_bytes=*/0, schedule_.data(),
      host_schedules_[slot].data(), bytes_.schedule, fa3_plan_, cu_seqlens, cu_seqlens,
      kv_lens.data(), /*total_num_rows=*/static_cast<uint32_t>(cu_seqlens[num_seqs]),
      /*batch_size=*/static_cast<uint32_t>(num_seqs), config_.num_heads, config_.num_kv_heads,
      /*head_dim_qk=*/config_.head_dim, /*head_dim_vo=*/config_.head_dim, /*page_size=*/1, causal,
      /*enable_cuda_graph=*/config_.cuda_graph, /*sizeof_dtype_o=*/kBf16Bytes, stream);
}

absl::Status FlashInferPrefillImpl::Plan(int slot, const int32_t* host_cu_seqlens, int64_t num_seqs,
                                         bool causal, cudaStream_t stream) {
  if (absl::Status status = ValidatePlan(slot, host_cu_seqlens, num_seqs); !status.ok()) {
    return status;
  }
  planned_ = false;
  const char* call = config_.kernel == FlashInferKernel::kFa2 ? "FlashInfer PrefillPlan"
                                                              : "FlashInfer PrefillSM90Plan";
  // FlashInfer's planners take non-const indptr arrays but only read them.
  int32_t* cu_seqlens = const_cast<int32_t*>(host_cu_seqlens);
  try {
    const cudaError_t error = config_.kernel == FlashInferKernel::kFa2
                                  ? PlanFa2(slot, cu_seqlens, num_seqs, stream)
                                  : PlanFa3(slot, cu_seqlens, num_seqs, causal, stream);
    if (absl::Status status = CudaStatus(error, call); !status.ok()) return status;
  } catch (const std::exception& e) {  // flashinfer::Error, or std::bad_alloc from its vectors
    return absl::InternalError(absl::StrCat(call, ": ", e.what()));
  }
  planned_ = true;
  planned_num_seqs_ = num_seqs;
  planned_num_tokens_ = host_cu_seqlens[num_seqs];
  planned_causal_ = causal;
  return absl::OkStatus();
}

absl::Status FlashInferPrefillImpl::ValidateRun(const RaggedAttentionArgs& args) const {
  if (!planned_) return absl::FailedPreconditionError("FlashInferPrefill::Run without a plan");
  if (args.num_seqs != planned_num_seqs_ || args.causal != planned_causal_) {
    return absl::InvalidArgumentError(absl::StrCat("num_seqs ", args.num_seqs, " / causal ",
                                                   args.causal, " differ from the plan's ",
                                                   planned_num_seqs_, " / ", planned_causal_));
  }
  // A smaller count would cut the FA3 TMA extents short of rows the plan reads.
  if (args.num_tokens < planned_num_tokens_) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_tokens ", args.num_tokens, " is below the plan's ", planned_num_tokens_));
  }
  if (args.dtype != DType::kBF16 || args.out_dtype != DType::kBF16) {
    return absl::InvalidArgumentError("dtype and out_dtype must be bf16");
  }
  if (args.head_dim != config_.head_dim || args.num_heads != config_.num_heads ||
      args.num_kv_heads != config_.num_kv_heads) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim / num_heads / num_kv_heads ", args.head_dim, " / ", args.num_heads,
                     " / ", args.num_kv_heads, " differ from the config's ", config_.head_dim,
                     " / ", config_.num_heads, " / ", config_.num_kv_heads));
  }
  if (args.q == nullptr || args.k == nullptr || args.v == nullptr || args.out == nullptr ||
      args.cu_seqlens == nullptr) {
    return absl::InvalidArgumentError("q, k, v, out and cu_seqlens must be non-null");
  }
  if (!Aligned16(args.q) || !Aligned16(args.k) || !Aligned16(args.v) || !Aligned16(args.out)) {
    return absl::InvalidArgumentError("q, k, v and out must be 16-byte aligned");
  }
  const int64_t q_row = int64_t{config_.num_heads} * config_.head_dim;
  const int64_t kv_row = int64_t{config_.num_kv_heads} * config_.head_dim;
  if (args.q_stride < q_row || args.kv_stride < kv_row || args.out_stride < q_row ||
      !StrideAligned(args.q_stride) || !StrideAligned(args.kv_stride) ||
      !StrideAligned(args.out_stride)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "q_stride / kv_stride / out_stride ", args.q_stride, " / ", args.kv_stride, " / ",
        args.out_stride, " must be multiples of 8 and cover a row (", q_row, " / ", kv_row, ")"));
  }
  if (config_.kernel == FlashInferKernel::kFa2) {
    // FA2 writes out densely and forms q/k/v element offsets in 32 bits.
    if (args.out_stride != q_row) {
      return absl::InvalidArgumentError(absl::StrCat("flashinfer_fa2 needs out_stride ", q_row,
                                                     " (dense rows), not ", args.out_stride));
    }
    if (args.num_tokens * std::max(args.q_stride, args.kv_stride) >
        std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(
          "flashinfer_fa2 needs num_tokens · max(q_stride, kv_stride) below 2^32");
    }
  }
  return absl::OkStatus();
}

absl::Status FlashInferPrefillImpl::Run(const RaggedAttentionArgs& args, cudaStream_t stream) {
  if (absl::Status status = ValidateRun(args); !status.ok()) return status;
  // No rows to write; FA3 could not even describe an empty q to TMA.
  if (args.num_tokens == 0) return absl::OkStatus();
  if (config_.kernel == FlashInferKernel::kFa2) {
    return config_.head_dim == 64
               ? flashinfer_internal::RunFa2HeadDim64(args, fa2_plan_, workspace(), stream)
               : flashinfer_internal::RunFa2HeadDim128(args, fa2_plan_, workspace(), stream);
  }
  return config_.head_dim == 64
             ? flashinfer_internal::RunFa3HeadDim64(args, fa3_plan_, workspace(), stream)
             : flashinfer_internal::RunFa3HeadDim128(args, fa3_plan_, workspace(), stream);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FlashInferPrefill>> FlashInferPrefill::Create(
    const FlashInferConfig& config) {
  if (absl::Status status = ValidateConfig(config); !status.ok()) return status;
  int device = 0, num_sms = 0;
  QUIVER_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  QUIVER_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  if (config.kernel == FlashInferKernel::kFa3) {
    if (absl::Status status = CheckDeviceRunsFa3(device); !status.ok()) return status;
  }

  const WorkspaceBytes bytes = config.kernel == FlashInferKernel::kFa2
                                   ? Fa2WorkspaceBytes(config, num_sms)
                                   : Fa3WorkspaceBytes(config, num_sms);
  absl::StatusOr<DeviceBuffer> schedule = DeviceBuffer::Allocate(bytes.schedule);
  if (!schedule.ok()) return schedule.status();
  DeviceBuffer partials;
  if (bytes.partials > 0) {
    absl::StatusOr<DeviceBuffer> allocated = DeviceBuffer::Allocate(bytes.partials);
    if (!allocated.ok()) return allocated.status();
    partials = *std::move(allocated);
  }
  std::vector<PinnedBuffer> host_schedules;
  host_schedules.reserve(config.num_slots);
  for (int slot = 0; slot < config.num_slots; ++slot) {
    absl::StatusOr<PinnedBuffer> host_schedule = PinnedBuffer::Allocate(bytes.schedule);
    if (!host_schedule.ok()) return host_schedule.status();
    host_schedules.push_back(*std::move(host_schedule));
  }
  return std::make_unique<FlashInferPrefillImpl>(config, bytes, *std::move(schedule),
                                                 std::move(partials), std::move(host_schedules));
}

}  // namespace quiver::engine::cuda
