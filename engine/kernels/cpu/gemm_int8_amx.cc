// QuantizedGemm on AMX-INT8 (isa_paths.h).
//
// Each activation p (gemm_int8.h: an integer in [-255, 255]) is split exactly as p = 256 · hi +
// lo, hi = p >> 8 a signed byte (0 or -1) and lo = p & 255 an unsigned one, and Σ p·q = 256 ·
// Σ hi·q + Σ lo·q: one tdpbssd (signed x signed) and one tdpbusd (unsigned x signed) per step,
// each summing exactly in int32 (|Σ lo·q| <= 255 · 127 · k); the final 256 · hi + lo wraps in
// int32 arithmetic to the exact sum, which fits (k <= kMaxDepth). The integers are the other
// paths' and so is the f32 epilogue: the same bits. (The bytes u = p + z of QuantizeRowsU8 would
// take one tdpbusd and a correction, as the avx512_vnni path does; not done: no AMX host was at
// hand to measure it when the activations became bytes.)
//
// Tiles (palette 1): per block of 16 rows x 32 columns, C = tmm0/tmm1 (hi sums of the two
// panels) and tmm2/tmm3 (lo sums), A = tmm4 (hi bytes) and tmm5 (lo bytes), 16 rows x 64 k;
// B = tmm6/tmm7, one panel's 16 columns x 64 k in the 4-byte groups the instruction reads
// (QuantizedWeights::quad_panel). The engine quantizes rows straight into hi / lo bytes
// (QuantizeRowsSplit, 16 lanes, the same values as QuantizeRows) and multiplies them with
// QuantizedGemmSplit; QuantizedGemm's int16 rows are split here once per call, in a buffer of
// the calling thread. A tile reads 16 rows at a time, so rows up to the next multiple of 16
// past m must be readable (their sums are never stored).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
// GCC 12 warns of the undefined source _mm512_cvtepi32_ps passes its builtin (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace quiver::engine::cpu {
namespace {

constexpr int64_t kPanel = QuantizedWeights::kPanel;
constexpr int64_t kTileRows = 16;
constexpr int64_t kTileDepth = QuantizedWeights::kQuadDepth;  // k per tile product (64 bytes)

struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TileConfig MakeConfig() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;  // C: 16 int32; A: 64 bytes of k; B: 16 columns x 4 bytes
    c.rows[t] = 16;   // C and A: 16 rows; B: 64 / 4 groups of k
  }
  return c;
}

// Rows [r0, r1) of q (row stride lda int16, `width` of them) into hi and lo [., depth] bytes,
// the rest of each row zero.
QUIVER_TARGET_AVX512 void SplitRows(const int16_t* q, int64_t lda, int64_t width, int64_t depth,
                                    int64_t r0, int64_t r1, int8_t* hi, uint8_t* lo) {
  const __m512i low_byte = _mm512_set1_epi16(0xff);
  for (int64_t i = r0; i < r1; ++i) {
    const int16_t* row = q + i * lda;
    for (int64_t k = 0; k < depth; k += 32) {
      const int64_t n = std::clamp<int64_t>(width - k, 0, 32);
      const __mmask32 mask = n == 32 ? ~__mmask32{0} : (__mmask32{1} << n) - 1;
      const __m512i v = _mm512_maskz_loadu_epi16(mask, row + k);
      const __mmask32 store = depth - k >= 32 ? ~__mmask32{0} : (__mmask32{1} << (depth - k)) - 1;
      _mm256_mask_storeu_epi8(hi + i * depth + k, store,
                              _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 8)));
      _mm256_mask_storeu_epi8(lo + i * depth + k, store,
                              _mm512_cvtepi16_epi8(_mm512_and_si512(v, low_byte)));
    }
  }
}

// y = (256 · hi + lo) · (row scale · column scale) + bias for `rows` rows of one panel's block.
QUIVER_TARGET_AVX512 void Epilogue(const int32_t* hi, const int32_t* lo, int64_t rows,
                                   const float* row_scale, const float* col_scale,
                                   const float* bias, float* y, int64_t ldy, __mmask16 mask) {
  const __m512 cs = _mm512_maskz_loadu_ps(mask, col_scale);
  const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  for (int64_t i = 0; i < rows; ++i) {
    const __m512i acc = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(hi + i * kPanel), 8),
                                         _mm512_load_si512(lo + i * kPanel));
    const __m512 r = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc),
                                     _mm512_mul_ps(_mm512_set1_ps(row_scale[i]), cs), b);
    _mm512_mask_storeu_ps(y + i * ldy, mask, r);
  }
}

