// The softmax's fused pass (vec::SoftmaxExp2Sum: 2^(x scale - shift) and the sum, in place)
// against double precision: every value within 1 ulp over the whole range softmax gives it,
// arrays of every length around the vector width (the tail takes the same vector code), and the
// sum of the results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/isa_paths.h"
#include "engine/kernels/cpu/vec.h"

namespace quiver::engine::cpu {
namespace {

// |got - want| in units in the last place of want (a float).
double Ulps(float got, double want) {
  return std::abs(got - want) / std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
}

// tools/golden/fit_exp2.py measures 0.93 ulp at most over 4.2 million points of [-126, 0].
TEST(SoftmaxExpTest, WithinOneUlpFromMinus126ToZero) {
  std::vector<float> x;
  for (double v = -126.0; v <= 0.0; v += 3e-4) x.push_back(static_cast<float>(v));
  for (double v = 1e-8; v < 1.0; v *= 1.001) x.push_back(static_cast<float>(-v));
  std::vector<float> y = x;
  vec::SoftmaxExp2Sum(y.data(), static_cast<int64_t>(y.size()), 1.0f, 0.0f);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, Ulps(y[i], std::exp2(double{x[i]})));
  }
  EXPECT_LE(worst, 1.0);
}

TEST(SoftmaxExpTest, ScalesShiftsAndSumsAtEveryLength) {
  for (int64_t n = 1; n <= 37; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = 0.37f * static_cast<float>((i * 7) % 23) - 3.0f;
    const float scale = 0.125f, shift = 0.4f;
    std::vector<float> y = x;
    const float sum = vec::SoftmaxExp2Sum(y.data(), n, scale, shift);
    double want_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      // x scale - shift is rounded once (a multiply-add) before 2^x, which is within 1 ulp
      const double want = std::exp2(double{x[i]} * scale - shift);
      EXPECT_LE(Ulps(y[i], want), 2.0) << "n " << n << " i " << i;
      want_sum += want;
    }
    EXPECT_NEAR(sum, want_sum, 1e-5 * want_sum) << "n " << n;
  }
}

TEST(SoftmaxExpTest, FarBelowTheRangeIsNegligibleNotNan) {
  std::vector<float> x = {-1e30f,  -1000.0f, -std::numeric_limits<float>::infinity(),
                          -127.0f, -126.5f,  0.0f,
                          -3.0f,   -1e-3f,   -50.0f};
  const float sum = vec::SoftmaxExp2Sum(x.data(), static_cast<int64_t>(x.size()), 1.0f, 0.0f);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_GE(x[i], 0.0f);
    EXPECT_LT(x[i], 1e-37f);
  }
  EXPECT_FLOAT_EQ(x[5], 1.0f);
  EXPECT_FALSE(std::isnan(sum));
}

// The 16-lane form the avx512 paths run gives the same values and the same sum, bit for bit, at
// every length around both vector widths.
TEST(SoftmaxExpTest, SixteenLanesGiveTheSameBits) {
  const auto& paths = SupportedCpuPaths();
  if (std::find(paths.begin(), paths.end(), CpuPath::kAvx512) == paths.end()) {
    GTEST_SKIP() << "no avx512 path on this host";
  }
  for (int64_t n = 0; n <= 70; ++n) {
    for (int64_t big : {int64_t{0}, int64_t{509}}) {
      const int64_t len = n + big;
      std::vector<float> x(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) x[i] = 0.37f * static_cast<float>((i * 7) % 23) - 3.0f;
      std::vector<float> a = x, b = x;
      const float sa = vec::SoftmaxExp2Sum(a.data(), len, 0.125f, 0.4f);
      const float sb = SoftmaxExp2SumAvx512(b.data(), len, 0.125f, 0.4f);
      EXPECT_EQ(std::memcmp(&sa, &sb, sizeof(float)), 0) << "n " << len;
      EXPECT_TRUE(a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0)
          << "n " << len;
    }
  }
}

// The same bits at the ends of the range too, where the 16-lane form scales by vscalefps and the
// 8-lane one multiplies by a built power of two: below the lower clamp (-infinity and NaN
// included), up to 127 (2^x finite), and every value around them. Past 127, which no softmax
// gives (its arguments are at most one rounding above 0), the 8-lane form holds 2^127 and the
// 16-lane one goes on to infinity: both at least 2^127.
TEST(SoftmaxExpTest, SixteenLanesGiveTheSameBitsAtTheEndsOfTheRange) {
  const auto& paths = SupportedCpuPaths();
  if (std::find(paths.begin(), paths.end(), CpuPath::kAvx512) == paths.end()) {
    GTEST_SKIP() << "no avx512 path on this host";
  }
  std::vector<float> x = {-std::numeric_limits<float>::infinity(),
                          std::nanf(""),
                          -1e30f,
                          -1000.0f,
                          -127.0f,
                          -126.0f,
                          -125.5f,
                          0.0f,
                          1e-7f,
                          126.5f,
                          127.0f};
  for (float v = -127.0f; v < -125.0f; v += 1e-3f) x.push_back(v);
  for (float v = 125.0f; v <= 127.0f; v += 1e-3f) x.push_back(v);
  std::vector<float> a = x, b = x;
  const int64_t n = static_cast<int64_t>(x.size());
  vec::SoftmaxExp2Sum(a.data(), n, 1.0f, 0.0f);
  SoftmaxExp2SumAvx512(b.data(), n, 1.0f, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << "x " << x[i];
    EXPECT_TRUE(std::isfinite(a[i])) << "x " << x[i];
  }
  std::vector<float> past = {127.25f, 127.5f, 128.0f, 200.0f, 1e30f};
  std::vector<float> c = past, d = past;
  vec::SoftmaxExp2Sum(c.data(), static_cast<int64_t>(c.size()), 1.0f, 0.0f);
  SoftmaxExp2SumAvx512(d.data(), static_cast<int64_t>(d.size()), 1.0f, 0.0f);
  for (size_t i = 0; i < past.size(); ++i) {
    EXPECT_GE(c[i], 0x1p127f) << "x " << past[i];
    EXPECT_GE(d[i], 0x1p127f) << "x " << past[i];
  }
}

