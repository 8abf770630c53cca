// The CUDA runtime (cuda_runtime.h). Built only with QUIVER_WITH_CUDA; cuda_runtime_none.cc
// answers in CPU-only builds.
#include "engine/runtime/cuda_runtime.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <stdexcept>
#include <vector>

#include "common/status.h"
#include "common/strings.h"
#include "engine/base/slot_ring.h"
#include "engine/graph_bucket.h"
#include "engine/kernels/cuda/context.h"
#include "engine/kernels/cuda/memory.h"
#include "engine/kernels/cuda/status.h"
#include "engine/kernels/device.h"
#include "engine/ops/pooling.h"
#include "engine/runtime/device_inputs.h"

namespace quiver::engine {
namespace {

// A failed CUDA call inside a batch: the batch fails with it (the compute thread's catch).
void Throw(const absl::Status& status) {
  if (!status.ok()) throw std::runtime_error(std::string(status.message()));
}

class CudaRuntime final : public DeviceRuntime {
 public:
  CudaRuntime(const CudaRuntimeOptions& options, const Model& model, Workspace& model_ws,
              Workspace& own_ws)
      : options_(options),
        model_(model),
        model_ws_(model_ws),
        own_ws_(own_ws),
        ring_(std::clamp(options.slots, 2, 3),
              [this](int slot) { return slots_[static_cast<size_t>(slot)].done.Synchronize(); }),
        graphs_(options.graphs, options.max_graphs, [](GraphCache::Handle graph) {
          cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
        }) {}

  ~CudaRuntime() override {
    // Every slot's copies must have completed before their pinned buffers go.
    if (context_ != nullptr) {
      cudaSetDevice(options_.device);
      context_->Synchronize().IgnoreError();
      callbacks_.Synchronize().IgnoreError();
    }
  }

  absl::Status Init() {
    QUIVER_RETURN_IF_ERROR(CudaUseDevice(options_.device));
    QUIVER_ASSIGN_OR_RETURN(context_, cuda::DeviceContext::Create(options_.device));
    exec_ = ExecContext{Device::kCuda, nullptr, context_.get()};
    QUIVER_ASSIGN_OR_RETURN(callbacks_, cuda::Stream::Create());
    const GraphBucket largest = LargestBucket();
    layout_ = DeviceInputLayoutFor(largest.tokens, largest.seqs,
                                   std::max(options_.max_rows, options_.max_seqs));
    const size_t input_bytes = static_cast<size_t>(layout_.total) * sizeof(int32_t);
    QUIVER_ASSIGN_OR_RETURN(inputs_, cuda::DeviceBuffer::Allocate(input_bytes));
    const size_t row_bytes = static_cast<size_t>(layout_.max_rows) *
                             static_cast<size_t>(std::max<int64_t>(1, options_.row_width)) *
                             sizeof(float);
    // The answer rows at their largest (late chunking's spans), before the workspace is frozen.
    own_ws_.F32(kRows, {layout_.max_rows, std::max<int64_t>(1, options_.row_width)});
    slots_.resize(static_cast<size_t>(ring_.size()));
    for (Slot& slot : slots_) {
      QUIVER_ASSIGN_OR_RETURN(slot.in, cuda::PinnedBuffer::Allocate(input_bytes));
      QUIVER_ASSIGN_OR_RETURN(slot.out, cuda::PinnedBuffer::Allocate(row_bytes));
      QUIVER_ASSIGN_OR_RETURN(slot.done, cuda::Event::Create(cuda::Event::Kind::kBlockingSync));
    }
    return absl::OkStatus();
  }

  const ExecContext& exec() const override { return exec_; }
  int slots() const override { return ring_.size(); }

  absl::StatusOr<int> Start(const BatchWork& work, std::function<void()> on_complete) override {
    Throw(cuda::CudaStatus(cudaSetDevice(options_.device), "cudaSetDevice"));
    QUIVER_ASSIGN_OR_RETURN(const int s, ring_.Acquire());
    Slot& slot = slots_[static_cast<size_t>(s)];
    const cudaStream_t stream = context_->stream();
    try {
      Enqueue(work, slot, stream);
      Throw(slot.done.Record(stream));
      // The wake-up goes on a stream of its own, behind the event: a host function blocks the
      // stream it is on, and the next batch's work must not wait for the engine's thread. It owns
      // its callback (the slot may be reused once the event completed, before the callback ran).
      Throw(cuda::CudaStatus(cudaStreamWaitEvent(callbacks_.get(), slot.done.get(), 0),
                             "cudaStreamWaitEvent"));
      auto* callback = new std::function<void()>(std::move(on_complete));
      const cudaError_t launched =
          cudaLaunchHostFunc(callbacks_.get(), &CudaRuntime::Completed, callback);
      if (launched != cudaSuccess) delete callback;
      Throw(cuda::CudaStatus(launched, "cudaLaunchHostFunc"));
    } catch (...) {
      // Nothing of this batch may still read the slot's buffers when the error is answered.
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
          capture != cudaStreamCaptureStatusNone) {
        cudaGraph_t partial = nullptr;
        if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial != nullptr) {
          cudaGraphDestroy(partial);
        }
      }
      cudaStreamSynchronize(stream);
      cudaGetLastError();
      throw;
    }
    ring_.Submitted(s);
    return s;
  }

