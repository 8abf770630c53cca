#include "engine/attention/cuda_backends.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/strings.h"
#include "engine/base/slot_ring.h"
#include "engine/kernels/cuda/attention.h"
#include "engine/kernels/cuda/attention_flashinfer.h"
#include "engine/kernels/cuda/context.h"
#include "engine/kernels/cuda/memory.h"
#include "engine/kernels/cuda/status.h"

namespace quiver::engine {
namespace {

[[noreturn]] void Fail(std::string_view backend, const std::string& message) {
  throw std::invalid_argument(StrCat("attention backend ", backend, ": ", message));
}

void Check(std::string_view backend, const absl::Status& status) {
  if (!status.ok()) Fail(backend, std::string(status.message()));
}

cudaStream_t StreamOf(std::string_view backend, const ExecContext& ctx) {
  if (ctx.cuda == nullptr) Fail(backend, "the execution context has no CUDA device context");
  return ctx.cuda->stream();
}

cuda::RaggedAttentionArgs ArgsFor(const AttentionPlan& plan, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& out) {
  cuda::RaggedAttentionArgs a;
  a.q = q.data<void>();
  a.k = k.data<void>();
  a.v = v.data<void>();
  a.out = out.data<void>();
  a.q_stride = q.row_stride();
  a.kv_stride = k.row_stride();
  a.out_stride = out.row_stride();
  a.dtype = DType::kBF16;
  a.out_dtype = DType::kBF16;
  a.cu_seqlens = plan.device_cu_seqlens;
  a.tiles = plan.device_tiles;
  a.num_tiles = plan.num_tiles;
  a.num_seqs = plan.num_seqs;
  a.num_tokens = plan.num_seqs > 0 ? plan.cu_seqlens[plan.num_seqs] : 0;
  a.max_seqlen = plan.max_seqlen;
  a.num_heads = static_cast<int>(plan.num_heads);
  a.num_kv_heads = static_cast<int>(plan.num_kv_heads);
  a.head_dim = static_cast<int>(plan.head_dim);
  a.causal = plan.causal;
  a.scale = plan.scale;
  a.window = plan.window;
  a.position_bias = plan.position_bias;
  a.bias_max_distance = plan.bias_max_distance;
  return a;
}

// A kernel of kernels/cuda/attention.h that needs nothing but its arguments.
class CudaKernelAttention final : public AttentionBackend {
 public:
  using Kernel = cudaError_t (*)(const cuda::RaggedAttentionArgs&, cudaStream_t);
  CudaKernelAttention(std::string_view name, Kernel kernel, int64_t max_head_dim,
                      bool (*supports)(int) = nullptr, bool masks = true)
      : name_(name),
        kernel_(kernel),
        max_head_dim_(max_head_dim),
        supports_(supports),
        masks_(masks) {}
  std::string_view name() const override { return name_; }
  Device device() const override { return Device::kCuda; }
  DType dtype() const override { return DType::kBF16; }
  bool Supports(int64_t head_dim) const override {
    if (head_dim <= 0 || head_dim > max_head_dim_) return false;
    return supports_ == nullptr || supports_(static_cast<int>(head_dim));
  }
  // The grids depend on (num_seqs, max_seqlen) only (kernels/cuda/attention.h).
  bool Capturable() const override { return true; }
  bool SupportsMasks() const override { return masks_; }
  void Run(const ExecContext& ctx, const AttentionPlan& plan, const Tensor& q, const Tensor& k,
           const Tensor& v, const Tensor& out) const override {
    Check(name_, cuda::CudaStatus(kernel_(ArgsFor(plan, q, k, v, out), StreamOf(name_, ctx)),
                                  "attention kernel"));
  }

 private:
  std::string_view name_;
  Kernel kernel_;
  int64_t max_head_dim_;
  bool (*supports_)(int);
  bool masks_;
};

// FlashInfer: a prefill instance per (head_dim, heads), grown when a batch is larger than any
// before (eager use: the engine's CUDA-graph runtime sizes one for its largest bucket instead).
// A batch is planned once, by the first layer that runs it (the plan's cu_seqlens and mask
// differ from the last one planned); the other layers reuse that schedule. Plans take turns
// over two page-locked slots (base/slot_ring.h): the event recorded right behind a plan's copy
// out of its slot must have completed before that slot is planned again. Planning allocates and
// waits, so it is refused while the stream is being captured into a CUDA graph: a captured
// batch must have been planned before the capture began.
class FlashInferAttention final : public AttentionBackend {
 public:
  explicit FlashInferAttention(cuda::FlashInferKernel kernel)
      : kernel_(kernel),
        slots_(kSlots, [this](int slot) { return slot_done_[slot].Synchronize(); }) {}
  // The buffers go only after every copy out of them completed.
  ~FlashInferAttention() override { slots_.Drain().IgnoreError(); }
  std::string_view name() const override { return cuda::FlashInferKernelName(kernel_); }
  Device device() const override { return Device::kCuda; }
  DType dtype() const override { return DType::kBF16; }
  bool Supports(int64_t head_dim) const override {
    return head_dim > 0 && head_dim <= 256 &&
           cuda::FlashInferSupports(kernel_, static_cast<int>(head_dim)) &&
           (kernel_ != cuda::FlashInferKernel::kFa3 || CurrentDeviceIsHopper());
  }

