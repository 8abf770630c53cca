// The int8 layers' products on AMX-INT8 (isa_paths.h).
//
// Rows as bytes u = p + z (QuantizeRowsU8, what the avx512_vnni path multiplies): one tdpbusd
// (unsigned x signed) per step sums Σ u·q exactly in int32, and the avx512_vnni path's epilogue
// (Int8EpilogueRowsAvx512) takes off z · Σ q and scales: the same integers and the same bits.
// Tiles (palette 1): per block of 32 rows x 32 columns, C = tmm0/tmm1 (the first 16 rows, the
// two panels) and tmm2/tmm3 (the next 16), A = tmm4/tmm5 (16 rows x 64 k each), B = tmm6/tmm7
// (one panel's 16 columns x 64 k in the 4-byte groups the instruction reads,
// QuantizedWeights::quad_panel): four tile products per four tile loads. A tile reads 16 rows at
// a time, so rows up to the next multiple of 16 past m must be readable (their sums are never
// stored). The engine's int8 layers run this (QuantizedGemmU8) where the self-check at first use
// agrees with vpdpbusd (AmxBytesAgree; it does on the Xeon hosts of docs/benchmarks.md). It
// replaced tiles over int16 activations split exactly into a signed high and an
// unsigned low byte (tdpbssd + tdpbusd, two tile products per step), from before the
// activations became bytes; QuantizedGemm's int16 rows now take vpdpwssd on this path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
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

// u [m rounded up to 16, depth] bytes, row stride depth; zero [m] their zero points.
QUIVER_TARGET_AMX void RunBytes(const uint8_t* u, const int32_t* zero, const float* scale,
                                const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                                int64_t m, int64_t c0, int64_t c1) {
  ConfigureTilesAmx();
  const int64_t depth = w.quad_depth(), steps = depth / kTileDepth;
  const int64_t panel_bytes = depth * kPanel;  // bytes of one B panel
  alignas(64) int32_t sums[kTileRows * kPanel];
  // Column pairs outside, blocks of rows inside: a pair's two panels (24 KB at k = 384) stay in
  // L1 over every block of rows, where rows outside read all of W again for each block.
  for (int64_t col = c0; col < c1; col += 2 * kPanel) {
    const int64_t cols = std::min(2 * kPanel, c1 - col);
    const bool two = cols > kPanel;
    const int8_t* b0 = w.quad_panel(col / kPanel);
    const int8_t* b1 = two ? b0 + panel_bytes : nullptr;
    for (int64_t r = 0; r < m; r += 2 * kTileRows) {
      const bool pair = m - r > kTileRows;  // a second block of 16 rows
      const uint8_t* a0 = u + r * depth;
      const uint8_t* a1 = a0 + kTileRows * depth;
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
}

}  // namespace

SelfCheckOperands::SelfCheckOperands(int64_t m, int64_t n, int64_t k, uint32_t seed)
    : w(static_cast<size_t>(n * k)), x(static_cast<size_t>(m * k)), bias(static_cast<size_t>(n)) {
  const auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(seed >> 8) - (1 << 23)) / (1 << 23);
  };
  for (float& v : w) v = 0.2f * next();
  for (float& v : x) v = 3.0f * next();
  for (float& v : bias) v = next();
}

QUIVER_TARGET_AMX void ConfigureTilesAmx() {
  static const TileConfig kConfig = MakeConfig();
  thread_local bool configured = false;
  if (!configured) {
    _tile_loadconfig(&kConfig);
    configured = true;
  }
}

void QuantizedGemmU8Amx(const uint8_t* u, const int32_t* zero, const float* scale,
                        const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                        int64_t m, int64_t c0, int64_t c1) {
  RunBytes(u, zero, scale, w, bias, y, ldy, m, c0, c1);
}

bool AmxBytesAgree() {
  static const bool kAgree = [] {
    // Three panels (the last one partial), four steps of k (the last one padded), 37 rows (a
    // pair of 16-row tiles, then a lone one reading past m), rows of both signs, one all positive
    // and a constant one.
    constexpr int64_t kRows = 37, kCols = 40, kDepth = 200;
    SelfCheckOperands operands(kRows, kCols, kDepth, 12345);
    const std::vector<float>& bias = operands.bias;
    std::vector<float>& x = operands.x;
    for (int64_t i = 0; i < kDepth; ++i) x[5 * kDepth + i] = 1.0f + std::abs(x[5 * kDepth + i]);
    std::fill(x.begin() + 6 * kDepth, x.begin() + 7 * kDepth, 0.25f);
    const QuantizedWeights w(operands.w.data(), kCols, kDepth);
    if (w.quad_panel(0) == nullptr) return false;
    const int64_t depth = w.quad_depth();
    std::vector<uint8_t> u((kRows + 15) / 16 * 16 * depth, 7);
    std::vector<int32_t> zero(kRows);
    std::vector<float> scale(kRows), tiles(kRows * kCols), vnni(kRows * kCols);
    QuantizeRowsU8Avx512(x.data(), kDepth, kDepth, depth, 0, kRows, u.data(), zero.data(),
                         scale.data());
    RunBytes(u.data(), zero.data(), scale.data(), w, bias.data(), tiles.data(), kCols, kRows, 0,
             kCols);
    QuantizedGemmU8Avx512(u.data(), zero.data(), scale.data(), w, bias.data(), vnni.data(), kCols,
                          kRows, 0, kCols);
    const bool same = std::memcmp(tiles.data(), vnni.data(), tiles.size() * sizeof(float)) == 0;
    if (!same) {
      std::fprintf(stderr,
                   "quiver: the AMX int8 tiles disagreed with vpdpbusd on their self-check; the "
                   "int8 layers use vpdpbusd\n");
    }
    return same;
  }();
  return kAgree;
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no amx path)

namespace quiver::engine::cpu {
void QuantizedGemmU8Amx(const uint8_t*, const int32_t*, const float*, const QuantizedWeights&,
                        const float*, float*, int64_t, int64_t, int64_t, int64_t) {
  std::abort();
}
void ConfigureTilesAmx() { std::abort(); }
bool AmxBytesAgree() { return false; }
}  // namespace quiver::engine::cpu

#endif