  bool Settled(int ticket) const override {
    const absl::StatusOr<bool> done = slots_.at(static_cast<size_t>(ticket)).done.Query();
    return !done.ok() || *done;
  }

  absl::StatusOr<const float*> Finish(int ticket) override {
    Slot& slot = slots_.at(static_cast<size_t>(ticket));
    QUIVER_RETURN_IF_ERROR(slot.done.Synchronize());
    ring_.Completed(ticket);
    return slot.out.as<const float>();
  }

  RuntimeStats stats() const override {
    RuntimeStats s;
    s.graphs = graphs_.stats();
    s.last_graph_failure = last_failure_;
    s.device_memory_bytes =
        static_cast<int64_t>(inputs_.bytes() + model_ws_.bytes() + own_ws_.bytes()) +
        s.graphs.memory_bytes;
    return s;
  }

 private:
  struct Slot {
    cuda::PinnedBuffer in, out;
    cuda::Event done;
  };

  static void CUDART_CB Completed(void* user) {
    std::unique_ptr<std::function<void()>> callback(static_cast<std::function<void()>*>(user));
    if (*callback) (*callback)();
  }

  GraphBucket LargestBucket() const {
    // A batch of max_tokens in max_seqs sequences, or one token short (the bucket's padding then
    // adds a sequence): every batch within the limits fits the larger of the two.
    const GraphBucket full = BucketFor(options_.max_tokens, options_.max_seqs);
    const GraphBucket short_one =
        BucketFor(std::max<int64_t>(options_.max_seqs, options_.max_tokens - 1), options_.max_seqs);
    return GraphBucket{std::max(full.tokens, short_one.tokens),
                       std::max(full.seqs, short_one.seqs)};
  }

  Tensor DeviceI32(int64_t offset, std::initializer_list<int64_t> shape) const {
    return Tensor(inputs_.as<int32_t>() + offset, DType::kI32, Device::kCuda, shape);
  }