// The softmax's row maximum (vec::Max and its 16-lane form in four chains): the largest value,
// wherever it sits, at every length around both forms' vector widths and chains, with -infinity
// among the values (and all of them -infinity).
TEST(SoftmaxExpTest, RowMaximumAtEveryLengthAndPlace) {
  const auto& paths = SupportedCpuPaths();
  const bool avx512 = std::find(paths.begin(), paths.end(), CpuPath::kAvx512) != paths.end();
  for (int64_t n = 1; n <= 140; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = -0.37f * static_cast<float>((i * 7) % 23) - 3.0f;
    if (n > 3) x[2] = -std::numeric_limits<float>::infinity();
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> y = x;
      y[at] = 1.5f + static_cast<float>(at);
      const float want = *std::max_element(y.begin(), y.end());
      EXPECT_EQ(vec::Max(y.data(), n), want) << "n " << n << " at " << at;
      if (avx512) {
        EXPECT_EQ(MaxAvx512(y.data(), n), want) << "n " << n << " at " << at;
      }
    }
    if (avx512) {
      std::vector<float> low(static_cast<size_t>(n), -std::numeric_limits<float>::infinity());
      EXPECT_EQ(MaxAvx512(low.data(), n), -std::numeric_limits<float>::infinity());
    }
  }
}

// A softmax block for the rows-at-once tests: `rows` rows of n scores, ld apart (the values
// between rows 99, which nothing may touch), and each row's running maximum before the block:
// -infinity (a first block), below every row's scaled maximum, or above it.
struct ScoreRows {
  std::vector<float> x, start;
  ScoreRows(int64_t rows, int64_t n, int64_t ld)
      : x(static_cast<size_t>(rows * ld), 99.0f), start(static_cast<size_t>(rows)) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        x[r * ld + i] = 0.37f * static_cast<float>((i * 7 + r * 3) % 23) - 3.0f + 0.1f * r;
      }
      start[r] = r % 3 == 0 ? -std::numeric_limits<float>::infinity() : (r % 3 == 1 ? -9.0f : 4.0f);
    }
  }
};

// A block's rows at once (vec::SoftmaxExp2Rows and its 16-lane form, the f32 flash attention's
// unmasked rows): each row's running maximum, values and sum the same bits as row by row
// (vec::Max, then vec::SoftmaxExp2Sum from max(running maximum, scale x its maximum)), for odd
// and even numbers of rows, at every length around the vector widths and up to past 128, a
// running maximum that is -infinity (a first block) or finite, below the row's or above it; the
// values between rows left alone.
TEST(SoftmaxExpTest, RowsAtOnceGiveEachRowsBits) {
  const auto& paths = SupportedCpuPaths();
  const bool avx512 = std::find(paths.begin(), paths.end(), CpuPath::kAvx512) != paths.end();
  const float scale = 0.25f * 1.44269504f;
  for (int64_t rows : {int64_t{1}, int64_t{4}, int64_t{7}}) {
    for (int64_t n = 1; n <= 140; n += (n < 40 ? 1 : 11)) {
      const int64_t ld = n + 5;
      const ScoreRows block(rows, n, ld);
      const std::vector<float>& x = block.x;
      const std::vector<float>& start = block.start;
      std::vector<float> want = x, want_shift = start;
      std::vector<float> want_sum(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        float* row = want.data() + r * ld;
        want_shift[r] = std::max(want_shift[r], scale * vec::Max(row, n));
        want_sum[r] = vec::SoftmaxExp2Sum(row, n, scale, want_shift[r]);
      }
      for (const bool wide : {false, true}) {
        if (wide && !avx512) continue;
        std::vector<float> got = x, got_shift = start, got_sum(static_cast<size_t>(rows));
        if (wide) {
          SoftmaxExp2RowsAvx512(got.data(), ld, rows, n, scale, got_shift.data(), got_sum.data());
        } else {
          vec::SoftmaxExp2Rows(got.data(), ld, rows, n, scale, got_shift.data(), got_sum.data());
        }
        const std::string where = "rows " + std::to_string(rows) + " n " + std::to_string(n) +
                                  (wide ? " (16 lanes)" : " (8 lanes)");
        EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << where;
        EXPECT_EQ(std::memcmp(want_shift.data(), got_shift.data(), rows * sizeof(float)), 0)
            << where;
        EXPECT_EQ(std::memcmp(want_sum.data(), got_sum.data(), rows * sizeof(float)), 0) << where;
      }
    }
  }
}

