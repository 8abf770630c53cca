#include "engine/kernels/cuda/blaslt.h"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/status.h"
#include "common/strings.h"
#include "engine/base/token_bucket.h"
#include "engine/kernels/cuda/cublaslt_library.h"
#include "engine/kernels/cuda/status.h"

namespace quiver::engine::cuda {
namespace {

// The process's cuBLASLt (cublaslt_library.h): open once a BlasLt exists, which everything
// below but Create comes after.
const CublasLtFunctions& Lt() { return (*CublasLtLibrary::Process())->fn(); }

absl::Status LtStatus(cublasStatus_t status, std::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = StrCat(call, ": ", Lt().cublasLtGetStatusName(status), ": ",
                                     Lt().cublasLtGetStatusString(status));
  if (status == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return absl::UnimplementedError(message);
  return absl::InternalError(message);
}

#define QUIVER_LT_RETURN_IF_ERROR(expr)                         \
  do {                                                          \
    ::absl::Status _quiver_lt_status = LtStatus((expr), #expr); \
    if (!_quiver_lt_status.ok()) return _quiver_lt_status;      \
  } while (0)

cublasLtEpilogue_t LtEpilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kBiasGeluTanh:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

struct BlasLt::Plan {
  ~Plan() {
    if (a) Lt().cublasLtMatrixLayoutDestroy(a);
    if (b) Lt().cublasLtMatrixLayoutDestroy(b);
    if (d) Lt().cublasLtMatrixLayoutDestroy(d);
    if (op) Lt().cublasLtMatmulDescDestroy(op);
  }
  int64_t m = 0;                           // the M the layouts describe now
  absl::flat_hash_set<int64_t> checked_m;  // the Ms the algorithm is known to serve
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's, best first (autotune only)
};

absl::StatusOr<std::unique_ptr<BlasLt>> BlasLt::Create(size_t workspace_bytes) {
  QUIVER_RETURN_IF_ERROR(CublasLtLibrary::Process().status());
  std::unique_ptr<BlasLt> lt(new BlasLt());
  cublasLtHandle_t handle = nullptr;
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtCreate(&handle));
  lt->handle_ = handle;
  QUIVER_ASSIGN_OR_RETURN(lt->workspace_, DeviceBuffer::Allocate(workspace_bytes));
  if (const char* tune = std::getenv("QUIVER_GEMM_AUTOTUNE"); tune != nullptr) {
    lt->autotune_ = std::clamp(std::atoi(tune), 0, 16);
  }
  return lt;
}

BlasLt::~BlasLt() {
  algos_.clear();
  if (handle_ != nullptr) Lt().cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

// The largest power of two up to 256 that divides the address: what cuBLASLt may assume of a
// pointer (MIN_ALIGNMENT preferences), so an algorithm is never chosen for better-aligned data
// than a later call brings.
namespace {
uint32_t PointerAlignment(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}
}  // namespace

absl::StatusOr<std::unique_ptr<BlasLt::Plan>> BlasLt::MakePlan(const GemmArgs& g, const Key& key,
                                                               int64_t m) {
  const cudaDataType_t y_type = g.y_f32 ? CUDA_R_32F : CUDA_R_16BF;
  auto fresh = std::make_unique<Plan>();
  Plan& p = *fresh;
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                                &trans_a, sizeof(trans_a)));
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                                &trans_b, sizeof(trans_b)));
  const cublasLtEpilogue_t epilogue = LtEpilogue(g.epilogue);
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                                &epilogue, sizeof(epilogue)));
  if (g.epilogue != GemmEpilogue::kNone) {
    const cudaDataType_t bias_type = y_type;  // the default (D's type), always supported
    QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  // Stored shapes, column-major: A = w as [K rows, N cols], B = x as [K, M], D = y as [N, M].
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, g.k, g.n, g.ldw));
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, g.k, m, g.ldx));
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatrixLayoutCreate(&p.d, y_type, g.n, m, g.ldy));
  p.m = m;
  p.checked_m.insert(m);  // the heuristic answered for this M itself

  cublasLtMatmulPreference_t pref = nullptr;
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = workspace_.bytes();
  cublasStatus_t st = Lt().cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y}};
  for (const auto& [attribute, bytes] : alignments) {
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = Lt().cublasLtMatmulPreferenceSetAttribute(pref, attribute, &bytes, sizeof(bytes));
    }
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(std::max(autotune_, 1)));
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    // C has D's layout (beta is 0 without one).
    st = Lt().cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p.op, p.a, p.b,
                                             p.d, p.d, pref, static_cast<int>(results.size()),
                                             results.data(), &found);
  }
  Lt().cublasLtMatmulPreferenceDestroy(pref);
  QUIVER_LT_RETURN_IF_ERROR(st);
  if (found == 0) {
    return absl::UnimplementedError(StrCat("cuBLASLt has no algorithm for bf16 M ", m, " N ", g.n,
                                           " K ", g.k, " ldx ", g.ldx, " ldw ", g.ldw, " ldy ",
                                           g.ldy));
  }
  p.algo = results[0].algo;
  if (autotune_ > 1) {
    for (int i = 0; i < found; ++i) p.candidates.push_back(results[static_cast<size_t>(i)].algo);
  }
  return fresh;
}

