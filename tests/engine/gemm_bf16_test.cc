// The bf16 GEMM (gemm_bf16.h) against its definition computed here independently: weights and
// activations rounded to bf16 (round to nearest even), products summed in double, at shapes
// that cross its panel (16 columns), its two-panel and 14-row blocks, its k passes and odd
// depths. Then how far it lands from the f32 product (the rounding error, bounded), the
// batch-invariance property, and the op layer's dispatch. Skipped, saying why, on a host
// without AVX512_BF16 (or with QUIVER_CPU_ISA below avx512): bf16 has no other path.
#include "engine/kernels/cpu/gemm_bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "engine/base/thread_pool.h"
#include "engine/kernels/cpu/cpu_features.h"
#include "engine/ops/linear.h"
#include "tests/engine/quantized_linear_check.h"

namespace quiver::engine::cpu {
namespace {

using testing::RandomValues;  // tests/engine/quantized_linear_check.h

// f32 -> bf16 -> f32, round to nearest even on the 16 bits dropped (finite inputs).
float RoundBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7FFF + ((bits >> 16) & 1);
  bits &= 0xFFFF0000u;
  float y;
  std::memcpy(&y, &bits, 4);
  return y;
}

#define QUIVER_REQUIRE_BF16()                                                                      \
  if (!Bf16Supported()) {                                                                          \
    GTEST_SKIP() << "no bf16 path here (needs AVX512_BF16 and the avx512 path): " << CpuSummary(); \
  }

std::vector<uint16_t> Rows(const std::vector<float>& x, int64_t m, int64_t k) {
  std::vector<uint16_t> a(static_cast<size_t>(m * ((k + 1) / 2 * 2)), 0x7777);
  Bf16Rows(x.data(), k, k, 0, m, a.data());
  return a;
}

TEST(Bf16GemmTest, MatchesItsDefinition) {
  QUIVER_REQUIRE_BF16();
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 16, 8},
                         {7, 33, 301},
                         {15, 384, 384},
                         {6, 5, 257},
                         {29, 48, 1536},
                         {14, 64, 385}}) {
    const std::vector<float> x = RandomValues(m * k, 1, 3.0f), w = RandomValues(n * k, 2, 0.2f),
                             bias = RandomValues(n, 3);
    const Bf16Weights packed(w.data(), n, k);
    const std::vector<uint16_t> a = Rows(x, m, k);
    // The conversion: each value rounded to nearest even, the odd tail zero.
    for (int64_t i = 0; i < k; ++i) {
      float back;
      const uint32_t bits = uint32_t{a[i]} << 16;
      std::memcpy(&back, &bits, 4);
      ASSERT_EQ(back, RoundBf16(x[i])) << i;
    }
    if (k % 2 == 1) {
      ASSERT_EQ(a[k], 0);
    }
    std::vector<float> y(m * n, 99.0f);
    Bf16Gemm(a.data(), packed, bias.data(), y.data(), n, m, 0, n);
    double worst_f32 = 0, scale_f32 = 0;
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        double want = bias[c], exact = bias[c], mag = std::abs(bias[c]);
        for (int64_t i = 0; i < k; ++i) {
          const double p = double(RoundBf16(x[r * k + i])) * RoundBf16(w[c * k + i]);
          want += p;
          mag += std::abs(p);
          exact += double(x[r * k + i]) * w[c * k + i];
        }
        // f32 sums of exact products: k roundings at most, each within 2^-24 of the magnitude.
        ASSERT_NEAR(y[r * n + c], want, 1e-7 * double(k) * mag + 1e-6)
            << m << "x" << n << "x" << k << " at " << r << "," << c;
        worst_f32 = std::max(worst_f32, std::abs(y[r * n + c] - exact));
        scale_f32 = std::max(scale_f32, std::abs(exact));
      }
    }
    // bf16's 8-bit mantissas on both sides: within 1% of the product's scale.
    EXPECT_LE(worst_f32, 0.01 * scale_f32) << m << "x" << n << "x" << k;
  }
}

