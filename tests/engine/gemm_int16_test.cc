// Attention's int16 products (gemm_int16.h) against their definition computed here independently:
// each row of the left operand and each column of the right one scaled by its largest |value| to
// Int16Limit(depth), rounded to nearest even, the products summed exactly (int64 here), then
// float(sum) · (row scale · column scale), added to y by one rounding where it accumulates: the
// same bits, at shapes that cross the kernel's 16-column panels and 14-row blocks and odd depths.
// Then that it lands within the quantization's own bound of the exact product, that no sum wraps at
// the limit, and the softmax form that feeds P · V. Skipped, saying why, below the avx512_vnni
// path.
#include "engine/kernels/cpu/gemm_int16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/isa_paths.h"
#include "tests/engine/quantized_linear_check.h"

namespace quiver::engine::cpu {
namespace {

using testing::RandomValues;  // tests/engine/quantized_linear_check.h

#define QUIVER_REQUIRE_INT16()                                                              \
  if (!Int16ProductsSupported()) {                                                          \
    GTEST_SKIP() << "no int16 products here (need the avx512_vnni path): " << CpuSummary(); \
  }

// The definition: values scaled by their largest magnitude to `limit`, rounded to nearest even.
struct Quantized {
  std::vector<int32_t> q;
  float scale = 0.0f;
};
Quantized QuantizeDefinition(const std::vector<float>& x, int32_t limit) {
  float top = 0.0f;
  for (float v : x) top = std::max(top, std::abs(v));
  Quantized out;
  out.q.assign(x.size(), 0);
  if (top == 0.0f) return out;
  out.scale = top / static_cast<float>(limit);
  const float inv = static_cast<float>(limit) / top;
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = std::nearbyint(x[i] * inv);
    out.q[i] = static_cast<int32_t>(std::clamp(v, -float(limit), float(limit)));
  }
  return out;
}

TEST(Int16GemmTest, TheLimitKeepsEverySumExact) {
  for (int64_t depth = 1; depth <= 4096; ++depth) {
    const int64_t terms = std::max<int64_t>(2, (depth + 1) / 2 * 2);
    const int64_t limit = Int16Limit(depth);
    ASSERT_LE(limit * limit * terms, int64_t{2147483647}) << depth;
    if (limit < 32767) {
      ASSERT_GT((limit + 1) * (limit + 1) * terms, int64_t{2147483647}) << depth;
    }
  }
  EXPECT_EQ(Int16Limit(32), 8191);
  EXPECT_EQ(Int16Limit(1), 32767);
}

TEST(Int16GemmTest, MatchesItsDefinition) {
  QUIVER_REQUIRE_INT16();
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 16, 8},
                         {7, 33, 31},
                         {15, 128, 32},
                         {6, 5, 257},
                         {29, 48, 64},
                         {128, 32, 512},
                         {14, 64, 1}}) {
    const std::vector<float> x = RandomValues(m * k, 1, 3.0f), w = RandomValues(n * k, 2, 0.2f);
    const int32_t limit = Int16Limit(k);
    // Left rows through Int16Rows (row stride ld: a wider source), right by Pack (w [n, k]) and
    // by PackTransposed (v = wᵀ [k, n]): the same weights.
    const int64_t ld = k + 3;
    std::vector<float> wide(static_cast<size_t>(m * ld), 7.0f), v(static_cast<size_t>(k * n));
    for (int64_t r = 0; r < m; ++r) std::copy_n(x.begin() + r * k, k, wide.begin() + r * ld);
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t i = 0; i < k; ++i) v[i * n + c] = w[c * k + i];
    }
    const int64_t width = (k + 1) / 2 * 2;
    std::vector<int16_t> a(static_cast<size_t>(m * width), 0x5555);
    std::vector<float> row_scale(static_cast<size_t>(m));
    Int16Rows(wide.data(), ld, k, m, limit, a.data(), row_scale.data());
    Int16Weights packed, transposed;
    packed.Pack(w.data(), n, k, k, limit);
    transposed.PackTransposed(v.data(), k, n, n, limit, k);
    std::vector<Quantized> rows, cols;
    for (int64_t r = 0; r < m; ++r) {
      rows.push_back(QuantizeDefinition({x.begin() + r * k, x.begin() + (r + 1) * k}, limit));
      ASSERT_EQ(row_scale[r], rows.back().scale) << r;
      for (int64_t i = 0; i < width; ++i) {
        ASSERT_EQ(a[r * width + i], i < k ? rows.back().q[i] : 0) << r << "," << i;
      }
    }
    for (int64_t c = 0; c < n; ++c) {
      cols.push_back(QuantizeDefinition({w.begin() + c * k, w.begin() + (c + 1) * k}, limit));
      ASSERT_EQ(packed.scales()[c], cols.back().scale) << c;
      ASSERT_EQ(transposed.scales()[c], cols.back().scale) << c;
    }
    const std::vector<float> start = RandomValues(m * n, 3);
    for (bool accumulate : {false, true}) {
      for (const Int16Weights* weights : {&packed, &transposed}) {
        std::vector<float> y = accumulate ? start : std::vector<float>(m * n, 99.0f);
        Int16Gemm(a.data(), row_scale.data(), *weights, y.data(), n, m, accumulate);
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t c = 0; c < n; ++c) {
            int64_t sum = 0;
            double exact = 0, bound = 0;
            const double sr = rows[r].scale, sc = cols[c].scale;
            for (int64_t i = 0; i < k; ++i) {
              sum += int64_t{rows[r].q[i]} * cols[c].q[i];
              exact += double(x[r * k + i]) * w[c * k + i];
              // Each side within half its step: the product within this of the exact one.
              bound += 0.5 * (std::abs(x[r * k + i]) * sc + std::abs(w[c * k + i]) * sr) +
                       0.25 * sr * sc;
            }
            const float base = accumulate ? start[r * n + c] : 0.0f;
            const float want =
                std::fma(static_cast<float>(sum), rows[r].scale * cols[c].scale, base);
            ASSERT_EQ(y[r * n + c], want) << m << "x" << n << "x" << k << " at " << r << "," << c;
            EXPECT_LE(std::abs(double(y[r * n + c]) - base - exact),
                      bound + 1e-6 * (std::abs(base) + std::abs(exact)))
                << m << "x" << n << "x" << k << " at " << r << "," << c;
          }
        }
      }
    }
  }
}

