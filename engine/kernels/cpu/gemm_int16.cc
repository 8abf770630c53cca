// Int16Gemm on AVX-512 VNNI (gemm_int16.h): panels two at a time, 14 rows x 32 columns of y in 28
// zmm int32 accumulators; per pair of k, two weight loads and 14 broadcast pairs feed 28
// vpdpwssd; the whole depth in one pass (attention's: a head's 32-128 values for the scores, a
// key block's up to 512 for P · V, two panels of at most 32 KB), then each row's sums converted
// and scaled.
#include "engine/kernels/cpu/gemm_int16.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>
// GCC 12 warns of the undefined sources _mm512_cvtepi32_ps and _mm512_reduce_max_ps pass their
// builtins (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace quiver::engine::cpu {

bool Int16ProductsSupported() { return ActiveCpuPath() >= CpuPath::kAvx512Vnni; }

int32_t Int16Limit(int64_t depth) {
  const int64_t terms = std::max<int64_t>(2, (depth + 1) / 2 * 2);
  auto limit = static_cast<int64_t>(std::sqrt(2147483647.0 / static_cast<double>(terms)));
  while (limit * limit * terms > 2147483647) --limit;  // the square root's rounding, if any
  return static_cast<int32_t>(std::min<int64_t>(limit, 32767));
}

#if defined(__x86_64__)
namespace {

constexpr int64_t kPanel = Int16Weights::kPanel;
constexpr int64_t kRows = 14;  // rows of y per micro-kernel call

// For 16 largest magnitudes `top`, the scales top / limit and inverse scales limit / top of the
// lanes in `store` into scale and inv (0 and 0 where top is 0: zeros quantize as zeros).
QUIVER_TARGET_AVX512 inline void StoreScales(__m512 top, int32_t limit, __mmask16 store,
                                             float* scale, float* inv) {
  const __m512 vlimit = _mm512_set1_ps(static_cast<float>(limit));
  const __mmask16 positive = _mm512_cmp_ps_mask(top, _mm512_setzero_ps(), _CMP_GT_OQ);
  _mm512_mask_storeu_ps(scale, store, _mm512_maskz_div_ps(positive, top, vlimit));
  _mm512_mask_storeu_ps(inv, store, _mm512_maskz_div_ps(positive, vlimit, top));
}

// For rows [0, rows) (rows <= 16) of n values (row stride ld), each row's scale and inverse
// scale for `limit` from its largest |value| (0 and 0 for a row of zeros), into scale[r] and inv[r]
// (nothing written past rows). The 16 rows' maxima reduced at once, by a transposition that
// halves the lanes at each of four steps (45 operations, where a reduction per row takes 8 and a
// call), and the divisions done on 16 lanes: a maximum is exact and a lane's division is the
// scalar one, so the same bits as per row.
QUIVER_TARGET_AVX512 void RowScales(const float* x, int64_t ld, int64_t rows, int64_t n,
                                    int32_t limit, float* scale, float* inv) {
  __m512 m[16];
  for (int64_t r = 0; r < 16; ++r) {
    m[r] = _mm512_setzero_ps();
    if (r >= rows) continue;
    const float* row = x + r * ld;
    for (int64_t i = 0; i < n; i += 16) {
      m[r] = _mm512_max_ps(m[r],
                           _mm512_abs_ps(_mm512_maskz_loadu_ps(PanelColumnMask(n - i), row + i)));
    }
  }
  // Each 128-bit lane of a[i]: the maxima of rows 2i and 2i + 1 over its elements 0, 2 and 1, 3.
  __m512 a[8];
  for (int64_t i = 0; i < 8; ++i) {
    a[i] = _mm512_max_ps(_mm512_unpacklo_ps(m[2 * i], m[2 * i + 1]),
                         _mm512_unpackhi_ps(m[2 * i], m[2 * i + 1]));
  }
  // Each 128-bit lane of b[i]: its maxima of rows 4i .. 4i + 3.
  __m512 b[4];
  for (int64_t i = 0; i < 4; ++i) {
    b[i] = _mm512_max_ps(_mm512_shuffle_ps(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(a[2 * i], a[2 * i + 1], 0xee));
  }
  // Then over the 128-bit lanes: lane r of top is row r's maximum.
  const __m512 d0 =
      _mm512_max_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88), _mm512_shuffle_f32x4(b[0], b[1], 0xdd));
  const __m512 d1 =
      _mm512_max_ps(_mm512_shuffle_f32x4(b[2], b[3], 0x88), _mm512_shuffle_f32x4(b[2], b[3], 0xdd));
  const __m512 top =
      _mm512_max_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xdd));
  StoreScales(top, limit, PanelColumnMask(rows), scale, inv);
}

