// PackedGemm on AVX-512 F (gemm_paths.h): the panels of gemm.h two at a time, 12 rows x 32
// columns of y in 24 zmm accumulators; per k, two weight loads and 12 broadcasts feed 24 fused
// multiply-adds. Each element still starts from its bias (or from y) and adds its products in k
// order with one rounding each, as the AVX2 kernel does: the two give the same bits.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "engine/kernels/cpu/gemm_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace quiver::engine::cpu {
namespace {

#define QUIVER_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

constexpr int64_t kPanel = PackedWeights::kPanel;
constexpr int64_t kRows = 12;    // rows of y per micro-kernel call
constexpr int64_t kDepth = 256;  // k per pass: two panels' 256 x 32 weights (32 KB) stay in L1

// y[0, R) x one or two panels (kTwo) over k in [0, kc): from `init` (32 values: the bias or
// zeros) on the first pass, else from y; mask0 / mask1 select each panel's columns that exist.
// Accumulators are named variables: GCC keeps an array of vectors on the stack.
template <int R, bool kTwo>
QUIVER_AVX512 void MicroKernel(const float* a, int64_t lda, const float* b0, const float* b1,
                               int64_t kc, float* y, int64_t ldy, const float* init,
                               __mmask16 mask0, __mmask16 mask1) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 c0a = zero, c0b = zero, c1a = zero, c1b = zero, c2a = zero, c2b = zero, c3a = zero,
         c3b = zero, c4a = zero, c4b = zero, c5a = zero, c5b = zero, c6a = zero, c6b = zero,
         c7a = zero, c7b = zero, c8a = zero, c8b = zero, c9a = zero, c9b = zero, c10a = zero,
         c10b = zero, c11a = zero, c11b = zero;
#define QUIVER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define QUIVER_LOAD(i)                                                                  \
  if constexpr (R > i) {                                                                \
    if (init != nullptr) {                                                              \
      c##i##a = _mm512_loadu_ps(init);                                                  \
      if constexpr (kTwo) c##i##b = _mm512_loadu_ps(init + kPanel);                     \
    } else {                                                                            \
      c##i##a = _mm512_maskz_loadu_ps(mask0, y + i * ldy);                              \
      if constexpr (kTwo) c##i##b = _mm512_maskz_loadu_ps(mask1, y + i * ldy + kPanel); \
    }                                                                                   \
  }
  QUIVER_ROWS(QUIVER_LOAD)
#undef QUIVER_LOAD
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 w0 = _mm512_load_ps(b0 + k * kPanel);
    const __m512 w1 = kTwo ? _mm512_load_ps(b1 + k * kPanel) : w0;
#define QUIVER_FMA(i)                                              \
  if constexpr (R > i) {                                           \
    const __m512 x = _mm512_set1_ps(a[i * lda + k]);               \
    c##i##a = _mm512_fmadd_ps(x, w0, c##i##a);                     \
    if constexpr (kTwo) c##i##b = _mm512_fmadd_ps(x, w1, c##i##b); \
  }
    QUIVER_ROWS(QUIVER_FMA)
#undef QUIVER_FMA
  }
#define QUIVER_STORE(i)                                                              \
  if constexpr (R > i) {                                                             \
    _mm512_mask_storeu_ps(y + i * ldy, mask0, c##i##a);                              \
    if constexpr (kTwo) _mm512_mask_storeu_ps(y + i * ldy + kPanel, mask1, c##i##b); \
  }
  QUIVER_ROWS(QUIVER_STORE)
#undef QUIVER_STORE
#undef QUIVER_ROWS
}

using Kernel = void (*)(const float*, int64_t, const float*, const float*, int64_t, float*, int64_t,
                        const float*, __mmask16, __mmask16);

template <int... R>
constexpr auto MakeTable(bool two, std::integer_sequence<int, R...>) {
  return two ? std::array<Kernel, sizeof...(R)>{&MicroKernel<R + 1, true>...}
             : std::array<Kernel, sizeof...(R)>{&MicroKernel<R + 1, false>...};
}

}  // namespace

void PackedGemmAvx512(const float* x, int64_t ldx, const PackedWeights& w, const float* bias,
                      float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1, bool accumulate) {
  static constexpr auto kOne = MakeTable(false, std::make_integer_sequence<int, kRows>());
  static constexpr auto kTwo = MakeTable(true, std::make_integer_sequence<int, kRows>());
  const int64_t k = w.k();
  alignas(64) float first[2 * kPanel];
  for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
    const int64_t kc = std::min(kDepth, k - k0);
    for (int64_t col = c0; col < c1; col += 2 * kPanel) {
      const int64_t cols = std::min(2 * kPanel, c1 - col);
      const bool two = cols > kPanel;
      const float* b0 = w.panel(col / kPanel) + k0 * kPanel;
      const float* b1 = two ? w.panel(col / kPanel + 1) + k0 * kPanel : nullptr;
      const auto mask0 = static_cast<__mmask16>((1u << std::min(cols, kPanel)) - 1);
      const auto mask1 = static_cast<__mmask16>(two ? (1u << (cols - kPanel)) - 1 : 0);
      const float* init = nullptr;  // later passes continue from y
      if (k0 == 0 && !accumulate) {
        std::fill(first, first + 2 * kPanel, 0.0f);
        if (bias != nullptr) std::copy(bias + col, bias + col + cols, first);
        init = first;
      }
      const auto& table = two ? kTwo : kOne;
      for (int64_t r = 0; r < m; r += kRows) {
        table[std::min(kRows, m - r) - 1](x + r * ldx + k0, ldx, b0, b1, kc, y + r * ldy + col, ldy,
                                          init, mask0, mask1);
      }
    }
  }
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no avx512 path)

namespace quiver::engine::cpu {
void PackedGemmAvx512(const float* x, int64_t ldx, const PackedWeights& w, const float* bias,
                      float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1, bool accumulate) {
  PackedGemm(x, ldx, w, bias, y, ldy, m, c0, c1, accumulate);
}
}  // namespace quiver::engine::cpu

#endif
