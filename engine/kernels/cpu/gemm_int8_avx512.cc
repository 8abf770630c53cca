// QuantizedGemm on AVX-512 (isa_paths.h): the panels of gemm_int8.h two at a time, 12 rows x
// 32 columns of int32 sums in 24 zmm accumulators. A panel's 16 columns of one k pair are 32
// int8 values, widened to 32 int16 in one zmm (columns 0-7 in the low half, 8-15 in the high,
// each as its pair), so one vpmaddwd (AVX-512 BW, then vpaddd) or one vpdpwssd (AVX-512 VNNI)
// adds a row's two products to all 16 columns. The sums are exact integers, as on the AVX2
// path, and the f32 epilogue the same fused multiply-add: the paths give the same bits.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
// GCC 12 warns of the undefined source _mm512_cvtepi32_ps passes its builtin (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace quiver::engine::cpu {
namespace {

constexpr int64_t kPanel = QuantizedWeights::kPanel;
constexpr int64_t kRows = 12;  // rows of y per micro-kernel call

template <bool kVnni>
struct Madd;

template <>
struct Madd<false> {
  // In place on the accumulator, as Madd<true> (the intrinsics spilled accumulators here too).
  QUIVER_TARGET_AVX512 static __m512i Add(__m512i acc, __m512i x, __m512i w) {
    __m512i product;
    __asm__("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0"
            : "+v"(acc), "=&v"(product)
            : "v"(x), "v"(w));
    return acc;
  }
};

template <>
struct Madd<true> {
  // vpdpwssd in place on the accumulator. GCC 12's _mm512_dpwssd_epi32 left the accumulators'
  // registers untied: it copied and spilled them to the stack on every step (half the speed).
  QUIVER_TARGET_AVX512_VNNI static __m512i Add(__m512i acc, __m512i x, __m512i w) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
    return acc;
  }
};

// y = acc · (row scale · column scale) + bias for the columns `mask` selects of one panel.
QUIVER_TARGET_AVX512 inline void Epilogue(__m512i acc, float row_scale, const float* col_scale,
                                          const float* bias, float* y, __mmask16 mask) {
  const __m512 cs = _mm512_maskz_loadu_ps(mask, col_scale);
  const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  const __m512 r =
      _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(_mm512_set1_ps(row_scale), cs), b);
  _mm512_mask_storeu_ps(y, mask, r);
}

// Rows [0, R) of y over one or two panels (kTwo): int32 sums over all k pairs, then the
// epilogue. Accumulators are named variables, as in gemm_avx512.cc.
template <int R, bool kTwo, bool kVnni, bool kPacked>
QUIVER_TARGET_AVX512_VNNI void MicroKernel(const int16_t* a, int64_t lda, const int8_t* b0,
                                           const int8_t* b1, int64_t pairs, const float* row_scale,
                                           const float* col_scale, const float* bias, float* y,
                                           int64_t ldy, __mmask16 mask0, __mmask16 mask1) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i c0a = zero, c0b = zero, c1a = zero, c1b = zero, c2a = zero, c2b = zero, c3a = zero,
          c3b = zero, c4a = zero, c4b = zero, c5a = zero, c5b = zero, c6a = zero, c6b = zero,
          c7a = zero, c7b = zero, c8a = zero, c8b = zero, c9a = zero, c9b = zero, c10a = zero,
          c10b = zero, c11a = zero, c11b = zero;
#define QUIVER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512i w0 = _mm512_cvtepi8_epi16(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(b0 + p * 2 * kPanel)));
    const __m512i w1 = kTwo ? _mm512_cvtepi8_epi16(_mm256_load_si256(
                                  reinterpret_cast<const __m256i*>(b1 + p * 2 * kPanel)))
                            : w0;
#define QUIVER_MADD(i)                                                              \
  if constexpr (R > i) {                                                            \
    int32_t pair;                                                                   \
    std::memcpy(&pair, kPacked ? a + 2 * (p * kRows + i) : a + i * lda + 2 * p, 4); \
    const __m512i x = _mm512_set1_epi32(pair);                                      \
    c##i##a = Madd<kVnni>::Add(c##i##a, x, w0);                                     \
    if constexpr (kTwo) c##i##b = Madd<kVnni>::Add(c##i##b, x, w1);                 \
  }
    QUIVER_ROWS(QUIVER_MADD)
#undef QUIVER_MADD
  }
  const float* bias1 = bias != nullptr ? bias + kPanel : nullptr;