  void Enqueue(const BatchWork& work, Slot& slot, cudaStream_t stream) {
    const BatchPlan& plan = *work.plan;
    const PackedInputs packed = PackDeviceInputs(plan, layout_, slot.in.as<int32_t>());
    for (int i = 0; i < packed.num_ranges; ++i) {  // only what this batch wrote
      const PackedInputs::Range& r = packed.ranges[i];
      Throw(cuda::CudaStatus(
          cudaMemcpyAsync(inputs_.as<int32_t>() + r.offset, slot.in.as<int32_t>() + r.offset,
                          static_cast<size_t>(r.count) * sizeof(int32_t), cudaMemcpyHostToDevice,
                          stream),
          "cudaMemcpyAsync (batch inputs)"));
    }

    // A batch padded to its bucket may be captured: its grids must hold for every batch of the
    // bucket, so the longest sequence it claims is the bucket's token count.
    const bool bucketed = plan.batch == &plan.padded;
    const GraphKey key{GraphBucket{packed.num_tokens, packed.num_seqs},
                       std::string(work.attention->name())};
    const bool capturable =
        bucketed && work.attention->Capturable() && packed.num_tokens <= options_.graph_max_tokens;
    AttentionPlan attention = plan.attention;
    attention.device_cu_seqlens = inputs_.as<int32_t>() + layout_.cu_seqlens;
    attention.device_tiles = inputs_.as<int32_t>() + layout_.tiles;
    attention.num_tiles = packed.num_tiles;
    if (capturable) attention.max_seqlen = packed.num_tokens;
    const int64_t t = packed.num_tokens;
    const ForwardContext ctx{exec_,
                             DeviceI32(layout_.ids, {t}),
                             DeviceI32(layout_.type_ids, {t}),
                             DeviceI32(layout_.positions, {t}),
                             HostBounds(plan.seq_bounds),
                             DeviceI32(layout_.seq_bounds, {plan.num_real_seqs, 2}),
                             attention,
                             *work.attention,
                             model_ws_};
    Tensor hidden;
    switch (graphs_.Next(key, capturable)) {
      case GraphCache::Action::kEager:
        hidden = model_.Forward(ctx);
        break;
      case GraphCache::Action::kCapture:
        hidden = Capture(key, ctx, stream);
        break;
      case GraphCache::Action::kReplay:
        Throw(cuda::CudaStatus(
            cudaGraphLaunch(static_cast<cudaGraphExec_t>(graphs_.Find(key)), stream),
            "cudaGraphLaunch"));
        hidden = hidden_.at(key);
        break;
    }

    // The tail, eager: pooling (or the scoring head) into a persistent f32 buffer, then the copy
    // into the slot's pinned rows.
    const Tensor rows = own_ws_.F32(kRows, {work.rows, work.width});
    if (work.score) {
      model_.Score(ctx, hidden, rows);
    } else {
      if (work.pools.size() != 1) {  // Engine::Load refuses concatenated modes on CUDA
        throw std::invalid_argument(
            StrCat("CudaRuntime: ", work.pools.size(), " pooling modes (one is served)"));
      }
      ops::Pool(exec_, hidden, HostRowBounds(plan.row_bounds), work.pools.front(), rows,
                DeviceI32(layout_.row_bounds, {packed.num_rows, 3}));
    }
    const size_t bytes = static_cast<size_t>(work.rows * work.width) * sizeof(float);
    if (bytes > slot.out.bytes()) {
      throw std::invalid_argument(StrCat("CudaRuntime: ", work.rows, " rows of ", work.width,
                                         " floats exceed the pinned output of ", slot.out.bytes(),
                                         " bytes"));
    }
    Throw(cuda::CudaStatus(
        cudaMemcpyAsync(slot.out.data(), rows.data<void>(), bytes, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync (rows to the host)"));
  }

  // Captures the forward pass of `ctx` (whose key ran eagerly before: its GEMM algorithms are
  // chosen and its kernels loaded), instantiates and launches it. A capture that fails leaves
  // the key eager and runs this batch eagerly.
  Tensor Capture(const GraphKey& key, const ForwardContext& ctx, cudaStream_t stream) {
    const auto begin = std::chrono::steady_clock::now();
    const absl::StatusOr<CudaMemory> before = CudaMemoryInfo();
    Throw(cuda::CudaStatus(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                           "cudaStreamBeginCapture"));
    Tensor hidden;
    std::string failure;
    try {
      hidden = model_.Forward(ctx);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (failure.empty() && ended != cudaSuccess) failure = cudaGetErrorString(ended);
    cudaGraphExec_t instance = nullptr;
    if (failure.empty()) {
      const cudaError_t made = cudaGraphInstantiate(&instance, graph, 0);
      if (made != cudaSuccess) failure = cudaGetErrorString(made);
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!failure.empty()) {
      cudaGetLastError();
      graphs_.CaptureFailed(key);
      last_failure_ = StrCat("capture of ", key.bucket.tokens, " tokens / ", key.bucket.seqs,
                             " sequences (", key.attention, "): ", failure);
      return model_.Forward(ctx);
    }
    const absl::StatusOr<CudaMemory> after = CudaMemoryInfo();
    int64_t memory = 0;
    if (before.ok() && after.ok() && before->free_bytes > after->free_bytes) {
      memory = static_cast<int64_t>(before->free_bytes - after->free_bytes);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    graphs_.Store(key, instance, memory, ms);
    hidden_[key] = hidden;
    Throw(cuda::CudaStatus(cudaGraphLaunch(instance, stream), "cudaGraphLaunch"));
    return hidden;
  }

  enum OwnSlot { kRows };

  CudaRuntimeOptions options_;
  const Model& model_;
  Workspace& model_ws_;
  Workspace& own_ws_;
  std::unique_ptr<cuda::DeviceContext> context_;
  cuda::Stream callbacks_;  // the completion callbacks, each behind its batch's event
  ExecContext exec_;
  DeviceInputLayout layout_;
  cuda::DeviceBuffer inputs_;
  std::vector<Slot> slots_;
  SlotRing ring_;
  GraphCache graphs_;
  // The hidden states each captured key's graph writes (the frozen workspace's addresses).
  std::map<GraphKey, Tensor> hidden_;
  std::string last_failure_;
};

}  // namespace

absl::Status CudaUseDevice(int device) {
  const DeviceReport report = QueryDevices();
  if (!report.cuda_compiled) {
    return absl::UnavailableError("CUDA was asked for, but this quiver was not compiled with CUDA");
  }
  if (!report.cuda_error.empty()) {
    return absl::UnavailableError(StrCat("CUDA was asked for, but ", report.cuda_error));
  }
  const int count = static_cast<int>(report.cuda_devices.size());
  if (count == 0) return absl::UnavailableError("CUDA was asked for, but this host has no GPU");
  if (device < 0 || device >= count) {
    return absl::UnavailableError(StrCat("no CUDA device cuda:", device, ": this host has ", count,
                                         " (cuda:0 .. cuda:", count - 1, ")"));
  }
  if (!report.cublaslt_error.empty()) {
    return absl::UnavailableError(StrCat("CUDA was asked for, but ", report.cublaslt_error));
  }
  return cuda::CudaStatus(cudaSetDevice(device), "cudaSetDevice");
}

absl::StatusOr<CudaMemory> CudaMemoryInfo() {
  CudaMemory m;
  QUIVER_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaMemGetInfo(&m.free_bytes, &m.total_bytes), "cudaMemGetInfo"));
  return m;
}

absl::StatusOr<std::unique_ptr<DeviceRuntime>> MakeCudaRuntime(const CudaRuntimeOptions& options,
                                                               const Model& model,
                                                               Workspace& model_ws,
                                                               Workspace& own_ws) {
  auto runtime = std::make_unique<CudaRuntime>(options, model, model_ws, own_ws);
  QUIVER_RETURN_IF_ERROR(runtime->Init());
  return runtime;
}

}  // namespace quiver::engine
