// Bf16Gemm (gemm_bf16.h) on AMX-BF16 tiles, the amx path's bf16 products (isa_paths.h).
//
// The panels Bf16Weights packs are already what tdpbf16ps reads as its B tile: per pair of k, a
// panel's 16 columns as 32-bit words (64 bytes), so 16 pairs (32 k) of one panel are one
// 16 x 64-byte tile at a stride of 64 bytes, with no repacking; a tile of A is 16 rows x 32 k of
// the activations (rows of 2 · k_pairs bf16). Per block of 32 rows x 32 columns, C = tmm0/tmm1
// (the first 16 rows, the two panels) and tmm2/tmm3 (the next 16), A = tmm4/tmm5, B = tmm6/tmm7
// (the int8 tiles' layout, gemm_int8_amx.cc, and their configuration). Each step of 32 k is one
// tile product (16 x 16 x 32 multiply-adds) where vdpbf16ps does 16 x 2: what makes bf16 worth
// having on Sapphire Rapids, where vdpbf16ps runs no faster than the f32 FMA.
//
// Not vdpbf16ps's bits: the tiles sum each step's 32 products in their own order and precision
// (measured on a Sapphire Rapids host: about 40% of sums equal, the rest one or a few ulp off), so
// the amx path's bf16 differs from the avx512 paths' by rounding; it is the same for any batch,
// rows or column range (an element's sums depend only on its row, its column and the steps), and
// within 1e-5 of the pairs' magnitude of vdpbf16ps (AmxBf16Agree, gemm_bf16_test). Depths that are
// not a multiple of 32 end with vdpbf16ps on the remaining pairs; the last block's rows, where a
// tile of it has fewer than 16, are copied into a thread buffer first, so that no tile reads past
// the caller's rows. The C tiles start from zeros (_tile_zero) and go through `sums` to y:
// starting them from the bias or from y by a tile load, and storing whole ones straight to y,
// took up to 1.12x the time (docs/benchmarks.md): a tile load of memory just written by vector
// stores waits for those stores.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

#include "engine/kernels/cpu/gemm_bf16.h"
#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace quiver::engine::cpu {
namespace {

constexpr int64_t kPanel = Bf16Weights::kPanel;
constexpr int64_t kTileRows = 16;
constexpr int64_t kStepPairs = 16;  // pairs of k per tile product: 64 bytes of a row

// One panel's 16 x 16 tile sums for `rows` rows, finished: plus the start (init [16], or y's
// own values with accumulate), plus the pairs [p0, pairs) by vdpbf16ps, stored to the columns
// `mask` selects.
QUIVER_TARGET_AMX_BF16 void Finish(const float* sums, const uint16_t* a, int64_t lda,
                                   const uint16_t* panel, int64_t p0, int64_t pairs, int64_t rows,
                                   const float* init, bool accumulate, float* y, int64_t ldy,
                                   __mmask16 mask) {
  for (int64_t i = 0; i < rows; ++i) {
    float* out = y + i * ldy;
    __m512 acc =
        _mm512_add_ps(_mm512_load_ps(sums + i * kPanel),
                      accumulate ? _mm512_maskz_loadu_ps(mask, out) : _mm512_load_ps(init));
    const uint16_t* row = a + i * lda;
    for (int64_t p = p0; p < pairs; ++p) {
      int32_t pair;
      std::memcpy(&pair, row + 2 * p, sizeof(pair));
      const __m512i x = _mm512_set1_epi32(pair);
      const __m512i w = _mm512_load_si512(panel + p * 2 * kPanel);
      acc = _mm512_dpbf16_ps(acc, reinterpret_cast<const __m512bh&>(x),
                             reinterpret_cast<const __m512bh&>(w));
    }
    _mm512_mask_storeu_ps(out, mask, acc);
  }
}

QUIVER_TARGET_AMX_BF16 void Run(const uint16_t* a, const Bf16Weights& w, const float* bias,
                                float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1,
                                bool accumulate) {
  const int64_t pairs = w.k_pairs(), lda = 2 * pairs, steps = pairs / kStepPairs;
  const int64_t tail = steps * kStepPairs;  // the first pair vdpbf16ps finishes
  const int64_t a_stride = lda * static_cast<int64_t>(sizeof(uint16_t));
  alignas(64) float sums[kTileRows * kPanel];
  if (steps == 0) std::fill(std::begin(sums), std::end(sums), 0.0f);  // no tile to store
  alignas(64) float init[2 * kPanel];
  thread_local std::vector<uint16_t> padded;  // a partial block's rows, 16 per tile
  if (steps > 0) ConfigureTilesAmx();
  // The last block's rows, where a tile of it has fewer than 16, copied once into `padded` so
  // that no tile reads past the caller's rows.
  const int64_t last = (m - 1) / (2 * kTileRows) * (2 * kTileRows);
  const uint16_t* last_a0 = a + last * lda;
  const uint16_t* last_a1 = last_a0 + kTileRows * lda;
  {
    const int64_t rows0 = std::min(kTileRows, m - last);
    const int64_t rows1 = std::clamp<int64_t>(m - last - kTileRows, 0, kTileRows);
    if (steps > 0 && (rows0 < kTileRows || (rows1 > 0 && rows1 < kTileRows))) {
      padded.resize(static_cast<size_t>(2 * kTileRows * lda));
      if (rows0 < kTileRows) {
        std::memcpy(padded.data(), last_a0, static_cast<size_t>(rows0 * a_stride));
        last_a0 = padded.data();
      } else {
        std::memcpy(padded.data() + kTileRows * lda, last_a1,
                    static_cast<size_t>(rows1 * a_stride));
        last_a1 = padded.data() + kTileRows * lda;
      }
    }
  }
  // Column pairs outside, blocks of rows inside: a pair's two panels (24 KB at k = 384) stay in
  // L1 over every block of rows, where rows outside read all of W again for each block.
  for (int64_t col = c0; col < c1; col += 2 * kPanel) {
    const int64_t cols = std::min(2 * kPanel, c1 - col);
    const bool two = cols > kPanel;
    const __mmask16 mask0 = PanelColumnMask(cols), mask1 = PanelColumnMask(cols - kPanel);
    for (int64_t j = 0; j < 2 * kPanel; ++j) {
      init[j] = bias != nullptr && j < cols ? bias[col + j] : 0.0f;
    }
    const uint16_t* b0 = w.panel(col / kPanel);
    const uint16_t* b1 = two ? w.panel(col / kPanel + 1) : b0;
    for (int64_t r = 0; r < m; r += 2 * kTileRows) {
      const int64_t rows0 = std::min(kTileRows, m - r);
      const int64_t rows1 = std::clamp<int64_t>(m - r - kTileRows, 0, kTileRows);
      const uint16_t* a0 = r == last ? last_a0 : a + r * lda;
      const uint16_t* a1 = r == last ? last_a1 : a0 + kTileRows * lda;
      if (steps > 0) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t s = 0; s < steps; ++s) {
          _tile_loadd(4, a0 + s * 2 * kStepPairs, a_stride);
          _tile_loadd(6, b0 + s * kStepPairs * 2 * kPanel, 64);
          _tile_dpbf16ps(0, 4, 6);
          if (two) {
            _tile_loadd(7, b1 + s * kStepPairs * 2 * kPanel, 64);
            _tile_dpbf16ps(1, 4, 7);
          }
          if (rows1 > 0) {
            _tile_loadd(5, a1 + s * 2 * kStepPairs, a_stride);
            _tile_dpbf16ps(2, 5, 6);
            if (two) _tile_dpbf16ps(3, 5, 7);
          }
        }
      }
      // Each C tile through `sums` (zeros where there were no whole steps).
      const auto finish = [&](int tile, const uint16_t* rows_a, int64_t rows, int64_t row0,
                              int panel) {
        if (steps > 0) {
          switch (tile) {  // the tile number must be a constant
            case 0:
              _tile_stored(0, sums, 64);
              break;
            case 1:
              _tile_stored(1, sums, 64);
              break;
            case 2:
              _tile_stored(2, sums, 64);
              break;
            default:
              _tile_stored(3, sums, 64);
              break;
          }
        }
        Finish(sums, rows_a, lda, panel == 0 ? b0 : b1, tail, pairs, rows, init + panel * kPanel,
               accumulate, y + row0 * ldy + col + panel * kPanel, ldy, panel == 0 ? mask0 : mask1);
      };
      finish(0, a0, rows0, r, 0);
      if (two) finish(1, a0, rows0, r, 1);
      if (rows1 > 0) {
        finish(2, a1, rows1, r + kTileRows, 0);
        if (two) finish(3, a1, rows1, r + kTileRows, 1);
      }
    }
  }
}

}  // namespace