// hi and lo [m rounded up to 16, depth], row stride depth.
QUIVER_TARGET_AMX void Run(const int8_t* hi, const uint8_t* lo, const float* scale,
                           const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                           int64_t m, int64_t c0, int64_t c1) {
  static const TileConfig kConfig = MakeConfig();
  const int64_t depth = w.quad_depth(), steps = depth / kTileDepth;
  const int64_t panel_bytes = depth * kPanel;  // bytes of one B panel
  alignas(64) int32_t sums[4][kTileRows * kPanel];
  _tile_loadconfig(&kConfig);
  for (int64_t r = 0; r < m; r += kTileRows) {
    const int64_t rows = std::min(kTileRows, m - r);
    const int8_t* a_hi = hi + r * depth;
    const uint8_t* a_lo = lo + r * depth;
    for (int64_t col = c0; col < c1; col += 2 * kPanel) {
      const int64_t cols = std::min(2 * kPanel, c1 - col);
      const bool two = cols > kPanel;
      const int8_t* b0 = w.quad_panel(col / kPanel);
      const int8_t* b1 = two ? b0 + panel_bytes : nullptr;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t s = 0; s < steps; ++s) {
        _tile_loadd(4, a_hi + s * kTileDepth, depth);
        _tile_loadd(5, a_lo + s * kTileDepth, depth);
        _tile_loadd(6, b0 + s * kTileDepth * kPanel, 64);
        _tile_dpbssd(0, 4, 6);
        _tile_dpbusd(2, 5, 6);
        if (two) {
          _tile_loadd(7, b1 + s * kTileDepth * kPanel, 64);
          _tile_dpbssd(1, 4, 7);
          _tile_dpbusd(3, 5, 7);
        }
      }
      _tile_stored(0, sums[0], 64);
      _tile_stored(2, sums[2], 64);
      const float* col_bias = bias != nullptr ? bias + col : nullptr;
      const auto mask0 = static_cast<__mmask16>((1u << std::min(cols, kPanel)) - 1);
      Epilogue(sums[0], sums[2], rows, scale + r, w.scales() + col, col_bias, y + r * ldy + col,
               ldy, mask0);
      if (two) {
        _tile_stored(1, sums[1], 64);
        _tile_stored(3, sums[3], 64);
        const auto mask1 = static_cast<__mmask16>((1u << (cols - kPanel)) - 1);
        Epilogue(sums[1], sums[3], rows, scale + r, w.scales() + col + kPanel,
                 col_bias != nullptr ? col_bias + kPanel : nullptr, y + r * ldy + col + kPanel, ldy,
                 mask1);
      }
    }
  }
  _tile_release();
}

// QuantizeRows' p on 16 lanes (the same range, rounding and clamp: the same bits), split.
QUIVER_TARGET_AVX512 void QuantizeSplit(const float* x, int64_t ldx, int64_t k, int64_t depth,
                                        int64_t r0, int64_t r1, int8_t* hi, uint8_t* lo,
                                        float* scale) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * ldx;
    float least, most;
    RowRangeAvx512(row, k, &least, &most);
    const RowQuantization rq = QuantizeRange(least, most);
    scale[r] = rq.scale;
    int8_t* out_hi = hi + r * depth;
    uint8_t* out_lo = lo + r * depth;
    if (rq.inv == 0.0f) {  // zeros, written: x · 0 is NaN for an infinite x
      std::fill(out_hi, out_hi + depth, int8_t{0});
      std::fill(out_lo, out_lo + depth, uint8_t{0});
      continue;
    }
    const __m512 vinv = _mm512_set1_ps(rq.inv);
    const __m512i least_p = _mm512_set1_epi32(-rq.zero), most_p = _mm512_set1_epi32(255 - rq.zero);
    const __m512i low_byte = _mm512_set1_epi32(0xff);
    for (int64_t i = 0; i < depth; i += 16) {
      const __mmask16 mask =
          k - i >= 16 ? __mmask16(0xffff) : __mmask16(k > i ? (1u << (k - i)) - 1 : 0);
      // Past k the loads read zeros: p = 0 there (0 is within [-zero, 255 - zero]).
      const __m512i p = _mm512_min_epi32(
          _mm512_max_epi32(
              _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, row + i), vinv)),
              least_p),
          most_p);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_hi + i),
                       _mm512_cvtepi32_epi8(_mm512_srai_epi32(p, 8)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_lo + i),
                       _mm512_cvtepi32_epi8(_mm512_and_si512(p, low_byte)));
    }
  }
}

}  // namespace

void QuantizedGemmAmx(const int16_t* q, const float* scale, const QuantizedWeights& w,
                      const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1) {
  if (w.quad_panel(0) == nullptr) {  // no AMX layout was allocated: a weight without columns
    QuantizedGemmAvx512(q, scale, w, bias, y, ldy, m, c0, c1, /*vnni=*/true);
    return;
  }
  thread_local std::vector<int8_t> hi;
  thread_local std::vector<uint8_t> lo;
  const int64_t depth = w.quad_depth(), padded = (m + kTileRows - 1) / kTileRows * kTileRows;
  const size_t size = static_cast<size_t>(padded * depth);
  if (hi.size() < size) {
    hi.resize(size);
    lo.resize(size);
  }
  SplitRows(q, 2 * w.k_pairs(), 2 * w.k_pairs(), depth, 0, m, hi.data(), lo.data());
  Run(hi.data(), lo.data(), scale, w, bias, y, ldy, m, c0, c1);
}

void QuantizeRowsSplit(const float* x, int64_t ldx, int64_t k, int64_t depth, int64_t r0,
                       int64_t r1, int8_t* hi, uint8_t* lo, float* scale) {
  QuantizeSplit(x, ldx, k, depth, r0, r1, hi, lo, scale);
}

void QuantizedGemmSplit(const int8_t* hi, const uint8_t* lo, const float* scale,
                        const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                        int64_t m, int64_t c0, int64_t c1) {
  Run(hi, lo, scale, w, bias, y, ldy, m, c0, c1);
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no amx path)

namespace quiver::engine::cpu {
void QuantizedGemmAmx(const int16_t* q, const float* scale, const QuantizedWeights& w,
                      const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1) {
  QuantizedGemm(q, scale, w, bias, y, ldy, m, c0, c1);
}
}  // namespace quiver::engine::cpu

#endif