// At a depth of whole tile steps (k = 512: 16 pairs a step, nothing left for vdpbf16ps) and at
// one that ends with vdpbf16ps (k = 531), over whole and partial blocks of rows and columns: no
// bit depends on the rows or columns of the call, from the bias or (accumulate) from y.
TEST(Bf16GemmTest, RowsAndColumnRangesDoNotChangeAnyBit) {
  QUIVER_REQUIRE_BF16();
  for (const int64_t k : {531, 512}) {
    const int64_t m = 37, n = 80;
    const std::vector<float> x = RandomValues(m * k, 4), w = RandomValues(n * k, 5),
                             bias = RandomValues(n, 6), start = RandomValues(m * n, 7);
    const Bf16Weights packed(w.data(), n, k);
    const std::vector<uint16_t> all = Rows(x, m, k);
    std::vector<float> whole(m * n), whole_acc = start;
    Bf16Gemm(all.data(), packed, bias.data(), whole.data(), n, m, 0, n);
    Bf16Gemm(all.data(), packed, nullptr, whole_acc.data(), n, m, 0, n, /*accumulate=*/true);
    for (int64_t r = 0; r < m; ++r) {
      const std::vector<float> row(x.begin() + r * k, x.begin() + (r + 1) * k);
      const std::vector<uint16_t> one = Rows(row, 1, k);
      std::vector<float> y(n);
      Bf16Gemm(one.data(), packed, bias.data(), y.data(), n, 1, 0, 16);
      Bf16Gemm(one.data(), packed, bias.data(), y.data(), n, 1, 16, n);
      for (int64_t c = 0; c < n; ++c) {
        ASSERT_EQ(y[c], whole[r * n + c]) << k << ": " << r << "," << c;
      }
      std::vector<float> acc(start.begin() + r * n, start.begin() + (r + 1) * n);
      Bf16Gemm(one.data(), packed, nullptr, acc.data(), n, 1, 0, 48, /*accumulate=*/true);
      Bf16Gemm(one.data(), packed, nullptr, acc.data(), n, 1, 48, n, /*accumulate=*/true);
      for (int64_t c = 0; c < n; ++c) {
        ASSERT_EQ(acc[c], whole_acc[r * n + c]) << k << ", accumulate: " << r << "," << c;
      }
    }
    std::vector<float> no_bias(m * n);
    Bf16Gemm(all.data(), packed, nullptr, no_bias.data(), n, m, 0, n);
    std::vector<float> zeros(n, 0.0f), with_zero(m * n);
    Bf16Gemm(all.data(), packed, zeros.data(), with_zero.data(), n, m, 0, n);
    EXPECT_EQ(no_bias, with_zero) << k;
  }
}

// Repacking in place (attention's K and V per head): Pack from rows of a wider stride and
// PackTransposed from vᵀ give the products of weights packed from compact copies, bit for bit,
// at odd depths and partial panels, also after a larger pack reused the buffer; with
// accumulate the sums start from y.
TEST(Bf16GemmTest, RepackingAndAccumulatingMatchCompactWeights) {
  QUIVER_REQUIRE_BF16();
  Bf16Weights strided, transposed;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{20, 128, 64},
                         {13, 17, 33},
                         {3, 32, 128},
                         {1, 5, 1}}) {
    const int64_t ld = k + 7;
    const std::vector<float> wide = RandomValues(n * ld, 21, 0.5f), x = RandomValues(m * k, 22);
    std::vector<float> w(n * k), v(k * n);  // w compact [n, k]; v = wᵀ [k, n]
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t i = 0; i < k; ++i) {
        w[c * k + i] = wide[c * ld + i];
        v[i * n + c] = w[c * k + i];
      }
    }
    const Bf16Weights compact(w.data(), n, k);
    strided.Pack(wide.data(), n, k, ld);
    transposed.PackTransposed(v.data(), k, n, n);
    const std::vector<uint16_t> a = Rows(x, m, k);
    std::vector<float> want(m * n), y1(m * n), y2(m * n);
    Bf16Gemm(a.data(), compact, nullptr, want.data(), n, m, 0, n);
    Bf16Gemm(a.data(), strided, nullptr, y1.data(), n, m, 0, n);
    Bf16Gemm(a.data(), transposed, nullptr, y2.data(), n, m, 0, n);
    EXPECT_EQ(y1, want) << m << "x" << n << "x" << k;
    EXPECT_EQ(y2, want) << m << "x" << n << "x" << k;
    const std::vector<float> start = RandomValues(m * n, 23);
    std::vector<float> acc = start;
    Bf16Gemm(a.data(), compact, nullptr, acc.data(), n, m, 0, n, /*accumulate=*/true);
    for (size_t i = 0; i < acc.size(); ++i) {
      ASSERT_NEAR(acc[i], start[i] + want[i], 1e-5 * (std::abs(start[i]) + std::abs(want[i]) + 1))
          << i;
    }
  }
}