absl::Status BlasLt::Tune(Plan& p, const GemmArgs& g, cudaStream_t stream) {
  if (p.candidates.size() < 2 || g.m == 0) return absl::OkStatus();
  ++tuned_;
  const cublasLtHandle_t handle = static_cast<cublasLtHandle_t>(handle_);
  // D: y itself where nothing is read from it, else a scratch of y's size (y may be C).
  DeviceBuffer scratch;
  void* d = g.y;
  if (g.c != nullptr) {
    QUIVER_ASSIGN_OR_RETURN(
        scratch, DeviceBuffer::Allocate(static_cast<size_t>(g.m * g.ldy) * (g.y_f32 ? 4 : 2)));
    d = scratch.data();
  }
  if (g.epilogue != GemmEpilogue::kNone) {
    QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatmulDescSetAttribute(
        p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  const float alpha = 1.0f, beta = g.c != nullptr ? 1.0f : 0.0f;
  const void* c = g.c != nullptr ? g.c : d;
  cudaEvent_t start = nullptr, stop = nullptr;
  QUIVER_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  if (const cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {
    cudaEventDestroy(start);
    return CudaStatus(e, "cudaEventCreate");
  }
  constexpr int kRuns = 3;
  size_t best = 0;
  bool timed_any = false;
  float best_ms = 0.0f, first_ms = 0.0f;  // first_ms: the heuristic's first, 0 if not timed
  absl::Status status;
  for (size_t i = 0; i < p.candidates.size() && status.ok(); ++i) {
    cublasLtMatmulHeuristicResult_t check{};
    if (Lt().cublasLtMatmulAlgoCheck(handle, p.op, p.a, p.b, p.d, p.d, &p.candidates[i], &check) !=
            CUBLAS_STATUS_SUCCESS ||
        check.workspaceSize > workspace_.bytes()) {
      continue;
    }
    auto run = [&] {
      return Lt().cublasLtMatmul(handle, p.op, &alpha, g.w, p.a, g.x, p.b, &beta, c, p.d, d, p.d,
                                 &p.candidates[i], workspace_.data(), workspace_.bytes(), stream);
    };
    if (run() != CUBLAS_STATUS_SUCCESS) continue;  // warm-up; a candidate that fails is skipped
    status = CudaStatus(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int r = 0; r < kRuns && status.ok(); ++r) status = LtStatus(run(), "cublasLtMatmul");
    if (status.ok()) status = CudaStatus(cudaEventRecord(stop, stream), "cudaEventRecord");
    if (status.ok()) status = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0.0f;
    if (status.ok()) {
      status = CudaStatus(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    }
    if (!status.ok()) break;
    if (i == 0) first_ms = ms;
    if (!timed_any || ms < best_ms) {
      best = i;
      best_ms = ms;
      timed_any = true;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  QUIVER_RETURN_IF_ERROR(status);
  // Another algorithm only for a clear gain (timings of a few runs are noisy).
  if (timed_any && best != 0 && (first_ms == 0.0f || best_ms <= 0.95f * first_ms)) {
    p.algo = p.candidates[best];
    ++retuned_;
  }
  p.candidates.clear();
  return absl::OkStatus();
}

absl::Status BlasLt::SetM(Plan& plan, int64_t m) {
  if (plan.m == m) return absl::OkStatus();
  // Same algorithm, the batch's own M: only the B and D column counts change (host calls).
  const uint64_t cols = static_cast<uint64_t>(m);
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatrixLayoutSetAttribute(
      plan.b, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)));
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatrixLayoutSetAttribute(
      plan.d, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)));
  plan.m = m;
  return absl::OkStatus();
}

absl::StatusOr<BlasLt::Plan*> BlasLt::PlanFor(const GemmArgs& g, bool allow_heuristic,
                                              cudaStream_t stream, bool tune) {
  if (g.m < 0 || g.n <= 0 || g.k <= 0 || g.ldx < g.k || g.ldw < g.k || g.ldy < g.n) {
    return absl::InvalidArgumentError(StrCat("cuBLASLt GEMM: bad shape M ", g.m, " N ", g.n, " K ",
                                             g.k, " (ldx ", g.ldx, ", ldw ", g.ldw, ", ldy ", g.ldy,
                                             ")"));
  }
  if (g.epilogue != GemmEpilogue::kNone && g.bias == nullptr) {
    return absl::InvalidArgumentError("cuBLASLt GEMM: a bias epilogue without a bias");
  }
  if (g.epilogue == GemmEpilogue::kBiasGeluTanh && g.c != nullptr) {
    // cuBLASLt adds C before the epilogue: gelu(x·wᵀ + c + bias), not gelu(x·wᵀ + bias) + c.
    return absl::InvalidArgumentError("cuBLASLt GEMM: a residual C with the GELU epilogue");
  }
  const uint32_t align_y =
      std::min(PointerAlignment(g.y), g.c != nullptr ? PointerAlignment(g.c) : 256u);
  Key key{TokenBucket(g.m),
          g.n,
          g.k,
          g.ldx,
          g.ldw,
          g.ldy,
          static_cast<int>(g.epilogue),
          g.y_f32,
          g.c != nullptr,
          PointerAlignment(g.x),
          PointerAlignment(g.w),
          align_y};
  const auto refuse = [&] {
    return absl::FailedPreconditionError(
        StrCat("cuBLASLt GEMM M ", g.m, " N ", g.n, " K ", g.k,
               ": no algorithm checked for it before a CUDA-graph capture (run the bucket eagerly "
               "first)"));
  };
  auto it = algos_.find(key);
  if (it == algos_.end()) {
    if (!allow_heuristic) return refuse();
    QUIVER_ASSIGN_OR_RETURN(std::unique_ptr<Plan> made, MakePlan(g, key, key.m_bucket));
    it = algos_.emplace(key, std::move(made)).first;
  }
  Plan* plan = it->second.get();
  QUIVER_RETURN_IF_ERROR(SetM(*plan, g.m));
  if (tune && !plan->candidates.empty()) QUIVER_RETURN_IF_ERROR(Tune(*plan, g, stream));
  if (plan->checked_m.contains(g.m)) return plan;
  if (!allow_heuristic) return refuse();
  // The heuristic answered for the bucket's M; whether the algorithm also serves this M is
  // cuBLASLt's to say (AlgoCheck, a host call), once per M. Where it does not, this M gets a
  // plan of its own, chosen for it exactly.
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t st =
      Lt().cublasLtMatmulAlgoCheck(static_cast<cublasLtHandle_t>(handle_), plan->op, plan->a,
                                   plan->b, plan->d, plan->d, &plan->algo, &result);
  if (st == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= workspace_.bytes()) {
    plan->checked_m.insert(g.m);
    return plan;
  }
  Key exact = key;
  exact.m_bucket = -g.m;  // negative: a plan for exactly this M
  auto own = algos_.find(exact);
  if (own == algos_.end()) {
    QUIVER_ASSIGN_OR_RETURN(std::unique_ptr<Plan> made, MakePlan(g, exact, g.m));
    own = algos_.emplace(exact, std::move(made)).first;
  }
  if (tune && !own->second->candidates.empty()) {
    QUIVER_RETURN_IF_ERROR(Tune(*own->second, g, stream));
  }
  return own->second.get();
}

absl::Status BlasLt::Prepare(const GemmArgs& args) { return PlanFor(args, true).status(); }

absl::Status BlasLt::Gemm(const GemmArgs& g, cudaStream_t stream) {
  if (g.m == 0) return absl::OkStatus();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
  const bool eager = capture == cudaStreamCaptureStatusNone;
  QUIVER_ASSIGN_OR_RETURN(Plan * plan, PlanFor(g, eager, stream, /*tune=*/eager));
  if (g.epilogue != GemmEpilogue::kNone) {
    QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  const float alpha = 1.0f, beta = g.c != nullptr ? 1.0f : 0.0f;
  const void* c = g.c != nullptr ? g.c : g.y;
  QUIVER_LT_RETURN_IF_ERROR(Lt().cublasLtMatmul(
      static_cast<cublasLtHandle_t>(handle_), plan->op, &alpha, g.w, plan->a, g.x, plan->b, &beta,
      c, plan->d, g.y, plan->d, &plan->algo, workspace_.data(), workspace_.bytes(), stream));
  return absl::OkStatus();
}

}  // namespace quiver::engine::cuda