// 16 values x · inv rounded to nearest even and clamped to [-limit, limit], as int32 lanes.
QUIVER_TARGET_AVX512 inline __m512i Quantize16(__m512 x, __m512 inv, __m512i limit) {
  const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, inv));
  return _mm512_max_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), limit),
                          _mm512_min_epi32(q, limit));
}

// n values of x quantized with one inverse scale into out[0, n), zeros to `width`.
QUIVER_TARGET_AVX512 void QuantizeRow(const float* x, int64_t n, int64_t width, float inv,
                                      int32_t limit, int16_t* out) {
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i vlimit = _mm512_set1_epi32(limit);
  for (int64_t i = 0; i < width; i += 16) {
    const __mmask16 load = PanelColumnMask(n - i), store = PanelColumnMask(width - i);
    const __m512i q = Quantize16(_mm512_maskz_loadu_ps(load, x + i), vinv, vlimit);
    _mm256_mask_storeu_epi16(out + i, store, _mm512_cvtepi32_epi16(q));
  }
}

// acc += the pairs' products, in place on the accumulator: GCC 12's _mm512_dpwssd_epi32 leaves
// the accumulator's register untied, and the kernel copied and spilled every accumulator on
// every step (gemm_int8_avx512.cc's Madd says the same).
QUIVER_TARGET_AVX512_VNNI inline __m512i Dpwssd(__m512i acc, __m512i x, __m512i w) {
  __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
  return acc;
}

template <int R, bool kTwo, bool kAccumulate>
QUIVER_TARGET_AVX512_VNNI void MicroKernel(const int16_t* a, int64_t lda, const int16_t* b0,
                                           const int16_t* b1, int64_t pairs, float* y, int64_t ldy,
                                           const float* row_scale, const float* col_scale,
                                           __mmask16 mask0, __mmask16 mask1) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i c0a = zero, c0b = zero, c1a = zero, c1b = zero, c2a = zero, c2b = zero, c3a = zero,
          c3b = zero, c4a = zero, c4b = zero, c5a = zero, c5b = zero, c6a = zero, c6b = zero,
          c7a = zero, c7b = zero, c8a = zero, c8b = zero, c9a = zero, c9b = zero, c10a = zero,
          c10b = zero, c11a = zero, c11b = zero, c12a = zero, c12b = zero, c13a = zero, c13b = zero;
#define QUIVER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512i w0 = _mm512_load_si512(b0 + p * 2 * kPanel);
    const __m512i w1 = kTwo ? _mm512_load_si512(b1 + p * 2 * kPanel) : w0;
#define QUIVER_DOT(i)                                      \
  if constexpr (R > (i)) {                                 \
    int32_t pair;                                          \
    std::memcpy(&pair, a + (i)*lda + 2 * p, sizeof(pair)); \
    const __m512i x = _mm512_set1_epi32(pair);             \
    c##i##a = Dpwssd(c##i##a, x, w0);                      \
    if constexpr (kTwo) c##i##b = Dpwssd(c##i##b, x, w1);  \
  }
    QUIVER_ROWS(QUIVER_DOT)