// Every value at the limit, the largest depth a key block has (512) and a long one: the sums are
// the exact ±depth · limit², nothing wraps.
TEST(Int16GemmTest, SumsAtTheLimitDoNotWrap) {
  QUIVER_REQUIRE_INT16();
  for (int64_t k : {int64_t{32}, int64_t{511}, int64_t{512}, int64_t{4095}}) {
    const int64_t m = 3, n = 17;
    std::vector<float> x(static_cast<size_t>(m * k), 2.5f), w(static_cast<size_t>(n * k), -0.5f);
    for (int64_t i = 0; i < k; ++i) x[i] = -2.5f;  // row 0 the other sign
    const int32_t limit = Int16Limit(k);
    const int64_t width = (k + 1) / 2 * 2;
    std::vector<int16_t> a(static_cast<size_t>(m * width));
    std::vector<float> scale(static_cast<size_t>(m));
    Int16Rows(x.data(), k, k, m, limit, a.data(), scale.data());
    Int16Weights packed;
    packed.Pack(w.data(), n, k, k, limit);
    std::vector<float> y(static_cast<size_t>(m * n));
    Int16Gemm(a.data(), scale.data(), packed, y.data(), n, m, false);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        const double want = (r == 0 ? 1.25 : -1.25) * static_cast<double>(k);
        EXPECT_NEAR(y[r * n + c], want, 1e-5 * std::abs(want)) << k << " at " << r << "," << c;
      }
    }
  }
}

// A row or column of zeros quantizes as zeros with scale 0 and gives 0, not NaN.
TEST(Int16GemmTest, ZerosGiveZeros) {
  QUIVER_REQUIRE_INT16();
  const int64_t m = 2, n = 3, k = 9;
  std::vector<float> x(static_cast<size_t>(m * k), 0.0f), w = RandomValues(n * k, 9);
  for (int64_t i = 0; i < k; ++i) x[k + i] = 1.0f;
  std::fill(w.begin() + k, w.begin() + 2 * k, 0.0f);  // column 1
  const int32_t limit = Int16Limit(k);
  std::vector<int16_t> a(static_cast<size_t>(m * 10));
  std::vector<float> scale(static_cast<size_t>(m));
  Int16Rows(x.data(), k, k, m, limit, a.data(), scale.data());
  EXPECT_EQ(scale[0], 0.0f);
  Int16Weights packed;
  packed.Pack(w.data(), n, k, k, limit);
  std::vector<float> y(static_cast<size_t>(m * n), 5.0f);
  Int16Gemm(a.data(), scale.data(), packed, y.data(), n, m, false);
  for (int64_t c = 0; c < n; ++c) EXPECT_EQ(y[c], 0.0f) << c;
  EXPECT_EQ(y[n + 1], 0.0f);
}

// The softmax form for P · V: round(2^(x scale - shift) · limit) within half a step (plus the
// polynomial's 3e-6) of the exact value, clamped to [0, limit]; the sum of the unrounded values
// within 3e-6 of the exact sum; nothing written past n; a NaN score makes the sum NaN (so the
// row's output is NaN, as in f32), not a silent zero.
TEST(Int16GemmTest, SoftmaxFormWithinHalfAStep) {
  if (ActiveCpuPath() < CpuPath::kAvx512) GTEST_SKIP() << "needs the avx512 path";
  const int32_t limit = Int16Limit(128);
  for (int64_t n : {1, 5, 15, 16, 17, 31, 32, 33, 47, 128, 509}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = -0.0137f * static_cast<float>((i * 37) % 1009);
    const float scale = 0.17677669f, shift = 0.0f;
    std::vector<int16_t> out(static_cast<size_t>(n + 3), 0x2bcd);
    const float sum = SoftmaxExp2SumInt16Avx512(x.data(), n, scale, shift, limit, out.data());
    double want_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp2(double{x[i]} * scale - shift);
      want_sum += want;
      EXPECT_LE(std::abs(out[i] - want * limit), 0.5 + 3e-6 * limit) << "n " << n << " i " << i;
      EXPECT_GE(out[i], 0);
      EXPECT_LE(out[i], limit);
    }
    EXPECT_LE(std::abs(sum - want_sum) / want_sum, 3e-6 + 1e-6) << "n " << n;
    for (int64_t i = n; i < n + 3; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], 0x2bcd);
  }
  std::vector<float> edge = {-std::numeric_limits<float>::infinity(), -200.0f, 0.0f};
  std::vector<int16_t> out(edge.size() + 1);
  SoftmaxExp2SumInt16Avx512(edge.data(), 3, 1.0f, 0.0f, limit, out.data());
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[2], limit);
  edge.push_back(std::nanf(""));
  EXPECT_TRUE(std::isnan(SoftmaxExp2SumInt16Avx512(edge.data(), 4, 1.0f, 0.0f, limit, out.data())));
}

}  // namespace
}  // namespace quiver::engine::cpu
