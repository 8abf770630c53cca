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
// within 1e-5 of the pairs' magnitude of vdpbf16ps (AmxBf16Agree, gemm_bf16_test). Each C tile
// starts from its columns' bias (or from y, or zeros) and adds the tile steps; depths that are not
// a multiple of 32 end with vdpbf16ps on the remaining pairs; the last block's rows, where a tile
// of it has fewer than 16, are copied into a thread buffer first, so that no tile reads past the
// caller's rows.
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

// A C tile's start for rows < `rows` of `block` (16 x 16, row stride kPanel): y's own values
// (accumulate) or the columns' bias `init` (zeros without one); rows past `rows` are left as they
// are (their sums are never stored).
QUIVER_TARGET_AMX_BF16 void StartBlock(float* block, int64_t rows, const float* init,
                                       bool accumulate, const float* y, int64_t ldy,
                                       __mmask16 mask) {
  for (int64_t i = 0; i < rows; ++i) {
    _mm512_store_ps(block + i * kPanel,
                    accumulate ? _mm512_maskz_loadu_ps(mask, y + i * ldy) : _mm512_load_ps(init));
  }
}

// A block's tile sums finished for `rows` rows: plus the pairs [p0, pairs) by vdpbf16ps, stored
// to the columns `mask` selects.
QUIVER_TARGET_AMX_BF16 void Finish(const float* block, const uint16_t* a, int64_t lda,
                                   const uint16_t* panel, int64_t p0, int64_t pairs, int64_t rows,
                                   float* y, int64_t ldy, __mmask16 mask) {
  for (int64_t i = 0; i < rows; ++i) {
    __m512 acc = _mm512_load_ps(block + i * kPanel);
    const uint16_t* row = a + i * lda;
    for (int64_t p = p0; p < pairs; ++p) {
      int32_t pair;
      std::memcpy(&pair, row + 2 * p, sizeof(pair));
      const __m512i x = _mm512_set1_epi32(pair);
      const __m512i w = _mm512_load_si512(panel + p * 2 * kPanel);
      acc = _mm512_dpbf16_ps(acc, reinterpret_cast<const __m512bh&>(x),
                             reinterpret_cast<const __m512bh&>(w));
    }
    _mm512_mask_storeu_ps(y + i * ldy, mask, acc);
  }
}

// C tile `tile` (0-3) zeroed, or loaded from or stored to 16 rows `stride` bytes apart: the tile
// number is part of the instruction, so one case per tile.
QUIVER_TARGET_AMX_BF16 void ZeroC(int tile) {
  switch (tile) {
    case 0:
      _tile_zero(0);
      break;
    case 1:
      _tile_zero(1);
      break;
    case 2:
      _tile_zero(2);
      break;
    default:
      _tile_zero(3);
      break;
  }
}

QUIVER_TARGET_AMX_BF16 void LoadC(int tile, const float* from, int64_t stride) {
  switch (tile) {
    case 0:
      _tile_loadd(0, from, stride);
      break;
    case 1:
      _tile_loadd(1, from, stride);
      break;
    case 2:
      _tile_loadd(2, from, stride);
      break;
    default:
      _tile_loadd(3, from, stride);
      break;
  }
}

QUIVER_TARGET_AMX_BF16 void StoreC(int tile, float* to, int64_t stride) {
  switch (tile) {
    case 0:
      _tile_stored(0, to, stride);
      break;
    case 1:
      _tile_stored(1, to, stride);
      break;
    case 2:
      _tile_stored(2, to, stride);
      break;
    default:
      _tile_stored(3, to, stride);
      break;
  }
}

constexpr int64_t kRowBytes = kPanel * static_cast<int64_t>(sizeof(float));

// One of the four C tiles of a block of 32 rows x 32 columns (tile: rows 16 · (tile / 2) on,
// panel tile % 2). A whole tile (16 rows, 16 columns, no pairs past the tile steps) starts from
// zeros, from y (accumulate) or from its columns' bias repeated over 16 rows (`bias_rows`,
// written before the first block) and is stored straight to y; any other starts from its buffer
// (StartBlock) and is finished from it (Finish). Either way its sums start from the same values
// and add the same tile steps, then the same remaining pairs: where a tile lies in y changes no
// bit. (A tile loaded from memory just written stalls until the stores retire: so the bias rows
// are written once per call, not per block, and zeros are _tile_zero.)
struct CTile {
  int tile;
  bool present, whole;
  float* out;  // y at the tile's first row and column
  float* block;

  QUIVER_TARGET_AMX_BF16 void Start(const float* init, const float* bias_rows, bool accumulate,
                                    int64_t ldy, int64_t rows, __mmask16 mask) const {
    if (!present) return;
    if (whole) {
      if (accumulate) {
        LoadC(tile, out, ldy * static_cast<int64_t>(sizeof(float)));
      } else if (bias_rows != nullptr) {
        LoadC(tile, bias_rows, kRowBytes);
      } else {
        ZeroC(tile);
      }
      return;
    }
    StartBlock(block, rows, init, accumulate, out, ldy, mask);
    LoadC(tile, block, kRowBytes);
  }