#define QUIVER_STORE(i)                                                                        \
  if constexpr (R > i) {                                                                       \
    Epilogue(c##i##a, row_scale[i], col_scale, bias, y + i * ldy, mask0);                      \
    if constexpr (kTwo) {                                                                      \
      Epilogue(c##i##b, row_scale[i], col_scale + kPanel, bias1, y + i * ldy + kPanel, mask1); \
    }                                                                                          \
  }
  QUIVER_ROWS(QUIVER_STORE)
#undef QUIVER_STORE
#undef QUIVER_ROWS
}

using Kernel = void (*)(const int16_t*, int64_t, const int8_t*, const int8_t*, int64_t,
                        const float*, const float*, const float*, float*, int64_t, __mmask16,
                        __mmask16);

template <bool kTwo, bool kVnni, bool kPacked, int... R>
constexpr std::array<Kernel, sizeof...(R)> MakeTable(std::integer_sequence<int, R...>) {
  return {&MicroKernel<R + 1, kTwo, kVnni, kPacked>...};
}

template <bool kTwo, bool kVnni, bool kPacked>
constexpr auto kTable = MakeTable<kTwo, kVnni, kPacked>(std::make_integer_sequence<int, kRows>());

template <bool kVnni, bool kPacked>
const std::array<Kernel, kRows>& Table(bool two) {
  return two ? kTable<true, kVnni, kPacked> : kTable<false, kVnni, kPacked>;
}

// As in gemm_avx512.cc: packing the rows pays where a call spans many columns.
constexpr int64_t kMinPackedCols = 8 * kPanel;

}  // namespace

void QuantizedGemmAvx512(const int16_t* q, const float* scale, const QuantizedWeights& w,
                         const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0,
                         int64_t c1, bool vnni) {
  const int64_t pairs = w.k_pairs(), lda = 2 * pairs;
  // The rows' int16 pairs, as int32, packed per block of 12 rows as [pairs][12]: the broadcasts
  // read one sequential stream, not 12 strided ones (the packing is a bitwise copy).
  const bool pack = c1 - c0 >= kMinPackedCols;
  thread_local std::vector<int16_t> packed;
  if (pack) {
    packed.resize(static_cast<size_t>((m + kRows - 1) / kRows * kRows * lda));
    for (int64_t r = 0; r < m; r += kRows) {
      PackRowsAvx512(reinterpret_cast<const float*>(q + r * lda), pairs, std::min(kRows, m - r),
                     pairs, reinterpret_cast<float*>(packed.data() + r * lda), kRows);
    }
  }
  for (int64_t col = c0; col < c1; col += 2 * kPanel) {
    const int64_t cols = std::min(2 * kPanel, c1 - col);
    const bool two = cols > kPanel;
    const int8_t* b0 = w.panel(col / kPanel);
    const int8_t* b1 = two ? w.panel(col / kPanel + 1) : nullptr;
    const auto mask0 = static_cast<__mmask16>((1u << std::min(cols, kPanel)) - 1);
    const auto mask1 = static_cast<__mmask16>(two ? (1u << (cols - kPanel)) - 1 : 0);
    const std::array<Kernel, kRows>& table =
        vnni ? (pack ? Table<true, true>(two) : Table<true, false>(two))
             : (pack ? Table<false, true>(two) : Table<false, false>(two));
    const float* col_bias = bias != nullptr ? bias + col : nullptr;
    for (int64_t r = 0; r < m; r += kRows) {
      const int16_t* a = pack ? packed.data() + r * lda : q + r * lda;
      table[std::min(kRows, m - r) - 1](a, lda, b0, b1, pairs, scale + r, w.scales() + col,
                                        col_bias, y + r * ldy + col, ldy, mask0, mask1);
    }
  }
}

QUIVER_TARGET_AVX512 void QuantizeRowsAvx512(const float* x, int64_t ldx, int64_t k, int32_t levels,
                                             int64_t r0, int64_t r1, int16_t* q, float* scale) {
  const int64_t width = (k + 1) / 2 * 2;
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * ldx;
    int16_t* out = q + r * width;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; i += 16) {
      const auto mask = static_cast<__mmask16>(k - i >= 16 ? 0xffff : (1u << (k - i)) - 1);
      acc = _mm512_max_ps(acc, _mm512_and_ps(_mm512_maskz_loadu_ps(mask, row + i), magnitude));
    }
    const float amax = _mm512_reduce_max_ps(acc);  // a maximum: the same in any order
    const float inv = ActivationInverse(amax, levels);
    scale[r] = ActivationScale(amax, levels, inv);
    if (inv == 0.0f) {  // zeros, written: x · 0 is NaN for an infinite x
      std::fill(out, out + width, int16_t{0});
      continue;
    }
    const __m512 vinv = _mm512_set1_ps(inv);
    for (int64_t i = 0; i < k; i += 16) {
      const auto mask = static_cast<__mmask16>(k - i >= 16 ? 0xffff : (1u << (k - i)) - 1);
      // Round to nearest even (the MXCSR default), as QuantizeRows; |p| <= levels fits int16.
      const __m512i p =
          _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, row + i), vinv));
      _mm256_mask_storeu_epi16(out + i, mask, _mm512_cvtsepi32_epi16(p));
    }
    if (width > k) out[k] = 0;
  }
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no avx512 path)

namespace quiver::engine::cpu {
void QuantizedGemmAvx512(const int16_t* q, const float* scale, const QuantizedWeights& w,
                         const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0,
                         int64_t c1, bool) {
  QuantizedGemm(q, scale, w, bias, y, ldy, m, c0, c1);
}
void QuantizeRowsAvx512(const float*, int64_t, int64_t, int32_t, int64_t, int64_t, int16_t*,
                        float*) {
  std::abort();  // the avx512 paths exist on x86-64 only
}
}  // namespace quiver::engine::cpu

#endif
