// GEMMs through cuBLASLt: y = x · Wᵀ (+ bias) (then tanh-GELU) (+ c), bf16 in, bf16 or f32
// out, f32 accumulate, on a persistent workspace (cuBLASLt takes it per call, so captured graphs
// never allocate one).
//
//   x    bf16 [M, K]   row stride ldx   (activations)
//   w    bf16 [N, K]   row stride ldw   (a PyTorch Linear weight, uploaded once)
//   bias [N] of y's type, or null
//   c    [M, N] of y's type, row stride ldy, or null (a residual: y = x · wᵀ + bias + c; not
//        with the GELU epilogue, which cuBLASLt would apply to the sum)
//   y    bf16 or f32 [M, N]   row stride ldy
//
// Row-major y = x · wᵀ is computed as the column-major yᵀ = w · xᵀ (A = w transposed, B = x), so
// that the BIAS epilogue (a vector over D's rows) broadcasts over N.
//
// Algorithms are chosen once per (M bucket, N, K, strides, epilogue, output type, pointer
// alignments) with cuBLASLt's heuristic and cached; cuBLASLt's AlgoCheck confirms once per M
// that the bucket's algorithm serves it (else that M gets its own). Both are host calls, so a
// GEMM whose M was not seen eagerly fails with FAILED_PRECONDITION while its stream is being
// captured into a CUDA graph instead of choosing there (the engine's eager first use of a bucket
// chooses). Not thread-safe: one compute thread per instance.
//
// QUIVER_GEMM_AUTOTUNE=N (N >= 2; unset or 0: off) asks the heuristic for up to N algorithms
// and, where a plan is made by Gemm on a stream, times each on the call's own operands (three
// runs after a warm-up, into a scratch output where the call reads C) and keeps the fastest if
// it beats the heuristic's first by 5% or more. Off by default: it is measured on the H200 by
// scripts/gpu-check.sh (the engine stage run with and without it) before it may become the
// default, and timing makes the choice, hence the bits, vary from one process to the next.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/kernels/cuda/memory.h"

namespace quiver::engine::cuda {

enum class GemmEpilogue {
  kNone,
  kBias,          // + bias
  kBiasGeluTanh,  // gelu_tanh(· + bias): cuBLASLt's GELU is the tanh approximation only
};

struct GemmArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  const void* c = nullptr;
  void* y = nullptr;
  bool y_f32 = false;  // y (and bias, c) f32 instead of bf16
  int64_t m = 0, n = 0, k = 0;
  int64_t ldx = 0, ldw = 0, ldy = 0;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
};

class BlasLt {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;  // NVIDIA's Hopper figure

  static absl::StatusOr<std::unique_ptr<BlasLt>> Create(
      size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~BlasLt();
  BlasLt(const BlasLt&) = delete;
  BlasLt& operator=(const BlasLt&) = delete;

  absl::Status Gemm(const GemmArgs& args, cudaStream_t stream);
  // Chooses (and caches) the algorithm for `args` without running it.
  absl::Status Prepare(const GemmArgs& args);

  int64_t cached_algorithms() const { return static_cast<int64_t>(algos_.size()); }
  // QUIVER_GEMM_AUTOTUNE's effect so far: plans timed, and how many took another algorithm.
  int64_t tuned_plans() const { return tuned_; }
  int64_t retuned_plans() const { return retuned_; }
  size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  struct Key {
    int64_t m_bucket;  // TokenBucket(M) (base/token_bucket.h); negative: exactly -m_bucket rows
    int64_t n, k, ldx, ldw, ldy;
    int epilogue;
    bool y_f32, with_c;
    uint32_t align_x, align_w, align_y;  // bytes the pointers are aligned to (at most 256)
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& key) {
      return H::combine(std::move(h), key.m_bucket, key.n, key.k, key.ldx, key.ldw, key.ldy,
                        key.epilogue, key.y_f32, key.with_c, key.align_x, key.align_w, key.align_y);
    }
  };
  struct Plan;  // descriptors + chosen algorithm (cuBLASLt types stay in blaslt.cc)

  BlasLt() = default;
  // `stream`: the call's, where a fresh plan may be tuned (null: never tuned).
  absl::StatusOr<Plan*> PlanFor(const GemmArgs& args, bool allow_heuristic,
                                cudaStream_t stream = nullptr, bool tune = false);
  absl::StatusOr<std::unique_ptr<Plan>> MakePlan(const GemmArgs& args, const Key& key, int64_t m);
  static absl::Status SetM(Plan& plan, int64_t m);
  // Times the plan's candidate algorithms on `args` (layouts at args.m) and keeps the fastest.
  absl::Status Tune(Plan& plan, const GemmArgs& args, cudaStream_t stream);

  int autotune_ = 0;  // QUIVER_GEMM_AUTOTUNE: candidates timed per fresh plan (< 2: off)
  int64_t tuned_ = 0, retuned_ = 0;  // plans timed, and of those, given another algorithm
  void* handle_ = nullptr;           // cublasLtHandle_t
  DeviceBuffer workspace_;
  absl::flat_hash_map<Key, std::unique_ptr<Plan>> algos_;
};

}  // namespace quiver::engine::cuda
