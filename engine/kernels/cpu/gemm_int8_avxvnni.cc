// The avx2_vnni path's int8 products (isa_paths.h): the avx512_vnni path's byte activations and
// quad layout (gemm_int8.h) multiplied by AVX-VNNI's `vpdpbusd` on 256 bits, for hosts with
// AVX2 and AVX-VNNI but no AVX-512 (Intel Alder Lake and later clients, Xeon 6 with E-cores,
// i.e. Sierra Forest). The avx2 path's int16 pairs take one vpmaddwd and one vpaddd per 16
// multiply-adds; here one instruction does 32.
//
// The same bits as every other path: the rows quantize to the same bytes (the same range, the
// same rounding and clamp as QuantizeRowsU8Avx512), the sums Σ u · q are exact in int32, and
// the epilogue is Int8EpilogueRowsAvx512's operations on 8 lanes ((sum - z · Σ q) converted,
// times row scale · column scale, plus bias, in one fused multiply-add).
//
// Micro-kernel: up to 6 rows x one panel of 16 columns in 12 ymm accumulators; per group of 4 k,
// the panel's 64 bytes as two ymm (columns 0-7, 8-15) and each row's 4 bytes broadcast.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace quiver::engine::cpu {
namespace {

constexpr int64_t kPanel = QuantizedWeights::kPanel;
constexpr int64_t kRows = 6;

// (acc - z · s) converted, times rs · cs, plus b: 8 columns of a row stored.
QUIVER_TARGET_AVX_VNNI inline void Store8(__m256i acc, __m256i z, __m256 rs, __m256i s, __m256 cs,
                                          __m256 b, float* y) {
  acc = _mm256_sub_epi32(acc, _mm256_mullo_epi32(z, s));
  _mm256_storeu_ps(y, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_mul_ps(rs, cs), b));
}

// One row's 8 sums of 8 columns, finished and stored (cols of them).
QUIVER_TARGET_AVX_VNNI inline void Epilogue8(__m256i acc, int32_t zero, const int32_t* col_sum,
                                             float row_scale, const float* col_scale,
                                             const float* bias, float* y, int64_t cols) {
  if (cols >= 8) {
    Store8(acc, _mm256_set1_epi32(zero), _mm256_set1_ps(row_scale),
           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col_sum)),
           _mm256_loadu_ps(col_scale),
           bias != nullptr ? _mm256_loadu_ps(bias) : _mm256_setzero_ps(), y);
    return;
  }
  alignas(32) int32_t sums[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(sums), acc);
  for (int64_t j = 0; j < cols; ++j) {
    const float s = static_cast<float>(sums[j] - zero * col_sum[j]);
    y[j] = std::fma(s, row_scale * col_scale[j], bias != nullptr ? bias[j] : 0.0f);
  }
}

template <int R>
QUIVER_TARGET_AVX_VNNI void MicroKernel(const uint8_t* u, int64_t depth, const int8_t* panel,
                                        const int32_t* zero, const float* row_scale,
                                        const int32_t* col_sum, const float* col_scale,
                                        const float* bias, float* y, int64_t ldy, int64_t cols) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const int64_t groups = depth / 4;
  for (int64_t g = 0; g < groups; ++g) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + g * 64));
    const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + g * 64 + 32));
#define QUIVER_DOT(i)                                        \
  if constexpr (R > (i)) {                                   \
    int32_t word;                                            \
    std::memcpy(&word, u + (i)*depth + 4 * g, sizeof(word)); \
    const __m256i x = _mm256_set1_epi32(word);               \
    c##i##0 = _mm256_dpbusd_avx_epi32(c##i##0, x, w0);       \
    c##i##1 = _mm256_dpbusd_avx_epi32(c##i##1, x, w1);       \
  }
    QUIVER_DOT(0) QUIVER_DOT(1) QUIVER_DOT(2) QUIVER_DOT(3) QUIVER_DOT(4) QUIVER_DOT(5)