  void Run(const ExecContext& ctx, const AttentionPlan& plan, const Tensor& q, const Tensor& k,
           const Tensor& v, const Tensor& out) const override {
    const cudaStream_t stream = StreamOf(name(), ctx);
    const cuda::RaggedAttentionArgs args = ArgsFor(plan, q, k, v, out);
    if (args.num_tokens == 0) return;
    const bool planned =
        prefill_ != nullptr && planned_causal_ == plan.causal &&
        planned_cu_seqlens_.size() == static_cast<size_t>(plan.num_seqs + 1) &&
        std::equal(planned_cu_seqlens_.begin(), planned_cu_seqlens_.end(), plan.cu_seqlens);
    if (!planned) {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      Check(name(),
            cuda::CudaStatus(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing"));
      if (capture != cudaStreamCaptureStatusNone) {
        Fail(name(), "a batch reached a CUDA-graph capture without being planned first");
      }
      Prepare(args);
      absl::StatusOr<int> slot = slots_.Acquire();
      Check(name(), slot.status());
      planned_cu_seqlens_.clear();  // no stale match if planning fails
      Check(name(), prefill_->Plan(*slot, plan.cu_seqlens, plan.num_seqs, plan.causal, stream));
      // The slot's buffer is read only by the copy Plan enqueued: the event goes right behind it.
      Check(name(), slot_done_[*slot].Record(stream));
      slots_.Submitted(*slot);
      planned_cu_seqlens_.assign(plan.cu_seqlens, plan.cu_seqlens + plan.num_seqs + 1);
      planned_causal_ = plan.causal;
    }
    Check(name(), prefill_->Run(args, stream));
  }

 private:
  static constexpr int kSlots = 2;

  static bool CurrentDeviceIsHopper() {
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major == 9 && minor == 0;  // sm_90a code runs on sm_90 only
  }

  void Prepare(const cuda::RaggedAttentionArgs& a) const {
    if (!cuda::FlashInferSupports(kernel_, a.head_dim)) {
      Fail(name(), StrCat("no instantiation for head_dim ", a.head_dim));
    }
    const bool fits = prefill_ != nullptr && prefill_->config().head_dim == a.head_dim &&
                      prefill_->config().num_heads == a.num_heads &&
                      prefill_->config().num_kv_heads == a.num_kv_heads &&
                      prefill_->config().max_tokens >= a.num_tokens &&
                      prefill_->config().max_seqs >= a.num_seqs;
    if (fits) return;
    // Every batch planned from the old instance must have finished before it is freed.
    Check(name(), slots_.Drain());
    planned_cu_seqlens_.clear();
    for (cuda::Event& e : slot_done_) {  // made at first use: the backend is made without a device
      if (e.get() != nullptr) continue;
      absl::StatusOr<cuda::Event> made = cuda::Event::Create();
      Check(name(), made.status());
      e = *std::move(made);
    }
    cuda::FlashInferConfig config;
    config.kernel = kernel_;
    config.head_dim = a.head_dim;
    config.num_heads = a.num_heads;
    config.num_kv_heads = a.num_kv_heads;
    // Doubling: a stream of growing batches re-creates the instance O(log n) times.
    const int64_t had_tokens = prefill_ ? prefill_->config().max_tokens : 0;
    const int64_t had_seqs = prefill_ ? prefill_->config().max_seqs : 0;
    config.max_tokens = std::max(a.num_tokens, 2 * had_tokens);
    config.max_seqs = std::max(a.num_seqs, 2 * had_seqs);
    config.num_slots = kSlots;
    prefill_.reset();
    absl::StatusOr<std::unique_ptr<cuda::FlashInferPrefill>> made =
        cuda::FlashInferPrefill::Create(config);
    Check(name(), made.status());
    prefill_ = *std::move(made);
  }

  cuda::FlashInferKernel kernel_;
  // Owned by the one compute thread that runs this backend (Run is logically const).
  mutable std::unique_ptr<cuda::FlashInferPrefill> prefill_;
  mutable std::array<cuda::Event, kSlots> slot_done_;
  mutable SlotRing slots_;
  mutable std::vector<int32_t> planned_cu_seqlens_;  // the batch the schedule is for
  mutable bool planned_causal_ = false;
};

}  // namespace

std::unique_ptr<AttentionBackend> MakeCudaVarlenAttention() {
  return std::make_unique<CudaKernelAttention>("cuda_varlen", cuda::VarlenFlashAttention, 128,
                                               cuda::VarlenFlashAttentionSupports);
}
std::unique_ptr<AttentionBackend> MakeCudaReferenceAttention() {
  return std::make_unique<CudaKernelAttention>("cuda_reference", cuda::ReferenceAttention, 256);
}
std::unique_ptr<AttentionBackend> MakeFlashInferFa2Attention() {
  return std::make_unique<FlashInferAttention>(cuda::FlashInferKernel::kFa2);
}
std::unique_ptr<AttentionBackend> MakeFlashInferFa3Attention() {
  return std::make_unique<FlashInferAttention>(cuda::FlashInferKernel::kFa3);
}

}  // namespace quiver::engine
