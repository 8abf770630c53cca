// Bf16Gemm on AVX512_BF16 (gemm_bf16.h): panels two at a time, 14 rows x 32 columns of y in 28
// zmm accumulators; per pair of k, two weight loads and 14 broadcast pairs feed 28 vdpbf16ps.
// k runs in passes of kDepthPairs so that the two panels stay in L1; each pass starts from the
// bias (the first) or from y.
#include "engine/kernels/cpu/gemm_bf16.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace quiver::engine::cpu {

bool Bf16Supported() {
#if defined(__x86_64__)
  return HostCpuFeatures().avx512_bf16 && ActiveCpuPath() >= CpuPath::kAvx512;
#else
  return false;
#endif
}

#if defined(__x86_64__)
namespace {

constexpr int64_t kPanel = Bf16Weights::kPanel;
constexpr int64_t kRows = 14;         // rows of y per micro-kernel call
constexpr int64_t kDepthPairs = 192;  // pairs of k per pass: two panels, 24 KB, in L1

// n f32 values to bf16, round to nearest even (the instruction's own rounding).
QUIVER_TARGET_AVX512_BF16 void ToBf16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), reinterpret_cast<const __m256i&>(v));
  }
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, x + i));
    _mm256_mask_storeu_epi16(out + i, mask, reinterpret_cast<const __m256i&>(v));
  }
}

template <int R, bool kTwo>
QUIVER_TARGET_AVX512_BF16 void MicroKernel(const uint16_t* a, int64_t lda, const uint16_t* b0,
                                           const uint16_t* b1, int64_t pairs, float* y, int64_t ldy,
                                           const float* init, __mmask16 mask0, __mmask16 mask1) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 c0a = zero, c0b = zero, c1a = zero, c1b = zero, c2a = zero, c2b = zero, c3a = zero,
         c3b = zero, c4a = zero, c4b = zero, c5a = zero, c5b = zero, c6a = zero, c6b = zero,
         c7a = zero, c7b = zero, c8a = zero, c8b = zero, c9a = zero, c9b = zero, c10a = zero,
         c10b = zero, c11a = zero, c11b = zero, c12a = zero, c12b = zero, c13a = zero, c13b = zero;
#define QUIVER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define QUIVER_LOAD(i)                                                                  \
  if constexpr (R > (i)) {                                                              \
    if (init != nullptr) {                                                              \
      c##i##a = _mm512_loadu_ps(init);                                                  \
      if constexpr (kTwo) c##i##b = _mm512_loadu_ps(init + kPanel);                     \
    } else {                                                                            \
      c##i##a = _mm512_maskz_loadu_ps(mask0, y + (i)*ldy);                              \
      if constexpr (kTwo) c##i##b = _mm512_maskz_loadu_ps(mask1, y + (i)*ldy + kPanel); \
    }                                                                                   \
  }
  QUIVER_ROWS(QUIVER_LOAD)
#undef QUIVER_LOAD
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512i w0i = _mm512_load_si512(b0 + p * 2 * kPanel);
    const __m512i w1i = kTwo ? _mm512_load_si512(b1 + p * 2 * kPanel) : w0i;
    const __m512bh w0 = reinterpret_cast<const __m512bh&>(w0i);
    const __m512bh w1 = reinterpret_cast<const __m512bh&>(w1i);
#define QUIVER_DOT(i)                                               \
  if constexpr (R > (i)) {                                          \
    int32_t pair;                                                   \
    std::memcpy(&pair, a + (i)*lda + 2 * p, sizeof(pair));          \
    const __m512i xi = _mm512_set1_epi32(pair);                     \
    const __m512bh x = reinterpret_cast<const __m512bh&>(xi);       \
    c##i##a = _mm512_dpbf16_ps(c##i##a, x, w0);                     \
    if constexpr (kTwo) c##i##b = _mm512_dpbf16_ps(c##i##b, x, w1); \
  }
    QUIVER_ROWS(QUIVER_DOT)
#undef QUIVER_DOT
  }
#define QUIVER_STORE(i)                                                              \
  if constexpr (R > (i)) {                                                           \
    _mm512_mask_storeu_ps(y + (i)*ldy, mask0, c##i##a);                              \
    if constexpr (kTwo) _mm512_mask_storeu_ps(y + (i)*ldy + kPanel, mask1, c##i##b); \
  }
  QUIVER_ROWS(QUIVER_STORE)
#undef QUIVER_STORE
#undef QUIVER_ROWS
}

using Kernel = void (*)(const uint16_t*, int64_t, const uint16_t*, const uint16_t*, int64_t, float*,
                        int64_t, const float*, __mmask16, __mmask16);

template <bool kTwo, int... R>
constexpr std::array<Kernel, sizeof...(R)> MakeTable(std::integer_sequence<int, R...>) {
  return {&MicroKernel<R + 1, kTwo>...};
}

template <bool kTwo>
constexpr auto kTable = MakeTable<kTwo>(std::make_integer_sequence<int, kRows>());

}  // namespace

void Bf16Weights::Pack(const float* w, int64_t n, int64_t k, int64_t ldw) {
  Reserve(n, k);
  PackByColumns([&](int64_t c, uint16_t* out) {  // column c: w's row c in bf16
    ToBf16(w + c * ldw, k, out);
    if (k % 2 != 0) out[k] = 0;
  });
}