#undef QUIVER_DOT
  }
  const float* bias1 = bias != nullptr ? bias + 8 : nullptr;
  if (cols == kPanel) {
    // A whole panel: its column terms read once (as the avx512_vnni kernel's; read per row, GCC
    // loaded them again after every store to y), then Store8 per row as Epilogue8 does.
    const __m256i s0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col_sum));
    const __m256i s1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col_sum + 8));
    const __m256 cs0 = _mm256_loadu_ps(col_scale), cs1 = _mm256_loadu_ps(col_scale + 8);
    const __m256 b0 = bias != nullptr ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    const __m256 b1 = bias != nullptr ? _mm256_loadu_ps(bias1) : _mm256_setzero_ps();
#define QUIVER_WHOLE(i)                                   \
  if constexpr (R > (i)) {                                \
    const __m256i z = _mm256_set1_epi32(zero[i]);         \
    const __m256 rs = _mm256_set1_ps(row_scale[i]);       \
    Store8(c##i##0, z, rs, s0, cs0, b0, y + (i)*ldy);     \
    Store8(c##i##1, z, rs, s1, cs1, b1, y + (i)*ldy + 8); \
  }
    QUIVER_WHOLE(0);
    QUIVER_WHOLE(1);
    QUIVER_WHOLE(2);
    QUIVER_WHOLE(3);
    QUIVER_WHOLE(4);
    QUIVER_WHOLE(5);
#undef QUIVER_WHOLE
    return;
  }
#define QUIVER_STORE(i)                                                              \
  if constexpr (R > (i)) {                                                           \
    Epilogue8(c##i##0, zero[i], col_sum, row_scale[i], col_scale, bias, y + (i)*ldy, \
              std::min<int64_t>(cols, 8));                                           \
    if (cols > 8) {                                                                  \
      Epilogue8(c##i##1, zero[i], col_sum + 8, row_scale[i], col_scale + 8, bias1,   \
                y + (i)*ldy + 8, cols - 8);                                          \
    }                                                                                \
  }
  QUIVER_STORE(0) QUIVER_STORE(1) QUIVER_STORE(2) QUIVER_STORE(3) QUIVER_STORE(4) QUIVER_STORE(5)
#undef QUIVER_STORE
}

using Kernel = void (*)(const uint8_t*, int64_t, const int8_t*, const int32_t*, const float*,
                        const int32_t*, const float*, const float*, float*, int64_t, int64_t);
constexpr Kernel kTable[kRows] = {&MicroKernel<1>, &MicroKernel<2>, &MicroKernel<3>,
                                  &MicroKernel<4>, &MicroKernel<5>, &MicroKernel<6>};

// p = clamp(nearbyint(x · inv), -zero, 255 - zero) + zero for 8 values: u as int32.
QUIVER_TARGET_AVX_VNNI inline __m256i Bytes8(__m256 x, __m256 inv, __m256i least, __m256i most,
                                             __m256i z) {
  // Round to nearest even (the MXCSR default), as QuantizeRowsU8Avx512.
  const __m256i p = _mm256_cvtps_epi32(_mm256_mul_ps(x, inv));
  return _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(p, least), most), z);
}

}  // namespace

