#include "engine/kernels/cpu/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/isa_paths.h"
#include "engine/kernels/cpu/vec.h"

namespace quiver::engine::cpu {
namespace {

constexpr int64_t kPanel = PackedWeights::kPanel;
constexpr int64_t kRows = 6;     // rows of y per micro-kernel call
constexpr int64_t kDepth = 384;  // k per pass: a panel's 384 x 16 weights (24 KB) stay in L1

#if QUIVER_VEC_AVX2

// y[0, R) x [0, cols) of one panel over k in [0, kc): from `init` (16 values: the bias, or
// zeros) on the first pass, else from y itself; meanwhile the 64-byte lines [pf, pf + 64 ·
// pf_lines) are prefetched into L2, one per k from the first. The accumulators are named
// variables, not an array: GCC keeps an array of vectors on the stack, which halves the speed.
template <int R>
void MicroKernel(const float* a, int64_t lda, const float* b, int64_t kc, float* y, int64_t ldy,
                 const float* init, int64_t cols, const char* pf, int64_t pf_lines) {
  alignas(32) float tail[kPanel];
  auto start = [&](int i) -> const float* {
    if (init != nullptr) return init;
    if (cols == kPanel) return y + i * ldy;
    std::fill(tail, tail + kPanel, 0.0f);
    std::copy(y + i * ldy, y + i * ldy + cols, tail);
    return tail;
  };
  auto finish = [&](int i, __m256 lo, __m256 hi) {
    float* out = y + i * ldy;
    if (cols == kPanel) {
      _mm256_storeu_ps(out, lo);
      _mm256_storeu_ps(out + 8, hi);
    } else {
      _mm256_store_ps(tail, lo);
      _mm256_store_ps(tail + 8, hi);
      std::copy(tail, tail + cols, out);
    }
  };
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
#define QUIVER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define QUIVER_LOAD(i)                   \
  if constexpr (R > (i)) {               \
    const float* from = start(i);        \
    c##i##0 = _mm256_loadu_ps(from);     \
    c##i##1 = _mm256_loadu_ps(from + 8); \
  }
  QUIVER_ROWS(QUIVER_LOAD)
#undef QUIVER_LOAD
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 w0 = _mm256_load_ps(b + k * kPanel);
    const __m256 w1 = _mm256_load_ps(b + k * kPanel + 8);
    if (k < pf_lines) _mm_prefetch(pf + 64 * k, _MM_HINT_T1);
#define QUIVER_FMA(i)                                      \
  if constexpr (R > (i)) {                                 \
    const __m256 x = _mm256_broadcast_ss(a + (i)*lda + k); \
    c##i##0 = _mm256_fmadd_ps(x, w0, c##i##0);             \
    c##i##1 = _mm256_fmadd_ps(x, w1, c##i##1);             \
  }
    QUIVER_ROWS(QUIVER_FMA)
#undef QUIVER_FMA
  }
#define QUIVER_STORE(i) \
  if constexpr (R > (i)) finish(i, c##i##0, c##i##1);
  QUIVER_ROWS(QUIVER_STORE)
#undef QUIVER_STORE
#undef QUIVER_ROWS
}

#else  // the same order of operations in plain loops

template <int R>
void MicroKernel(const float* a, int64_t lda, const float* b, int64_t kc, float* y, int64_t ldy,
                 const float* init, int64_t cols, const char*, int64_t) {
  for (int i = 0; i < R; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      float acc = init != nullptr ? init[j] : y[i * ldy + j];
      for (int64_t k = 0; k < kc; ++k) acc += a[i * lda + k] * b[k * kPanel + j];
      y[i * ldy + j] = acc;
    }
  }
}

#endif

void RunMicroKernel(int64_t rows, const float* a, int64_t lda, const float* b, int64_t kc, float* y,
                    int64_t ldy, const float* init, int64_t cols, const char* pf,
                    int64_t pf_lines) {
  using Kernel = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t,
                          const float*, int64_t, const char*, int64_t);
  static constexpr Kernel kKernels[kRows] = {&MicroKernel<1>, &MicroKernel<2>, &MicroKernel<3>,
                                             &MicroKernel<4>, &MicroKernel<5>, &MicroKernel<6>};
  kKernels[std::clamp<int64_t>(rows, 1, kRows) - 1](a, lda, b, kc, y, ldy, init, cols, pf,
                                                    pf_lines);
}

}  // namespace

void PackedWeights::Free::operator()(float* p) const { std::free(p); }

