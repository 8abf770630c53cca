// QuantizedGemm on AMX-INT8 (isa_paths.h), in two forms.
//
// Rows as bytes u = p + z (QuantizeRowsU8, what the avx512_vnni path multiplies): one tdpbusd
// (unsigned x signed) per step sums Σ u·q exactly in int32, and the avx512_vnni path's epilogue
// (Int8EpilogueRowsAvx512) takes off z · Σ q and scales: the same integers and the same bits.
// Tiles (palette 1): per block of 32 rows x 32 columns, C = tmm0/tmm1 (the first 16 rows, the
// two panels) and tmm2/tmm3 (the next 16), A = tmm4/tmm5 (16 rows x 64 k each), B = tmm6/tmm7
// (one panel's 16 columns x 64 k in the 4-byte groups the instruction reads,
// QuantizedWeights::quad_panel): four tile products per four tile loads. The engine's int8
// layers run this (QuantizedGemmU8) where the self-check at first use agrees with vpdpbusd
// (AmxBytesAgree; it has not run on an AMX host yet: the sessions that wrote it had none).
//
// Rows as int16 p (QuantizedGemm's contract; an integer in [-255, 255]): each p split exactly as
// p = 256 · hi + lo, hi = p >> 8 a signed byte (0 or -1) and lo = p & 255 an unsigned one, and
// Σ p·q = 256 · Σ hi·q + Σ lo·q: one tdpbssd (signed x signed) and one tdpbusd (unsigned x
// signed) per step, each summing exactly in int32 (|Σ lo·q| <= 255 · 127 · k); the final 256 ·
// hi + lo wraps in int32 arithmetic to the exact sum, which fits (k <= kMaxDepth). The integers
// are the other paths' and so is the f32 epilogue: the same bits. Tiles: per block of 16 rows x
// 32 columns, C = tmm0/tmm1 (hi sums of the two panels) and tmm2/tmm3 (lo sums), A = tmm4 (hi
// bytes) and tmm5 (lo bytes), B = tmm6/tmm7. QuantizedGemm's int16 rows are split here once
// per call, in a buffer of the calling thread (only QuantizedGemm's callers take this form: the
// engine's layers quantize to bytes on this path). A tile reads 16 rows at a time, so rows up to
// the next multiple of 16 past m must be readable (their sums are never stored).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
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

// u [m rounded up to 16, depth] bytes, row stride depth; zero [m] their zero points.
QUIVER_TARGET_AMX void RunBytes(const uint8_t* u, const int32_t* zero, const float* scale,
                                const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                                int64_t m, int64_t c0, int64_t c1) {
  static const TileConfig kConfig = MakeConfig();
  const int64_t depth = w.quad_depth(), steps = depth / kTileDepth;
  const int64_t panel_bytes = depth * kPanel;  // bytes of one B panel
  alignas(64) int32_t sums[kTileRows * kPanel];
  _tile_loadconfig(&kConfig);
  for (int64_t r = 0; r < m; r += 2 * kTileRows) {
    const bool pair = m - r > kTileRows;  // a second block of 16 rows
    const uint8_t* a0 = u + r * depth;
    const uint8_t* a1 = a0 + kTileRows * depth;
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
        _tile_loadd(4, a0 + s * kTileDepth, depth);
        _tile_loadd(6, b0 + s * kTileDepth * kPanel, 64);
        _tile_dpbusd(0, 4, 6);
        if (two) {
          _tile_loadd(7, b1 + s * kTileDepth * kPanel, 64);
          _tile_dpbusd(1, 4, 7);
        }
        if (pair) {
          _tile_loadd(5, a1 + s * kTileDepth, depth);
          _tile_dpbusd(2, 5, 6);
          if (two) _tile_dpbusd(3, 5, 7);
        }
      }
      const float* col_bias = bias != nullptr ? bias + col : nullptr;
      const float* col_bias1 = col_bias != nullptr ? col_bias + kPanel : nullptr;
      const auto mask0 = static_cast<uint16_t>((1u << std::min(cols, kPanel)) - 1);
      const auto mask1 = static_cast<uint16_t>(two ? (1u << (cols - kPanel)) - 1 : 0);
      const int32_t* sums0 = w.column_sums() + col;
      const float* scales0 = w.scales() + col;
      const int64_t rows0 = std::min(kTileRows, m - r);
      _tile_stored(0, sums, 64);
      Int8EpilogueRowsAvx512(sums, rows0, zero + r, sums0, scale + r, scales0, col_bias,
                             y + r * ldy + col, ldy, mask0);
      if (two) {
        _tile_stored(1, sums, 64);
        Int8EpilogueRowsAvx512(sums, rows0, zero + r, sums0 + kPanel, scale + r, scales0 + kPanel,
                               col_bias1, y + r * ldy + col + kPanel, ldy, mask1);
      }
      if (pair) {
        const int64_t r1 = r + kTileRows, rows1 = std::min(kTileRows, m - r1);
        _tile_stored(2, sums, 64);
        Int8EpilogueRowsAvx512(sums, rows1, zero + r1, sums0, scale + r1, scales0, col_bias,
                               y + r1 * ldy + col, ldy, mask0);
        if (two) {
          _tile_stored(3, sums, 64);
          Int8EpilogueRowsAvx512(sums, rows1, zero + r1, sums0 + kPanel, scale + r1,
                                 scales0 + kPanel, col_bias1, y + r1 * ldy + col + kPanel, ldy,
                                 mask1);
        }
      }
    }
  }
  _tile_release();
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