QUIVER_TARGET_AVX_VNNI void QuantizeRowsU8AvxVnni(const float* x, int64_t ldx, int64_t k,
                                                  int64_t depth, int64_t r0, int64_t r1, uint8_t* u,
                                                  int32_t* zero, float* scale) {
  // The 32 bytes of four 8-lane packs back in order (packs and packus work per 128-bit lane).
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * ldx;
    uint8_t* out = u + r * depth;
    // The range as RowRangeAvx512: min(v, acc) keeps acc where v is NaN (NaNs skipped); a
    // minimum and a maximum are the same in any order.
    // Four pairs of accumulators (RowRangeAvx512: one pair waits on vminps' latency).
    __m256 lows[4], highs[4];
    for (int j = 0; j < 4; ++j) lows[j] = highs[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      for (int64_t j = 0; j < 4; ++j) {
        const __m256 v = _mm256_loadu_ps(row + i + 8 * j);
        lows[j] = _mm256_min_ps(v, lows[j]);
        highs[j] = _mm256_max_ps(v, highs[j]);
      }
    }
    for (; i + 8 <= k; i += 8) {
      const __m256 v = _mm256_loadu_ps(row + i);
      lows[0] = _mm256_min_ps(v, lows[0]);
      highs[0] = _mm256_max_ps(v, highs[0]);
    }
    const __m256 least =
        _mm256_min_ps(_mm256_min_ps(lows[0], lows[1]), _mm256_min_ps(lows[2], lows[3]));
    const __m256 most =
        _mm256_max_ps(_mm256_max_ps(highs[0], highs[1]), _mm256_max_ps(highs[2], highs[3]));
    alignas(32) float lanes_lo[8], lanes_hi[8];
    _mm256_store_ps(lanes_lo, least);
    _mm256_store_ps(lanes_hi, most);
    float lo = 0.0f, hi = 0.0f;
    for (int j = 0; j < 8; ++j) {
      lo = std::min(lo, lanes_lo[j]);
      hi = std::max(hi, lanes_hi[j]);
    }
    for (; i < k; ++i) {
      lo = row[i] < lo ? row[i] : lo;
      hi = row[i] > hi ? row[i] : hi;
    }
    const RowQuantization rq = QuantizeRange(lo, hi);
    scale[r] = rq.scale;
    zero[r] = rq.zero;
    if (rq.inv == 0.0f) {  // zeros, written: x · 0 is NaN for an infinite x
      std::fill(out, out + depth, uint8_t{0});
      continue;
    }
    const __m256 inv = _mm256_set1_ps(rq.inv);
    const __m256i lower = _mm256_set1_epi32(-rq.zero), upper = _mm256_set1_epi32(255 - rq.zero),
                  z = _mm256_set1_epi32(rq.zero);
    // The row after next into L1 meanwhile, as QuantizeRowsU8Avx512 does (its rows often come
    // from L3).
    const float* ahead = r + 2 < r1 ? x + (r + 2) * ldx : nullptr;
    i = 0;
    for (; i + 32 <= k; i += 32) {
      if (ahead != nullptr) {
        __builtin_prefetch(ahead + i, 0, 3);
        __builtin_prefetch(ahead + i + 16, 0, 3);
      }
      const __m256i a = Bytes8(_mm256_loadu_ps(row + i), inv, lower, upper, z);
      const __m256i b = Bytes8(_mm256_loadu_ps(row + i + 8), inv, lower, upper, z);
      const __m256i c = Bytes8(_mm256_loadu_ps(row + i + 16), inv, lower, upper, z);
      const __m256i d = Bytes8(_mm256_loadu_ps(row + i + 24), inv, lower, upper, z);
      const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm256_permutevar8x32_epi32(bytes, order));
    }
    // The last values 8 at a time (zeros read past k), then zeros up to depth: the weights
    // there are 0 too.
    alignas(32) int32_t tail[8];
    for (; i < k; i += 8) {
      const int64_t n = std::min<int64_t>(8, k - i);
      alignas(32) float v[8] = {};
      std::memcpy(v, row + i, static_cast<size_t>(n) * sizeof(float));
      _mm256_store_si256(reinterpret_cast<__m256i*>(tail),
                         Bytes8(_mm256_load_ps(v), inv, lower, upper, z));
      for (int64_t j = 0; j < n; ++j) out[i + j] = static_cast<uint8_t>(tail[j]);
    }
    std::fill(out + k, out + depth, uint8_t{0});
  }
}

void QuantizedGemmU8AvxVnni(const uint8_t* u, const int32_t* zero, const float* scale,
                            const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                            int64_t m, int64_t c0, int64_t c1) {
  const int64_t depth = w.quad_depth();
  for (int64_t col = c0; col < c1; col += kPanel) {
    const int64_t cols = std::min(kPanel, c1 - col);
    const int8_t* panel = w.quad_panel(col / kPanel);
    const float* col_bias = bias != nullptr ? bias + col : nullptr;
    for (int64_t r = 0; r < m; r += kRows) {
      kTable[std::min(kRows, m - r) - 1](u + r * depth, depth, panel, zero + r, scale + r,
                                         w.column_sums() + col, w.scales() + col, col_bias,
                                         y + r * ldy + col, ldy, cols);
    }
  }
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no avx2_vnni path)

namespace quiver::engine::cpu {
void QuantizeRowsU8AvxVnni(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, uint8_t*,
                           int32_t*, float*) {
  std::abort();
}
void QuantizedGemmU8AvxVnni(const uint8_t*, const int32_t*, const float*, const QuantizedWeights&,
                            const float*, float*, int64_t, int64_t, int64_t, int64_t) {
  std::abort();
}
}  // namespace quiver::engine::cpu

#endif