void Bf16GemmAmx(const uint16_t* a, const Bf16Weights& w, const float* bias, float* y, int64_t ldy,
                 int64_t m, int64_t c0, int64_t c1, bool accumulate) {
  Run(a, w, bias, y, ldy, m, c0, c1, accumulate);
}

bool AmxBf16Agree() {
  static const bool kAgree = [] {
    // Three panels (the last one partial), 3 steps of 32 k and 5 pairs past them, 37 rows (a
    // pair of 16-row tiles, then a lone partial one), against vdpbf16ps (Bf16GemmAvx512) within
    // the rounding of f32 sums of this depth.
    constexpr int64_t kRows = 37, kCols = 40, kDepth = 105;
    const SelfCheckOperands operands(kRows, kCols, kDepth, 54321);
    const std::vector<float>& x = operands.x;
    const std::vector<float>& bias = operands.bias;
    const Bf16Weights w(operands.w.data(), kCols, kDepth);
    const int64_t lda = 2 * w.k_pairs();
    std::vector<uint16_t> a(kRows * lda);
    Bf16Rows(x.data(), kDepth, kDepth, 0, kRows, a.data());
    std::vector<float> tiles(kRows * kCols), pairs(kRows * kCols);
    Run(a.data(), w, bias.data(), tiles.data(), kCols, kRows, 0, kCols, false);
    Bf16GemmAvx512(a.data(), w, bias.data(), pairs.data(), kCols, kRows, 0, kCols, false);
    double worst = 0;
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      const double scale = 1.0 + std::abs(static_cast<double>(pairs[i]));
      worst = std::max(worst, std::abs(static_cast<double>(tiles[i]) - pairs[i]) / scale);
    }
    // Each of these sums is a few units; f32 rounding over 53 pairs stays far below 1e-5.
    const bool near = std::isfinite(worst) && worst <= 1e-5;
    if (!near) {
      std::fprintf(stderr,
                   "quiver: the AMX bf16 tiles disagreed with vdpbf16ps on their self-check "
                   "(%.3g); the bf16 products use vdpbf16ps\n",
                   worst);
    }
    return near;
  }();
  return kAgree;
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no amx path)

namespace quiver::engine::cpu {
void Bf16GemmAmx(const uint16_t*, const Bf16Weights&, const float*, float*, int64_t, int64_t,
                 int64_t, int64_t, bool) {
  std::abort();
}
bool AmxBf16Agree() { return false; }
}  // namespace quiver::engine::cpu

#endif