float* PackedWeights::Reserve(int64_t n, int64_t k) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  const int64_t size = panels * k * kPanel;
  if (size > capacity_) {
    const size_t bytes = (static_cast<size_t>(size) * sizeof(float) + 63) / 64 * 64;
    data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (data_ == nullptr) throw std::bad_alloc();
    capacity_ = size;
  }
  n_ = n;
  k_ = k;
  streamed_ = false;
  return data_.get();
}

void PackedWeights::Pack(const float* w, int64_t n, int64_t k, int64_t ldw) {
  float* out = Reserve(n, k);
  const bool avx512 = ActiveCpuPath() >= CpuPath::kAvx512;
  for (int64_t p = 0; p * kPanel < n; ++p) {
    const int64_t cols = std::min(kPanel, n - p * kPanel);
    if (avx512) {  // the panel is a transpose of w's 16 rows: 16 x 16 in registers at a time
      PackRowsAvx512(w + p * kPanel * ldw, ldw, cols, k, out, kPanel);
      out += k * kPanel;
      continue;
    }
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t j = 0; j < cols; ++j) out[j] = w[(p * kPanel + j) * ldw + kk];
      std::fill(out + cols, out + kPanel, 0.0f);
      out += kPanel;
    }
  }
}

void PackedWeights::PackTransposed(const float* v, int64_t k, int64_t n, int64_t ldv) {
  float* out = Reserve(n, k);
  for (int64_t p = 0; p * kPanel < n; ++p) {
    const int64_t cols = std::min(kPanel, n - p * kPanel);
    for (int64_t kk = 0; kk < k; ++kk) {
      const float* row = v + kk * ldv + p * kPanel;
      if (cols == kPanel) {  // a whole panel row: one 64-byte copy, inlined (not a memmove call)
        std::memcpy(out, row, kPanel * sizeof(float));
      } else {
        std::copy_n(row, cols, out);
        std::fill(out + cols, out + kPanel, 0.0f);
      }
      out += kPanel;
    }
  }
}

void PackedGemm(const float* x, int64_t ldx, const PackedWeights& w, const float* bias, float* y,
                int64_t ldy, int64_t m, int64_t c0, int64_t c1, bool accumulate) {
  PackedGemmSlice(x, ldx, w, 0, w.k(), bias, y, ldy, m, c0, c1, accumulate);
}

void PackedGemmSlice(const float* x, int64_t ldx, const PackedWeights& w, int64_t k_begin,
                     int64_t k_end, const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0,
                     int64_t c1, bool accumulate) {
  if (ActiveCpuPath() >= CpuPath::kAvx512) {
    PackedGemmAvx512(x, ldx, w, k_begin, k_end, bias, y, ldy, m, c0, c1, accumulate);
    return;
  }
  alignas(32) static constexpr float kZeros[kPanel] = {};
  alignas(32) float first[kPanel];
  const int64_t strips = (m + kRows - 1) / kRows;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kDepth) {
    const int64_t kc = std::min(kDepth, k_end - k0);
    for (int64_t col = c0; col < c1; col += kPanel) {
      const int64_t cols = std::min(kPanel, c1 - col);
      const float* b = w.panel(col / kPanel) + k0 * kPanel;
      // Streamed weights (gemm.h): the next panel (or the first of the next pass), its kc lines
      // shared out over this panel's strips, prefetched into L2 while they run; from
      // StreamedPrefetchMinRows() rows (cpu_features.h), as the AVX-512 kernel.
      const char* next = nullptr;
      int64_t next_lines = 0;
      if (w.streamed() && m >= StreamedPrefetchMinRows()) {
        const int64_t next_col = col + kPanel < c1 ? col + kPanel : c0;
        const int64_t next_k = next_col == c0 ? k0 + kDepth : k0;
        if (next_k < k_end) {
          next = reinterpret_cast<const char*>(w.panel(next_col / kPanel) + next_k * kPanel);
          next_lines = std::min(kDepth, k_end - next_k);
        }
      }
      const float* init = nullptr;  // later passes continue from y
      if (k0 == k_begin && !accumulate) {
        // Without a bias, constant zeros: zeros stored just before the micro-kernel's loads
        // kept those loads waiting (Bf16GemmAvx512 says how much).
        init = kZeros;
        if (bias != nullptr) {
          std::fill(first, first + kPanel, 0.0f);
          std::copy(bias + col, bias + col + cols, first);
          init = first;
        }
      }
      for (int64_t r = 0, j = 0; r < m; r += kRows, ++j) {
        const int64_t from = next_lines * j / strips, to = next_lines * (j + 1) / strips;
        RunMicroKernel(std::min(kRows, m - r), x + r * ldx + (k0 - k_begin), ldx, b, kc,
                       y + r * ldy + col, ldy, init, cols, next + 64 * from, to - from);
      }
    }
  }
}

}  // namespace quiver::engine::cpu
