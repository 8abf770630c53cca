// common/half.h against the compiler's own conversions (round to nearest even): every float whose
// bits are a multiple of a stride, and the edges (half's largest value and the ties above it, its
// subnormals, zeros, infinities, NaN); bfloat16 against float32's upper half rounded to nearest
// even, and both widenings back.
#include "common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace quiver {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t CompilerHalf(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

std::vector<float> Samples() {
  std::vector<float> out;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 65537) {
    out.push_back(FromBits(static_cast<uint32_t>(bits)));
  }
  for (float f :
       {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f, 2.98e-8f, 2.9802322e-8f,
        5.9604645e-8f, 6.1035156e-5f, 6.1e-5f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min()}) {
    out.push_back(f);
  }
  return out;
}

TEST(HalfTest, FloatToHalfIsTheCompilersRoundToNearestEven) {
  for (float f : Samples()) {
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), CompilerHalf(f)) << f;
    // Widening back is exact: what half holds comes back as the float the compiler makes.
    ASSERT_EQ(HalfToFloat(FloatToHalf(f)), static_cast<float>(static_cast<_Float16>(f))) << f;
  }
}

TEST(HalfTest, NaNStaysNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(nan))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(nan))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0x7F800001u)))));  // a signalling one
}

TEST(HalfTest, FloatToBf16RoundsTheUpperHalfToNearestEven) {
  for (float f : Samples()) {
    if (std::isnan(f)) continue;
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    const uint64_t wide = bits;
    const auto want = static_cast<uint16_t>((wide + 0x7FFF + ((wide >> 16) & 1)) >> 16);
    ASSERT_EQ(FloatToBf16(f), want) << f;
    ASSERT_EQ(Bf16ToFloat(FloatToBf16(f)), FromBits(static_cast<uint32_t>(want) << 16)) << f;
  }
  EXPECT_EQ(FloatToBf16(1.0f + 1.0f / 256), 0x3F80);  // a tie to even: down
  EXPECT_EQ(FloatToBf16(1.0f + 3.0f / 256), 0x3F82);  // a tie to even: up
}

}  // namespace
}  // namespace quiver