// The int16 products' rows at once (SoftmaxExp2RowsInt16Avx512): each row's running maximum,
// int16 values (their padding past n untouched) and sum the same bits as row by row (MaxAvx512,
// then SoftmaxExp2SumInt16Avx512), for odd and even numbers of rows at lengths around both of its
// steps (16 and 32 values) and past 128, from -infinity and finite running maxima.
TEST(SoftmaxExpTest, Int16RowsAtOnceGiveEachRowsBits) {
  const auto& paths = SupportedCpuPaths();
  if (std::find(paths.begin(), paths.end(), CpuPath::kAvx512) == paths.end()) {
    GTEST_SKIP() << "no avx512 path on this host";
  }
  const float scale = 0.25f * 1.44269504f;
  const int32_t limit = 16383;
  for (int64_t rows : {int64_t{1}, int64_t{4}, int64_t{7}}) {
    for (int64_t n = 1; n <= 140; n += (n < 40 ? 1 : 11)) {
      const int64_t width = n + 6;
      const ScoreRows block(rows, n, n);
      const std::vector<float>& x = block.x;
      const std::vector<float>& start = block.start;
      std::vector<int16_t> want(static_cast<size_t>(rows * width), int16_t{-7}), got = want;
      std::vector<float> want_shift = start, got_shift = start;
      std::vector<float> want_sum(static_cast<size_t>(rows)), got_sum(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * n;
        want_shift[r] = std::max(want_shift[r], scale * MaxAvx512(row, n));
        want_sum[r] =
            SoftmaxExp2SumInt16Avx512(row, n, scale, want_shift[r], limit, want.data() + r * width);
      }
      SoftmaxExp2RowsInt16Avx512(x.data(), rows, n, scale, got_shift.data(), limit, got.data(),
                                 width, got_sum.data());
      const std::string where = "rows " + std::to_string(rows) + " n " + std::to_string(n);
      EXPECT_EQ(want, got) << where;
      EXPECT_EQ(std::memcmp(want_shift.data(), got_shift.data(), rows * sizeof(float)), 0) << where;
      EXPECT_EQ(std::memcmp(want_sum.data(), got_sum.data(), rows * sizeof(float)), 0) << where;
    }
  }
}

// The bf16 products' form (attention with AVX512_BF16): each stored value the bf16 rounding of
// 2^(x scale - shift) within 3e-6 (relative) before it, so within 2^-8 + 3e-6 of it; the sum of
// the unrounded values within 3e-6 of the exact sum; every length around the vector widths;
// nothing written past n; -infinity gives (about) 0, not NaN.
TEST(SoftmaxExpTest, Bf16FormWithinItsBound) {
  if (!HostCpuFeatures().avx512_bf16) GTEST_SKIP() << "no AVX512_BF16 on this host";
  for (int64_t n : {1, 5, 15, 16, 17, 31, 32, 33, 47, 128, 509}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = -0.0137f * static_cast<float>((i * 37) % 1009);
    const float scale = 0.17677669f, shift = -0.25f;
    std::vector<uint16_t> out(static_cast<size_t>(n + 3), 0xabcd);
    std::vector<float> y = x;
    const float sum = SoftmaxExp2SumBf16Avx512(y.data(), n, scale, shift, out.data());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << "n " << n;
    double want_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp2(double{x[i]} * scale - shift);
      want_sum += want;
      const uint32_t bits = uint32_t{out[static_cast<size_t>(i)]} << 16;
      float got;
      std::memcpy(&got, &bits, sizeof(got));
      EXPECT_LE(std::abs(got - want) / want, 1.0 / 256 + 3e-6) << "n " << n << " i " << i;
    }
    EXPECT_LE(std::abs(sum - want_sum) / want_sum, 3e-6 + 1e-6) << "n " << n;
    for (int64_t i = n; i < n + 3; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], 0xabcd);
  }
  std::vector<float> edge = {-std::numeric_limits<float>::infinity(), -1e30f, -200.0f, 0.0f,
                             std::nanf("")};
  std::vector<uint16_t> out(edge.size());
  SoftmaxExp2SumBf16Avx512(edge.data(), static_cast<int64_t>(edge.size()), 1.0f, 0.0f, out.data());
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(out[i], 0x0100) << i;  // below 2^-125, not NaN
  EXPECT_EQ(out[3], 0x3f80);                                      // 1
  EXPECT_EQ(out[4] & 0x7f80, 0x7f80);                             // NaN stays NaN
  EXPECT_NE(out[4] & 0x007f, 0);
}

}  // namespace
}  // namespace quiver::engine::cpu