#undef QUIVER_DOT
  }
  const __m512 cs0 = _mm512_loadu_ps(col_scale);
  const __m512 cs1 = kTwo ? _mm512_loadu_ps(col_scale + kPanel) : cs0;
  // float(sum) · (row scale · column scale), added to y with one rounding (an FMA) where it
  // accumulates.
#define QUIVER_STORE_ONE(i, acc, cs, mask, at)                                                 \
  {                                                                                            \
    const __m512 s = _mm512_mul_ps(_mm512_set1_ps(row_scale[i]), cs);                          \
    const __m512 v = _mm512_cvtepi32_ps(acc);                                                  \
    _mm512_mask_storeu_ps(at, mask,                                                            \
                          kAccumulate ? _mm512_fmadd_ps(v, s, _mm512_maskz_loadu_ps(mask, at)) \
                                      : _mm512_mul_ps(v, s));                                  \
  }
#define QUIVER_STORE(i)                                                                \
  if constexpr (R > (i)) {                                                             \
    QUIVER_STORE_ONE(i, c##i##a, cs0, mask0, y + (i)*ldy)                              \
    if constexpr (kTwo) QUIVER_STORE_ONE(i, c##i##b, cs1, mask1, y + (i)*ldy + kPanel) \
  }
  QUIVER_ROWS(QUIVER_STORE)
#undef QUIVER_STORE
#undef QUIVER_STORE_ONE
#undef QUIVER_ROWS
}

using Kernel = void (*)(const int16_t*, int64_t, const int16_t*, const int16_t*, int64_t, float*,
                        int64_t, const float*, const float*, __mmask16, __mmask16);

template <bool kTwo, bool kAccumulate, int... R>
constexpr std::array<Kernel, sizeof...(R)> MakeTable(std::integer_sequence<int, R...>) {
  return {&MicroKernel<R + 1, kTwo, kAccumulate>...};
}

template <bool kTwo, bool kAccumulate>
constexpr auto kTable = MakeTable<kTwo, kAccumulate>(std::make_integer_sequence<int, kRows>());

}  // namespace

int16_t* Int16Weights::ReserveWithScales(int64_t n, int64_t k) {
  int16_t* data = Reserve(n, k);
  scales_.assign(static_cast<size_t>((n + kPanel - 1) / kPanel * kPanel), 0.0f);
  return data;
}

void Int16Weights::Pack(const float* w, int64_t n, int64_t k, int64_t ldw, int32_t limit) {
  ReserveWithScales(n, k);
  const int64_t width = 2 * k_pairs();
  alignas(64) float inv[kPanel];
  PackByColumns([&](int64_t c, int16_t* out) {  // column c: w's row c on its own scale
    // A panel's columns come in order: its first one takes the 16 scales.
    if (c % kPanel == 0) {
      RowScales(w + c * ldw, ldw, std::min(kPanel, n - c), k, limit, scales_.data() + c, inv);
    }
    QuantizeRow(w + c * ldw, k, width, inv[c % kPanel], limit, out);
  });
}

