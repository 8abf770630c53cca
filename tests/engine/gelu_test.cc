// The exact GELU (vec.h Gelu, Phi(x) by pieces of polynomials) against GELU in double, over a
// dense sweep of inputs, on every kernel path: within its bound, and every path the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/kernels.h"

namespace quiver::engine::cpu {
namespace {

TEST(GeluTest, ExactGeluWithinItsBoundOnEveryPathAndTheSameBits) {
  const CpuPath saved = ActiveCpuPath();
  // -12 .. 12 in steps of 2^-12 (98,305 values, an odd count: every path's tail runs), plus
  // zeros, tiny values and values far out.
  std::vector<float> x;
  for (int i = -12 * 4096; i <= 12 * 4096; ++i) x.push_back(static_cast<float>(i) / 4096.0f);
  // (5.625 is where Phi's argument is clamped.)
  for (float v :
       {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 30.0f, -30.0f, 1e4f, -1e4f, 5.6249995f,
        -5.6249995f, 5.625f, -5.625f, 5.6250005f, -5.6250005f, 1e30f, -1e30f}) {
    x.push_back(v);
  }
  std::vector<float> first;
  for (CpuPath path : SupportedCpuPaths()) {
    ASSERT_TRUE(SetActiveCpuPath(path).ok());
    std::vector<float> y = x;
    GeluErf(y.data(), static_cast<int64_t>(y.size()));
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      // Phi within 1.4e-8, 1e-7 after f32 rounding (tools/golden/fit_gelu.py: 0.68 of this
      // bound over a denser sweep): |x| · 1e-7 of the exact GELU, plus one f32 ulp of it.
      const double bound = std::abs(v) * 1e-7 + std::abs(want) * 1.2e-7 + 1e-38;
      worst = std::max(worst, std::abs(y[i] - want) / bound);
      EXPECT_LE(std::abs(y[i] - want), bound) << CpuPathName(path) << " x=" << v;
    }
    std::printf("%s: worst error %.3f of the bound\n", CpuPathName(path), worst);
    if (first.empty()) {
      first = y;
    } else {
      EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
          << CpuPathName(path) << " differs from " << CpuPathName(SupportedCpuPaths().front());
    }
  }
  ASSERT_TRUE(SetActiveCpuPath(saved).ok());
}

// A NaN stays NaN and +infinity stays itself on every path (Phi is exactly 1 there).
TEST(GeluTest, NanStaysNanAndInfinityItselfOnEveryPath) {
  const CpuPath saved = ActiveCpuPath();
  for (CpuPath path : SupportedCpuPaths()) {
    ASSERT_TRUE(SetActiveCpuPath(path).ok());
    std::vector<float> y(19, std::nanf(""));
    y[3] = std::numeric_limits<float>::infinity();
    y[17] = 1e38f;
    GeluErf(y.data(), static_cast<int64_t>(y.size()));
    for (size_t i = 0; i < y.size(); ++i) {
      if (i == 3) {
        EXPECT_EQ(y[i], std::numeric_limits<float>::infinity()) << CpuPathName(path);
      } else if (i == 17) {
        EXPECT_EQ(y[i], 1e38f) << CpuPathName(path);
      } else {
        EXPECT_TRUE(std::isnan(y[i])) << CpuPathName(path) << " " << i;
      }
    }
  }
  ASSERT_TRUE(SetActiveCpuPath(saved).ok());
}

}  // namespace
}  // namespace quiver::engine::cpu