QUIVER_TARGET_AVX512_BF16 void Bf16Weights::PackTransposed(const float* v, int64_t k, int64_t n,
                                                           int64_t ldv) {
  uint16_t* data = Reserve(n, k);
  const int64_t pairs = k_pairs();
  // Pair p of k: rows 2p and 2p + 1 of v in bf16, 16 columns at a time, both rounded by one
  // vcvtne2ps2bf16 (row 2p's 16 values low, 2p + 1's high) and interleaved by one vpermw into
  // the panel's 32-bit words (row 2p's value low, 2p + 1's high).
  alignas(64) static constexpr uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  for (int64_t p = 0; p < pairs; ++p) {
    const float* even = v + 2 * p * ldv;
    const float* odd = 2 * p + 1 < k ? even + ldv : nullptr;
    for (int64_t c0 = 0; c0 < n; c0 += kPanel) {
      const __mmask16 mask = PanelColumnMask(n - c0);
      // Past n, and past k (odd k) for the pair's second value: zeros convert to zeros.
      const __m512bh both = _mm512_cvtne2ps_pbh(
          odd != nullptr ? _mm512_maskz_loadu_ps(mask, odd + c0) : _mm512_setzero_ps(),
          _mm512_maskz_loadu_ps(mask, even + c0));
      _mm512_store_si512(
          data + (c0 / kPanel) * pairs * 2 * kPanel + p * 2 * kPanel,
          _mm512_permutexvar_epi16(interleave, reinterpret_cast<const __m512i&>(both)));
    }
  }
}

void Bf16Rows(const float* x, int64_t ldx, int64_t k, int64_t r0, int64_t r1, uint16_t* a) {
  const int64_t width = (k + 1) / 2 * 2;
  for (int64_t r = r0; r < r1; ++r) {
    ToBf16(x + r * ldx, k, a + r * width);
    if (width > k) a[r * width + k] = 0;
  }
}

bool Bf16InTiles() {
  return ActiveCpuPath() == CpuPath::kAmx && HostCpuFeatures().amx_bf16 && AmxBf16Agree();
}

bool Bf16ProductsFast() {
  return Bf16InTiles() || (Bf16Supported() && HostCpuFeatures().vendor == "AuthenticAMD");
}

void Bf16Gemm(const uint16_t* a, const Bf16Weights& w, const float* bias, float* y, int64_t ldy,
              int64_t m, int64_t c0, int64_t c1, bool accumulate) {
  if (Bf16InTiles()) {
    Bf16GemmAmx(a, w, bias, y, ldy, m, c0, c1, accumulate);
  } else {
    Bf16GemmAvx512(a, w, bias, y, ldy, m, c0, c1, accumulate);
  }
}

void Bf16GemmAvx512(const uint16_t* a, const Bf16Weights& w, const float* bias, float* y,
                    int64_t ldy, int64_t m, int64_t c0, int64_t c1, bool accumulate) {
  const int64_t pairs = w.k_pairs(), lda = 2 * pairs;
  // Each block's first pass starts from its columns' bias, or from zeros. Without a bias (the
  // attention's products), the zeros are a constant: filling a buffer before each block left
  // the micro-kernel's first loads of it waiting on those stores (perf: 2.4% of an int8 batch
  // of 100 x 128 tokens on Zen 5 in this function, most of it there).
  alignas(64) static constexpr float kZeros[2 * kPanel] = {};
  alignas(64) float biased[2 * kPanel];
  for (int64_t col = c0; col < c1; col += 2 * kPanel) {
    const int64_t cols = std::min(2 * kPanel, c1 - col);
    const bool two = cols > kPanel;
    const __mmask16 mask0 = PanelColumnMask(cols), mask1 = PanelColumnMask(cols - kPanel);
    const float* init = kZeros;
    if (bias != nullptr) {
      for (int64_t j = 0; j < 2 * kPanel; ++j) biased[j] = j < cols ? bias[col + j] : 0.0f;
      init = biased;
    }
    const uint16_t* b0 = w.panel(col / kPanel);
    const uint16_t* b1 = two ? w.panel(col / kPanel + 1) : b0;
    for (int64_t p0 = 0; p0 < pairs; p0 += kDepthPairs) {
      const int64_t pc = std::min(kDepthPairs, pairs - p0);
      for (int64_t r = 0, rows = 0; r < m; r += rows) {
        rows = KernelRows(m, r, kRows);
        const Kernel kernel = two ? kTable<true>[rows - 1] : kTable<false>[rows - 1];
        kernel(a + r * lda + 2 * p0, lda, b0 + p0 * 2 * kPanel, b1 + p0 * 2 * kPanel, pc,
               y + r * ldy + col, ldy, p0 == 0 && !accumulate ? init : nullptr, mask0, mask1);
      }
    }
  }
}

#else  // not x86-64: Bf16Supported() is false and nothing calls these.

void Bf16Weights::Pack(const float*, int64_t n, int64_t k, int64_t) { Reserve(n, k); }
void Bf16Weights::PackTransposed(const float*, int64_t k, int64_t n, int64_t) { Reserve(n, k); }
void Bf16Rows(const float*, int64_t, int64_t, int64_t, int64_t, uint16_t*) {}
bool Bf16InTiles() { return false; }
void Bf16Gemm(const uint16_t*, const Bf16Weights&, const float*, float*, int64_t, int64_t, int64_t,
              int64_t, bool) {}

#endif

}  // namespace quiver::engine::cpu
