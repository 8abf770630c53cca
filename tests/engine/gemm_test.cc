// The packed GEMM against a double-precision loop, at shapes that cross its panel (16 columns),
// row (6) and depth (384) blocks; column ranges, accumulation, transposed packing; and the
// property the engine's batch invariance rests on: a row's result does not depend on the rows
// around it or on how the columns were cut.
#include "engine/kernels/cpu/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/kernels/cpu/isa_paths.h"

namespace quiver::engine::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(PackedGemmTest, MatchesADoubleLoop) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 16, 8},
                         {7, 33, 300},
                         {13, 384, 384},
                         {64, 100, 1536},
                         {6, 5, 257},
                         // x's rows packed on the avx512 path (gemm_avx512.cc's PackRows): from
                         // 1,024 columns, and from 256 where rows lie 2 KiB apart.
                         {20, 1100, 72},
                         {30, 300, 512}}) {
    const std::vector<float> x = Random(m * k, 1), w = Random(n * k, 2), bias = Random(n, 3);
    std::vector<float> y(m * n, 99.0f);
    PackedGemm(x.data(), k, PackedWeights(w.data(), n, k), bias.data(), y.data(), n, m, 0, n);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        double want = bias[c];
        for (int64_t i = 0; i < k; ++i) want += double(x[r * k + i]) * w[c * k + i];
        ASSERT_NEAR(y[r * n + c], want, 1e-4 * std::sqrt(double(k))) << m << "x" << n << "x" << k;
      }
    }
  }
}

TEST(PackedGemmTest, RowsAndColumnRangesDoNotChangeAnyBit) {
  const int64_t m = 37, n = 80, k = 600;
  const std::vector<float> x = Random(m * k, 4), w = Random(n * k, 5), bias = Random(n, 6);
  const PackedWeights packed(w.data(), n, k);
  std::vector<float> whole(m * n), pieces(m * n);
  PackedGemm(x.data(), k, packed, bias.data(), whole.data(), n, m, 0, n);
  for (int64_t r = 0; r < m; ++r) {  // each row alone, columns in two ranges
    PackedGemm(x.data() + r * k, k, packed, bias.data(), pieces.data() + r * n, n, 1, 0, 48);
    PackedGemm(x.data() + r * k, k, packed, bias.data(), pieces.data() + r * n, n, 1, 48, n);
  }
  EXPECT_EQ(whole, pieces);
}

// Column ranges wide enough for the avx512 path to pack x's rows and too narrow for it, over the
// same rows: packing is a copy, so every bit agrees (and on the other paths trivially).
TEST(PackedGemmTest, PackedAndStridedRowsGiveTheSameBits) {
  for (auto [n, k, split] :
       {std::tuple<int64_t, int64_t, int64_t>{1100, 72, 400}, {300, 512, 64}}) {
    const int64_t m = 31;
    const std::vector<float> x = Random(m * k, 7), w = Random(n * k, 8), bias = Random(n, 9);
    const PackedWeights packed(w.data(), n, k);
    std::vector<float> whole(m * n), pieces(m * n);
    PackedGemm(x.data(), k, packed, bias.data(), whole.data(), n, m, 0, n);
    for (int64_t c0 = 0; c0 < n; c0 += split) {
      PackedGemm(x.data(), k, packed, bias.data(), pieces.data(), n, m, c0,
                 std::min(n, c0 + split));
    }
    EXPECT_EQ(whole, pieces) << n << " x " << k;
  }
}

TEST(PackedGemmTest, AccumulatesAndPacksTransposed) {
  const int64_t m = 9, n = 24, k = 70;
  const std::vector<float> x = Random(m * k, 7), v = Random(k * n, 8);  // v is [k, n]
  PackedWeights packed;
  packed.PackTransposed(v.data(), k, n, n);
  std::vector<float> y(m * n, 1.0f);
  PackedGemm(x.data(), k, packed, nullptr, y.data(), n, m, 0, n, /*accumulate=*/true);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double want = 1.0;
      for (int64_t i = 0; i < k; ++i) want += double(x[r * k + i]) * v[i * n + c];
      ASSERT_NEAR(y[r * n + c], want, 1e-4);
    }
  }
}

// The micro-kernel calls cover the rows once, in order, none longer than the kernel, and no call
// is left with fewer than block / 2 rows where m has a full block: 128 rows of 14 end 8 + 8;
// WholeKernelRowCalls counts the leading calls of a whole block (the avx512 kernel's one call),
// CallsAfterWhole the rest.
TEST(PackedGemmTest, KernelCallsCoverTheRowsWithoutAShortLastCall) {
  EXPECT_EQ(KernelRows(128, 112, 14), 8);
  EXPECT_EQ(KernelRows(128, 120, 14), 8);
  for (int64_t block : {12, 14}) {
    for (int64_t m = 1; m <= 200; ++m) {
      int64_t r = 0, calls = 0, whole = 0;
      while (r < m) {
        const int64_t rows = KernelRows(m, r, block);
        if (rows == block && whole == calls) ++whole;  // the leading whole-block calls
        ASSERT_GE(rows, 1);
        ASSERT_LE(rows, block);
        if (m >= block) {
          EXPECT_GE(2 * rows, block) << "m " << m << " r " << r;
        }
        r += rows;
        ++calls;
      }
      EXPECT_EQ(r, m);
      EXPECT_EQ(calls, (m + block - 1) / block) << "m " << m;
      EXPECT_EQ(WholeKernelRowCalls(m, block), whole) << "m " << m;
      EXPECT_EQ(CallsAfterWhole(m, block), calls - whole) << "m " << m;
    }
  }
}

}  // namespace
}  // namespace quiver::engine::cpu