void QuantizedGemmU8Amx(const uint8_t* u, const int32_t* zero, const float* scale,
                        const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                        int64_t m, int64_t c0, int64_t c1) {
  RunBytes(u, zero, scale, w, bias, y, ldy, m, c0, c1);
}

bool AmxBytesAgree() {
  static const bool agree = [] {
    // Three panels (the last one partial), four steps of k (the last one padded), 37 rows (two
    // pairs of tiles and a lone one, partly past m), rows of each sign and a constant one.
    constexpr int64_t m = 37, n = 40, k = 200;
    std::vector<float> wf(n * k), x(m * k), bias(n);
    uint32_t state = 12345;
    const auto next = [&] {
      state = state * 1664525u + 1013904223u;
      return static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)) / (1 << 23);
    };
    for (float& v : wf) v = 0.2f * next();
    for (float& v : x) v = 3.0f * next();
    for (float& v : bias) v = next();
    for (int64_t i = 0; i < k; ++i) x[5 * k + i] = 1.0f + std::abs(x[5 * k + i]);
    std::fill(x.begin() + 6 * k, x.begin() + 7 * k, 0.25f);
    const QuantizedWeights w(wf.data(), n, k);
    if (w.quad_panel(0) == nullptr) return false;
    const int64_t depth = w.quad_depth();
    std::vector<uint8_t> u((m + 15) / 16 * 16 * depth, 7);
    std::vector<int32_t> zero(m);
    std::vector<float> scale(m), tiles(m * n), vnni(m * n);
    QuantizeRowsU8Avx512(x.data(), k, k, depth, 0, m, u.data(), zero.data(), scale.data());
    RunBytes(u.data(), zero.data(), scale.data(), w, bias.data(), tiles.data(), n, m, 0, n);
    QuantizedGemmU8Avx512(u.data(), zero.data(), scale.data(), w, bias.data(), vnni.data(), n, m, 0,
                          n);
    const bool same = std::memcmp(tiles.data(), vnni.data(), tiles.size() * sizeof(float)) == 0;
    if (!same) {
      std::fprintf(stderr,
                   "quiver: the AMX int8 tiles disagreed with vpdpbusd on their self-check; the "
                   "int8 layers use vpdpbusd\n");
    }
    return same;
  }();
  return agree;
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no amx path)

namespace quiver::engine::cpu {
void QuantizedGemmAmx(const int16_t* q, const float* scale, const QuantizedWeights& w,
                      const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1) {
  QuantizedGemm(q, scale, w, bias, y, ldy, m, c0, c1);
}
void QuantizedGemmU8Amx(const uint8_t*, const int32_t*, const float*, const QuantizedWeights&,
                        const float*, float*, int64_t, int64_t, int64_t, int64_t) {
  std::abort();
}
bool AmxBytesAgree() { return false; }
}  // namespace quiver::engine::cpu

#endif