  QUIVER_TARGET_AMX_BF16 void Store(int64_t ldy) const {
    if (!present) return;
    if (whole) {
      StoreC(tile, out, ldy * static_cast<int64_t>(sizeof(float)));
    } else {
      StoreC(tile, block, kRowBytes);
    }
  }
};

QUIVER_TARGET_AMX_BF16 void Run(const uint16_t* a, const Bf16Weights& w, const float* bias,
                                float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1,
                                bool accumulate) {
  const int64_t pairs = w.k_pairs(), lda = 2 * pairs, steps = pairs / kStepPairs;
  const int64_t tail = steps * kStepPairs;  // the first pair vdpbf16ps finishes
  const int64_t a_stride = lda * static_cast<int64_t>(sizeof(uint16_t));
  // Whole tiles need whole tile steps over every pair (and 16 rows and 16 columns).
  const bool tiles_only = steps > 0 && tail == pairs;
  alignas(64) float blocks[4][kTileRows * kPanel];
  alignas(64) float init[2 * kPanel];
  thread_local std::vector<uint16_t> padded;  // a partial block's rows, 16 per tile
  // Per panel of [c0, c1), its bias over 16 rows (zeros past c1): whole tiles start from it.
  thread_local std::vector<float> bias_rows;
  const int64_t panels = (c1 - c0 + kPanel - 1) / kPanel;
  if (tiles_only && bias != nullptr && !accumulate) {
    bias_rows.resize(static_cast<size_t>(panels * kTileRows * kPanel));
    for (int64_t p = 0; p < panels; ++p) {
      const __m512 b =
          _mm512_maskz_loadu_ps(PanelColumnMask(c1 - c0 - p * kPanel), bias + c0 + p * kPanel);
      for (int64_t i = 0; i < kTileRows; ++i) {
        _mm512_storeu_ps(bias_rows.data() + (p * kTileRows + i) * kPanel, b);
      }
    }
  }
  const auto panel_bias = [&](int64_t col) -> const float* {
    return tiles_only && bias != nullptr && !accumulate
               ? bias_rows.data() + (col - c0) / kPanel * kTileRows * kPanel
               : nullptr;
  };
  if (steps > 0) ConfigureTilesAmx();
  // The last block's rows, where it has fewer than 16 in a tile, copied once into `padded` so
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
      const bool whole0 = tiles_only && rows0 == kTileRows;
      const bool whole1 = tiles_only && rows1 == kTileRows;
      float* const y0 = y + r * ldy + col;
      float* const y1 = y0 + kTileRows * ldy;
      const CTile t0{0, true, whole0 && cols >= kPanel, y0, blocks[0]};
      const CTile t1{1, two, whole0 && cols == 2 * kPanel, y0 + kPanel, blocks[1]};
      const CTile t2{2, rows1 > 0, whole1 && cols >= kPanel, y1, blocks[2]};
      const CTile t3{3, rows1 > 0 && two, whole1 && cols == 2 * kPanel, y1 + kPanel, blocks[3]};
      const float* const bias0 = panel_bias(col);
      const float* const bias1 = bias0 == nullptr ? nullptr : bias0 + kTileRows * kPanel;
      if (steps > 0) {
        t0.Start(init, bias0, accumulate, ldy, rows0, mask0);
        t1.Start(init + kPanel, bias1, accumulate, ldy, rows0, mask1);
        t2.Start(init, bias0, accumulate, ldy, rows1, mask0);
        t3.Start(init + kPanel, bias1, accumulate, ldy, rows1, mask1);
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
        t0.Store(ldy);
        t1.Store(ldy);
        t2.Store(ldy);
        t3.Store(ldy);
      } else {  // no tile steps: every pair by vdpbf16ps from the block's start
        StartBlock(blocks[0], rows0, init, accumulate, y0, ldy, mask0);
        if (two) StartBlock(blocks[1], rows0, init + kPanel, accumulate, y0 + kPanel, ldy, mask1);
        if (rows1 > 0) {
          StartBlock(blocks[2], rows1, init, accumulate, y1, ldy, mask0);
          if (two) {
            StartBlock(blocks[3], rows1, init + kPanel, accumulate, y1 + kPanel, ldy, mask1);
          }
        }
      }
      const auto finish = [&](const CTile& tile, const uint16_t* rows_a, int64_t rows,
                              const uint16_t* panel, __mmask16 mask) {
        if (tile.present && !tile.whole) {
          Finish(tile.block, rows_a, lda, panel, tail, pairs, rows, tile.out, ldy, mask);
        }
      };
      finish(t0, a0, rows0, b0, mask0);
      finish(t1, a0, rows0, b1, mask1);
      finish(t2, a1, rows1, b0, mask0);
      finish(t3, a1, rows1, b1, mask1);
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