// The amx path's tiles (tdpbf16ps, Bf16InTiles) against the same product by vdpbf16ps on the
// avx512_vnni path: not the same bits (the tiles sum each step in their own order), but within
// 1e-5 of the element's magnitude, Σ|a · w| + |start|, at shapes that cross the tiles' 16 rows
// (a lone partial tile, a pair with a partial second, a row alone), their 32-deep steps (depths
// below one step, a step and a tail, odd ones), one and two panels and partial ones, with a
// bias, none, and accumulating. Runs on the amx path of an AMX-BF16 host, where the tiles must
// also have passed their own self-check (Bf16InTiles).
TEST(Bf16GemmTest, TilesStayWithinRoundingOfVdpbf16ps) {
  QUIVER_REQUIRE_BF16();
  if (ActiveCpuPath() != CpuPath::kAmx || !HostCpuFeatures().amx_bf16) {
    GTEST_SKIP() << "no bf16 tiles on this path or host: " << CpuSummary();
  }
  ASSERT_TRUE(Bf16InTiles()) << "the tiles failed their self-check";
  const CpuPath tiles_path = ActiveCpuPath();
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 40, 105},
                         {1, 17, 32},
                         {15, 32, 31},
                         {16, 48, 64},
                         {33, 5, 531},
                         {64, 96, 384},
                         {20, 130, 1536}}) {
    const std::vector<float> x = RandomValues(m * k, 31), w = RandomValues(n * k, 32, 0.3f),
                             bias = RandomValues(n, 33), start = RandomValues(m * n, 34);
    const Bf16Weights packed(w.data(), n, k);
    const std::vector<uint16_t> a = Rows(x, m, k);
    const auto run = [&](CpuPath path, const float* b, bool accumulate) {
      EXPECT_TRUE(SetActiveCpuPath(path).ok());
      std::vector<float> y = accumulate ? start : std::vector<float>(m * n, -7.0f);
      Bf16Gemm(a.data(), packed, b, y.data(), n, m, 0, n, accumulate);
      return y;
    };
    for (int form = 0; form < 3; ++form) {
      const float* b = form == 0 ? bias.data() : nullptr;
      const bool accumulate = form == 2;
      const std::vector<float> tiles = run(tiles_path, b, accumulate);
      const std::vector<float> pairs = run(CpuPath::kAvx512Vnni, b, accumulate);
      EXPECT_TRUE(SetActiveCpuPath(tiles_path).ok());
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          double magnitude =
              accumulate ? std::abs(start[r * n + c]) : (b != nullptr ? std::abs(bias[c]) : 0.0);
          for (int64_t i = 0; i < k; ++i) {
            magnitude += std::abs(double(RoundBf16(x[r * k + i])) * RoundBf16(w[c * k + i]));
          }
          ASSERT_NEAR(tiles[r * n + c], pairs[r * n + c], 1e-5 * magnitude + 1e-30)
              << m << "x" << n << "x" << k << " form " << form << " at " << r << "," << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace quiver::engine::cpu

namespace quiver::engine {
namespace {

// Through the ops layer: bf16 weights run Linear (every epilogue) and LinearAddLayerNorm within
// bf16's rounding of the f32 layer (1%; 70 rows: whole 64-row steps and a tail), CUDA refused;
// where the host lacks bf16, PrepareLinear refuses it.
TEST(Bf16LinearOpTest, EveryEpilogueStaysNearF32) {
  if (!cpu::Bf16Supported()) {
    EXPECT_FALSE(ops::WeightPrecisionSupported(Device::kCpu, ops::WeightPrecision::kBf16));
    const std::vector<float> w = testing::RandomValues(16 * 8, 1);
    EXPECT_THROW(
        ops::PrepareLinear(Device::kCpu, Tensor(w.data(), DType::kF32, Device::kCpu, {16, 8}),
                           Tensor(), ops::WeightPrecision::kBf16),
        std::invalid_argument);
    GTEST_SKIP() << "no bf16 path here: " << cpu::CpuSummary();
  }
  testing::ExpectLayerNearF32(ops::WeightPrecision::kBf16, 0.01, 70, 40, 72);
}

}  // namespace
}  // namespace quiver::engine