QUIVER_TARGET_AVX512 void Int16Weights::PackTransposed(const float* v, int64_t k, int64_t n,
                                                       int64_t ldv, int32_t limit,
                                                       int64_t range_rows) {
  int16_t* data = ReserveWithScales(n, k);
  const int64_t pairs = k_pairs();
  // Each column's largest |value| over range_rows rows, 16 columns at a time.
  thread_local std::vector<float> inv;
  inv.assign(scales_.size(), 0.0f);
  for (int64_t c0 = 0; c0 < n; c0 += kPanel) {
    const __mmask16 mask = PanelColumnMask(n - c0);
    __m512 top = _mm512_setzero_ps();
    for (int64_t kk = 0; kk < std::max(k, range_rows); ++kk) {
      top = _mm512_max_ps(top, _mm512_abs_ps(_mm512_maskz_loadu_ps(mask, v + kk * ldv + c0)));
    }
    StoreScales(top, limit, mask, scales_.data() + c0, inv.data() + c0);
  }
  // Pair p of k: rows 2p and 2p + 1 of v quantized, 16 columns at a time, into the panel's
  // 32-bit words (row 2p's value low, 2p + 1's high). Past n the inverse scales are 0 (zeros);
  // past k (odd k) the high half is zero.
  const __m512i vlimit = _mm512_set1_epi32(limit), low = _mm512_set1_epi32(0xFFFF);
  for (int64_t p = 0; p < pairs; ++p) {
    const float* even = v + 2 * p * ldv;
    const float* odd = 2 * p + 1 < k ? even + ldv : nullptr;
    for (int64_t c0 = 0; c0 < n; c0 += kPanel) {
      const __mmask16 mask = PanelColumnMask(n - c0);
      const __m512 vinv = _mm512_loadu_ps(inv.data() + c0);
      const __m512i qe = Quantize16(_mm512_maskz_loadu_ps(mask, even + c0), vinv, vlimit);
      const __m512i qo = odd != nullptr
                             ? Quantize16(_mm512_maskz_loadu_ps(mask, odd + c0), vinv, vlimit)
                             : _mm512_setzero_si512();
      _mm512_store_si512(data + (c0 / kPanel) * pairs * 2 * kPanel + p * 2 * kPanel,
                         _mm512_or_si512(_mm512_and_si512(qe, low), _mm512_slli_epi32(qo, 16)));
    }
  }
}

void Int16Rows(const float* x, int64_t ldx, int64_t k, int64_t m, int32_t limit, int16_t* a,
               float* scale) {
  const int64_t width = (k + 1) / 2 * 2;
  alignas(64) float inv[16];
  for (int64_t r = 0; r < m; ++r) {
    if (r % 16 == 0) {  // the next 16 rows' scales at once
      RowScales(x + r * ldx, ldx, std::min<int64_t>(16, m - r), k, limit, scale + r, inv);
    }
    QuantizeRow(x + r * ldx, k, width, inv[r % 16], limit, a + r * width);
  }
}

void Int16Gemm(const int16_t* a, const float* scale, const Int16Weights& w, float* y, int64_t ldy,
               int64_t m, bool accumulate) {
  const int64_t pairs = w.k_pairs(), lda = 2 * pairs, n = w.n();
  for (int64_t col = 0; col < n; col += 2 * kPanel) {
    const int64_t cols = std::min(2 * kPanel, n - col);
    const bool two = cols > kPanel;
    const __mmask16 mask0 = PanelColumnMask(cols), mask1 = PanelColumnMask(cols - kPanel);
    const int16_t* b0 = w.panel(col / kPanel);
    const int16_t* b1 = two ? w.panel(col / kPanel + 1) : b0;
    for (int64_t r = 0, rows = 0; r < m; r += rows) {
      rows = KernelRows(m, r, kRows);
      const Kernel kernel = accumulate
                                ? (two ? kTable<true, true> : kTable<false, true>)[rows - 1]
                                : (two ? kTable<true, false> : kTable<false, false>)[rows - 1];
      kernel(a + r * lda, lda, b0, b1, pairs, y + r * ldy + col, ldy, scale + r, w.scales() + col,
             mask0, mask1);
    }
  }
}

#else  // not x86-64: Int16ProductsSupported() is false and nothing calls these.

void Int16Weights::Pack(const float*, int64_t n, int64_t k, int64_t, int32_t) {
  ReserveWithScales(n, k);
}
void Int16Weights::PackTransposed(const float*, int64_t k, int64_t n, int64_t, int32_t, int64_t) {
  ReserveWithScales(n, k);
}
void Int16Rows(const float*, int64_t, int64_t, int64_t, int32_t, int16_t*, float*) {}
void Int16Gemm(const int16_t*, const float*, const Int16Weights&, float*, int64_t, int64_t, bool) {}

#endif

}  // namespace quiver::engine::cpu
