// Every kernel path this host supports (cpu_features.h) gives the same bits as the avx2 path on
// the products, f32 and int8, at shapes that cross each path's row blocks (6, 12, 13, 16), panels
// (16, 32 columns), k passes (256, 384) and AMX's 64-deep steps, with odd sizes, column ranges
// that start on any panel, accumulate mode, and activations at the int8 levels' extremes. The
// avx2 path itself is held to its definition by gemm_test.cc and gemm_int8_test.cc; the wider
// paths run those too (ctest runs them once per path, tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "engine/base/thread_pool.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/gemm.h"
#include "engine/kernels/cpu/gemm_bf16.h"
#include "engine/kernels/cpu/gemm_int8.h"
#include "engine/kernels/cpu/isa_paths.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/linear.h"

namespace quiver::engine::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Restores the active path when a test ends.
class PathGuard {
 public:
  PathGuard() : saved_(ActiveCpuPath()) {}
  ~PathGuard() { EXPECT_TRUE(SetActiveCpuPath(saved_).ok()); }

 private:
  CpuPath saved_;
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every test compares the paths with the first (avx2, or generic): there is always one, and the
// log says which ran.
class CpuPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(SupportedCpuPaths().empty());
    std::string names;
    for (CpuPath path : SupportedCpuPaths()) names += std::string(" ") + CpuPathName(path);
    std::printf("kernel paths compared on this host:%s\n", names.c_str());
  }
};

const std::vector<std::tuple<int64_t, int64_t, int64_t>>& Shapes() {  // m, n, k
  static const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 16, 8},      {1, 384, 384},    {5, 33, 7},     {13, 40, 65},
      {12, 32, 256},   {17, 129, 257},   {25, 48, 1536}, {37, 96, 383},
      {128, 384, 384}, {130, 1152, 384}, {31, 17, 1000}};
  return shapes;
}

TEST_F(CpuPathsTest, F32ProductsHaveTheSameBitsOnEveryPath) {
  PathGuard guard;
  ASSERT_TRUE(SetActiveCpuPath(SupportedCpuPaths().front()).ok());
  for (const auto& [m, n, k] : Shapes()) {
    const std::vector<float> x = Random(m * k, 11, 2.0f), w = Random(n * k, 12, 0.3f),
                             bias = Random(n, 13, 1.0f);
    const PackedWeights packed(w.data(), n, k);
    // Whole products with and without bias; a column range from the second panel; accumulate.
    auto run = [&](CpuPath path) {
      EXPECT_TRUE(SetActiveCpuPath(path).ok());
      std::vector<float> y(m * n, 0.5f), z(m * n, 0.25f), acc(m * n, 0.125f);
      PackedGemm(x.data(), k, packed, bias.data(), y.data(), n, m, 0, n);
      const int64_t c0 = n > 16 ? 16 : 0;
      PackedGemm(x.data(), k, packed, nullptr, z.data(), n, m, c0, n);
      PackedGemm(x.data(), k, packed, nullptr, acc.data(), n, m, 0, n, /*accumulate=*/true);
      y.insert(y.end(), z.begin(), z.end());
      y.insert(y.end(), acc.begin(), acc.end());
      return y;
    };
    const std::vector<float> reference = run(SupportedCpuPaths().front());
    for (CpuPath path : SupportedCpuPaths()) {
      EXPECT_TRUE(SameBits(run(path), reference))
          << CpuPathName(path) << " at m=" << m << " n=" << n << " k=" << k;
    }
  }
}

// A model's weights (packed at construction) are streamed: the f32 kernels prefetch their next
// panels as they go, across panels and k passes; the same panels repacked in place (as attention
// packs K and V) are not. Prefetching moves no arithmetic: both give the same bits on every path.
TEST_F(CpuPathsTest, StreamedPanelsGiveTheSameBitsAsRepackedOnes) {
  PathGuard guard;
  for (const auto& [m, n, k] : Shapes()) {
    const std::vector<float> x = Random(m * k, 17, 2.0f), w = Random(n * k, 18, 0.3f),
                             bias = Random(n, 19, 1.0f);
    const PackedWeights streamed(w.data(), n, k);
    PackedWeights repacked;
    repacked.Pack(w.data(), n, k, k);
    ASSERT_TRUE(streamed.streamed());
    ASSERT_FALSE(repacked.streamed());
    for (CpuPath path : SupportedCpuPaths()) {
      ASSERT_TRUE(SetActiveCpuPath(path).ok());
      auto run = [&](const PackedWeights& packed) {
        std::vector<float> y(m * n, 0.5f), slice(m * n, 0.25f);
        PackedGemm(x.data(), k, packed, bias.data(), y.data(), n, m, 0, n);
        // A depth slice from past the first k pass, over the columns from the second panel.
        const int64_t k0 = k > 400 ? 400 : 0, c0 = n > 16 ? 16 : 0;
        PackedGemmSlice(x.data() + k0, k, packed, k0, k, nullptr, slice.data(), n, m, c0, n);
        y.insert(y.end(), slice.begin(), slice.end());
        return y;
      };
      EXPECT_TRUE(SameBits(run(streamed), run(repacked)))
          << CpuPathName(path) << " at m=" << m << " n=" << n << " k=" << k;
    }
  }
}

// PackedGemmSlice over consecutive slices of the depth (the first with the bias, the rest
// accumulating), x's columns handed over slice by slice, gives PackedGemm's bits on every path:
// slices that cross the k passes, start off any panel boundary, or hold one column.
TEST_F(CpuPathsTest, DepthSlicesInOrderGiveTheWholeProduct) {
  PathGuard guard;
  for (const auto& [m, n, k] : Shapes()) {
    const std::vector<float> x = Random(m * k, 14, 2.0f), w = Random(n * k, 15, 0.3f),
                             bias = Random(n, 16, 1.0f);
    const PackedWeights packed(w.data(), n, k);
    for (CpuPath path : SupportedCpuPaths()) {
      ASSERT_TRUE(SetActiveCpuPath(path).ok());
      std::vector<float> whole(m * n, 0.5f);
      PackedGemm(x.data(), k, packed, bias.data(), whole.data(), n, m, 0, n);
      for (int64_t step : {int64_t{1}, int64_t{7}, int64_t{256}, int64_t{300}}) {
        if (step >= k && step != 1) continue;
        std::vector<float> sliced(m * n, 0.75f), columns;
        for (int64_t k0 = 0; k0 < k; k0 += step) {
          const int64_t depth = std::min(step, k - k0);
          columns.assign(static_cast<size_t>(m * depth), 0.0f);  // x's slice, its own row stride
          for (int64_t r = 0; r < m; ++r) {
            std::copy_n(x.data() + r * k + k0, depth, columns.data() + r * depth);
          }
          PackedGemmSlice(columns.data(), depth, packed, k0, k0 + depth, bias.data(), sliced.data(),
                          n, m, 0, n, /*accumulate=*/k0 > 0);
        }
        EXPECT_TRUE(SameBits(sliced, whole)) << CpuPathName(path) << " at m=" << m << " n=" << n
                                             << " k=" << k << " in slices of " << step;
      }
    }
  }
}

// A layer's panels (and attention's K and V, packed per head) are the same whichever path
// packed them: the avx512 paths transpose 16 x 16 in registers, the avx2 path copies one by one.
TEST_F(CpuPathsTest, PackedPanelsAreTheSameOnEveryPath) {
  PathGuard guard;
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      // n, k, row stride
      {16, 16, 16},    {1, 5, 5},      {17, 33, 40},     {32, 32, 1152},
      {512, 32, 1152}, {45, 384, 384}, {384, 1536, 1536}};
  for (const auto& [n, k, ld] : shapes) {
    const std::vector<float> w = Random(n * ld, 21, 1.0f), v = Random(k * ld, 22, 1.0f);
    auto run = [&](CpuPath path) {
      EXPECT_TRUE(SetActiveCpuPath(path).ok());
      PackedWeights a, b;
      a.Pack(w.data(), n, k, ld);
      b.PackTransposed(v.data(), k, std::min(n, ld), ld);
      std::vector<float> out;
      for (const PackedWeights* p : {&a, &b}) {  // every panel, the zeros past n included
        const int64_t panels = (p->n() + PackedWeights::kPanel - 1) / PackedWeights::kPanel;
        out.insert(out.end(), p->panel(0), p->panel(0) + panels * PackedWeights::kPanel * k);
      }
      return out;
    };
    const std::vector<float> reference = run(SupportedCpuPaths().front());
    for (CpuPath path : SupportedCpuPaths()) {
      EXPECT_TRUE(SameBits(run(path), reference))
          << CpuPathName(path) << " at n=" << n << " k=" << k << " ld=" << ld;
    }
  }
}

TEST_F(CpuPathsTest, Int8ProductsHaveTheSameBitsOnEveryPath) {
  PathGuard guard;
  for (const auto& [m, n, k] : Shapes()) {
    const std::vector<float> x = Random(m * k, 21, 3.0f), w = Random(n * k, 22, 0.2f),
                             bias = Random(n, 23, 1.0f);
    const QuantizedWeights packed(w.data(), n, k);
    const int64_t width = 2 * packed.k_pairs();
    std::vector<int16_t> q(m * width);
    std::vector<float> scale(m);
    QuantizeRows(x.data(), k, k, 0, m, q.data(), scale.data());
    // Row 0 at the values' extremes, both signs (p in [-255, 255]): the AMX split's high byte
    // at its widest.
    for (int64_t i = 0; i < k; ++i) q[i] = static_cast<int16_t>(i % 2 == 0 ? 255 : -255);
    auto run = [&](CpuPath path) {
      EXPECT_TRUE(SetActiveCpuPath(path).ok());
      std::vector<float> y(m * n, 0.5f), z(m * n, 0.25f);
      QuantizedGemm(q.data(), scale.data(), packed, bias.data(), y.data(), n, m, 0, n);
      const int64_t c0 = n > 16 ? 16 : 0;
      QuantizedGemm(q.data(), scale.data(), packed, nullptr, z.data(), n, m, c0, n);
      y.insert(y.end(), z.begin(), z.end());
      return y;
    };
    const std::vector<float> reference = run(SupportedCpuPaths().front());
    for (CpuPath path : SupportedCpuPaths()) {
      EXPECT_TRUE(SameBits(run(path), reference))
          << CpuPathName(path) << " at m=" << m << " n=" << n << " k=" << k;
    }
  }
}

// Rows quantized to int16 (QuantizeRows) on every path: the avx2 path's values and scales, at
// odd lengths, for ordinary rows, an all-zero one, one too small to scale and one infinite.
TEST_F(CpuPathsTest, QuantizedRowsHaveTheSameBitsOnEveryPath) {
  PathGuard guard;
  for (int64_t k :
       {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{33}, int64_t{384}, int64_t{1537}}) {
    const int64_t m = 6, width = (k + 1) / 2 * 2;
    std::vector<float> x = Random(m * k, 61, 4.0f);
    std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);
    std::fill(x.begin() + 2 * k, x.begin() + 3 * k, 1e-39f);
    x[3 * k] = std::numeric_limits<float>::infinity();
    auto run = [&](CpuPath path) {
      EXPECT_TRUE(SetActiveCpuPath(path).ok());
      std::vector<int16_t> q(m * width, 7);
      std::vector<float> scale(m, -1.0f);
      QuantizeRows(x.data(), k, k, 0, m, q.data(), scale.data());
      std::vector<float> out(scale);
      for (int16_t v : q) out.push_back(static_cast<float>(v));
      return out;
    };
    const std::vector<float> reference = run(SupportedCpuPaths().front());
    for (CpuPath path : SupportedCpuPaths()) {
      EXPECT_TRUE(SameBits(run(path), reference)) << CpuPathName(path) << " at k=" << k;
    }
  }
}

// The byte rows (u = p + zero, QuantizeRowsU8) and their vpdpbusd product on the avx2_vnni
// path (256 bits) and the avx512_vnni one give the int16 rows' bits on the avx2 path: values,
// zero points, scales and products, over rows of every sign, an all-zero one, one with a single
// value and one with an infinity, and panels with fewer than 8 columns left.
TEST_F(CpuPathsTest, ByteRowsOnTheVnniPathsGiveTheSameBits) {
  const auto& paths = SupportedCpuPaths();
  std::vector<CpuPath> byte_paths;
  for (CpuPath p : {CpuPath::kAvx2Vnni, CpuPath::kAvx512Vnni}) {
    if (std::find(paths.begin(), paths.end(), p) != paths.end()) byte_paths.push_back(p);
  }
  if (byte_paths.empty()) GTEST_SKIP() << "no avx2_vnni or avx512_vnni path on this host";
  PathGuard guard;
  for (CpuPath byte_path : byte_paths) {
    SCOPED_TRACE(CpuPathName(byte_path));
    for (const auto& [m, n, k] : Shapes()) {
      std::vector<float> x = Random(m * k, 41, 3.0f);
      const std::vector<float> w = Random(n * k, 42, 0.2f), bias = Random(n, 43, 1.0f);
      if (m > 5) {
        for (int64_t i = 0; i < k; ++i) x[i] = std::abs(x[i]) + 0.5f;    // zero point 0
        for (int64_t i = 0; i < k; ++i) x[k + i] = -std::abs(x[k + i]);  // zero point 255
        std::fill(x.begin() + 2 * k, x.begin() + 3 * k, 0.0f);
        std::fill(x.begin() + 3 * k, x.begin() + 4 * k, 0.0f);
        x[3 * k + k / 2] = -5.0f;
        x[4 * k + k - 1] = std::numeric_limits<float>::infinity();
      }
      ASSERT_TRUE(SetActiveCpuPath(byte_path).ok());
      const QuantizedWeights packed(w.data(), n, k);
      ASSERT_NE(packed.quad_panel(0), nullptr);
      const int64_t depth = packed.quad_depth();
      std::vector<uint8_t> u(m * depth, 5);
      std::vector<int32_t> zero(m, -1);
      std::vector<float> u_scale(m, -1.0f);
      QuantizeRowsU8(x.data(), k, k, depth, 0, m, u.data(), zero.data(), u_scale.data());
      std::vector<float> y(m * n, 0.5f), z(m * n, 0.25f);
      QuantizedGemmU8(u.data(), zero.data(), u_scale.data(), packed, bias.data(), y.data(), n, m, 0,
                      n);
      const int64_t c0 = n > 16 ? 16 : 0;
      QuantizedGemmU8(u.data(), zero.data(), u_scale.data(), packed, nullptr, z.data(), n, m, c0,
                      n);

      ASSERT_TRUE(SetActiveCpuPath(CpuPath::kAvx2).ok());
      const int64_t width = 2 * packed.k_pairs();
      std::vector<int16_t> q(m * width);
      std::vector<float> scale(m);
      QuantizeRows(x.data(), k, k, 0, m, q.data(), scale.data());
      std::vector<float> reference(m * n, 0.5f), reference_z(m * n, 0.25f);
      QuantizedGemm(q.data(), scale.data(), packed, bias.data(), reference.data(), n, m, 0, n);
      QuantizedGemm(q.data(), scale.data(), packed, nullptr, reference_z.data(), n, m, c0, n);
      EXPECT_TRUE(SameBits(u_scale, scale)) << "m=" << m << " k=" << k;
      EXPECT_TRUE(SameBits(y, reference)) << "m=" << m << " n=" << n << " k=" << k;
      EXPECT_TRUE(SameBits(z, reference_z)) << "m=" << m << " n=" << n << " k=" << k;
      for (int64_t r = 0; r < m; ++r) {  // u - zero is p, and zeros past k
        ASSERT_GE(zero[r], 0);
        ASSERT_LE(zero[r], 255);
        for (int64_t i = 0; i < depth; ++i) {
          const int expected = i < k ? q[r * width + i] + zero[r] : 0;
          ASSERT_EQ(int{u[r * depth + i]}, expected) << r << "," << i;
        }
      }
      if (m > 5) {
        EXPECT_EQ(zero[0], 0);
        EXPECT_EQ(zero[1], 255);
        EXPECT_EQ(u_scale[2], 0.0f);
        EXPECT_EQ(u_scale[4], 0.0f);  // an infinity: the row quantizes as zeros
      }
    }
  }
}

// int8 weights hold one layout, the active path's (quads where it multiplies bytes, else pairs),
// and build the other on first use, from the first: the same bytes as weights quantized under a
// path that reads it (the products above read such a layout: byte products before, int16 after).
TEST_F(CpuPathsTest, Int8WeightsHoldOneLayoutAndBuildTheOtherWithTheSameBytes) {
  const auto& paths = SupportedCpuPaths();
  PathGuard guard;
  for (const auto& [m, n, k] : Shapes()) {
    const std::vector<float> w = Random(n * k, 52, 0.2f);
    const int64_t panels = (n + 15) / 16, pair_bytes = panels * 16 * 2 * ((k + 1) / 2);
    ASSERT_TRUE(SetActiveCpuPath(CpuPath::kAvx2).ok());
    const QuantizedWeights pairs_first(w.data(), n, k);
    EXPECT_EQ(pairs_first.layout_bytes(), pair_bytes);
    bool checked_quads = false;
    for (CpuPath byte_path : {CpuPath::kAvx2Vnni, CpuPath::kAvx512Vnni}) {
      if (std::find(paths.begin(), paths.end(), byte_path) == paths.end()) continue;
      SCOPED_TRACE(CpuPathName(byte_path));
      ASSERT_TRUE(SetActiveCpuPath(byte_path).ok());
      const QuantizedWeights quads_first(w.data(), n, k);
      const int64_t quad_bytes = panels * 16 * quads_first.quad_depth();
      EXPECT_EQ(quads_first.layout_bytes(), quad_bytes);
      ASSERT_EQ(std::memcmp(quads_first.panel(0), pairs_first.panel(0), pair_bytes), 0)
          << "n=" << n << " k=" << k;
      EXPECT_EQ(quads_first.layout_bytes(), quad_bytes + pair_bytes);
      if (!checked_quads) {
        ASSERT_EQ(std::memcmp(pairs_first.quad_panel(0), quads_first.quad_panel(0), quad_bytes), 0)
            << "n=" << n << " k=" << k;
        EXPECT_EQ(pairs_first.layout_bytes(), quad_bytes + pair_bytes);
        checked_quads = true;
      }
      for (int64_t c = 0; c < n; ++c) {
        EXPECT_EQ(quads_first.scales()[c], pairs_first.scales()[c]);
        EXPECT_EQ(quads_first.column_sums()[c], pairs_first.column_sums()[c]);
      }
    }
    if (!checked_quads) {
      EXPECT_EQ(pairs_first.quad_panel(0), nullptr);
    }
  }
}

// The amx path's byte products (tdpbusd tiles, QuantizedGemmU8Amx) give vpdpbusd's bits, over
// rows that end inside a tile and rows read past m, and its self-check agrees (so the engine's
// layers use the tiles there).
TEST_F(CpuPathsTest, BytesOnTheAmxPathGiveTheSameBits) {
  const auto& paths = SupportedCpuPaths();
  if (std::find(paths.begin(), paths.end(), CpuPath::kAmx) == paths.end()) {
    GTEST_SKIP() << "no amx path on this host";
  }
  PathGuard guard;
  ASSERT_TRUE(SetActiveCpuPath(CpuPath::kAmx).ok());
  EXPECT_TRUE(AmxBytesAgree());
  for (const auto& [m, n, k] : Shapes()) {
    std::vector<float> x = Random(m * k, 31, 3.0f);
    const std::vector<float> w = Random(n * k, 32, 0.2f), bias = Random(n, 33, 1.0f);
    if (m > 3) {  // an all-zero row, one with a single value, one with an infinity
      std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);
      std::fill(x.begin() + 2 * k, x.begin() + 3 * k, 0.0f);
      x[2 * k + k / 2] = -5.0f;
      x[3 * k + k - 1] = -std::numeric_limits<float>::infinity();
    }
    const QuantizedWeights packed(w.data(), n, k);
    const int64_t depth = packed.quad_depth(), padded = (m + 15) / 16 * 16;
    std::vector<uint8_t> u(padded * depth, 5);
    std::vector<int32_t> zero(m);
    std::vector<float> scale(m);
    QuantizeRowsU8(x.data(), k, k, depth, 0, m, u.data(), zero.data(), scale.data());
    std::vector<float> tiles(m * n, 0.5f), vnni(m * n, 0.5f);
    QuantizedGemmU8Amx(u.data(), zero.data(), scale.data(), packed, bias.data(), tiles.data(), n, m,
                       0, n);
    QuantizedGemmU8Avx512(u.data(), zero.data(), scale.data(), packed, bias.data(), vnni.data(), n,
                          m, 0, n);
    EXPECT_TRUE(SameBits(tiles, vnni)) << "m=" << m << " n=" << n << " k=" << k;
    if (n > 32) {  // a column range inside the row, as a tile of the engine's products takes
      std::vector<float> part(m * n, 0.5f), want(m * n, 0.5f);
      QuantizedGemmU8Amx(u.data(), zero.data(), scale.data(), packed, bias.data(), part.data(), n,
                         m, 16, n - 3);
      QuantizedGemmU8Avx512(u.data(), zero.data(), scale.data(), packed, bias.data(), want.data(),
                            n, m, 16, n - 3);
      EXPECT_TRUE(SameBits(part, want)) << "m=" << m << " n=" << n << " k=" << k;
    }
  }
}

// The Linear layers as the models call them, over a pool of 3 threads (tiles that start on
// rows and columns of every alignment), f32 and int8, with each epilogue: every path, the avx2
// path's bits. n = 40 and 45 leave 8 and 13 values past the last 32 (the products' last panel,
// the LayerNorm's sums and scalar tail).
TEST_F(CpuPathsTest, LinearLayersOverThePoolHaveTheSameBitsOnEveryPath) {
  PathGuard guard;
  ThreadPool pool(3);
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 384, 384}, {7, 1536, 384}, {100, 384, 1536}, {301, 1152, 384}, {29, 40, 33}, {5, 45, 33}};
  for (const auto& [m, n, k] : shapes) {
    const std::vector<float> x = Random(m * k, 41, 2.0f), w = Random(n * k, 42, 0.1f),
                             bias = Random(n, 43, 0.5f), residual = Random(m * n, 44, 1.0f),
                             gamma = Random(n, 45, 1.0f), beta = Random(n, 46, 0.5f);
    const PackedWeights f32(w.data(), n, k);
    const QuantizedWeights int8(w.data(), n, k);  // on an amx host, with its layout too
    auto run = [&](CpuPath path) {
      EXPECT_TRUE(SetActiveCpuPath(path).ok());
      std::vector<float> out;
      for (Epilogue e : {Epilogue::kNone, Epilogue::kGeluErf, Epilogue::kResidual}) {
        std::vector<float> y(m * n, 9.0f), z(m * n, 9.0f);
        Linear(pool, x.data(), f32, bias.data(), y.data(), m, e, residual.data());
        Linear(pool, x.data(), int8, bias.data(), z.data(), m, e, residual.data());
        out.insert(out.end(), y.begin(), y.end());
        out.insert(out.end(), z.begin(), z.end());
      }
      std::vector<float> io = residual, io8 = residual, scratch(m * n);
      LinearAddLayerNorm(pool, x.data(), f32, bias.data(), io.data(), gamma.data(), beta.data(),
                         scratch.data(), m, 1e-12f);
      LinearAddLayerNorm(pool, x.data(), int8, bias.data(), io8.data(), gamma.data(), beta.data(),
                         scratch.data(), m, 1e-12f);
      out.insert(out.end(), io.begin(), io.end());
      out.insert(out.end(), io8.begin(), io8.end());
      return out;
    };
    const std::vector<float> reference = run(SupportedCpuPaths().front());
    for (CpuPath path : SupportedCpuPaths()) {
      EXPECT_TRUE(SameBits(run(path), reference))
          << CpuPathName(path) << " at m=" << m << " n=" << n << " k=" << k;
    }
  }
}

// The fused feed-forward (per block of rows on one thread) against the two layers it replaces,
// on every path and for int8, f32 and bf16 weights: the same bits, for a batch of whole blocks,
// one with a ragged last block, each GELU form and none; an intermediate of one slice
// (kFeedForwardSlice) and of three, the last one short (f32 makes it slice by slice).
class FusedFeedForwardTest : public CpuPathsTest, public ::testing::WithParamInterface<int64_t> {};
INSTANTIATE_TEST_SUITE_P(Widths, FusedFeedForwardTest,
                         ::testing::Values(int64_t{200}, 2 * kFeedForwardSlice + 88));

TEST_P(FusedFeedForwardTest, EqualsItsTwoLayersOnEveryPath) {
  PathGuard guard;
  ThreadPool pool(2);
  const int64_t n = 96, width = GetParam();
  const std::vector<float> wu = Random(width * n, 51, 0.2f), bu = Random(width, 52, 0.5f),
                           wd = Random(n * width, 53, 0.1f), bd = Random(n, 54, 0.5f),
                           gamma = Random(n, 55, 1.0f), beta = Random(n, 56, 0.5f);
  const int64_t attended_width = 72;  // the attention's output width need not be n
  const std::vector<float> wo = Random(n * attended_width, 58, 0.2f), bo = Random(n, 59, 0.5f),
                           gamma1 = Random(n, 60, 1.0f), beta1 = Random(n, 61, 0.5f);
  const QuantizedWeights up8(wu.data(), width, n), down8(wd.data(), n, width),
      o8(wo.data(), n, attended_width);
  const PackedWeights up32(wu.data(), width, n), down32(wd.data(), n, width),
      o32(wo.data(), n, attended_width);
  // 128 and 150 rows: one or two blocks per thread (the last one short), fused since 235551d;
  // f32 (FeedForwardPlanOf): 64 and 75 rows, 300 two blocks of 112 then two of 38, 512 two of
  // 192 then two of 64, 777 eight blocks of 98 (the last one short).
  for (int64_t m : {int64_t{128}, int64_t{150}, int64_t{300}, int64_t{512}, int64_t{777}}) {
    ASSERT_TRUE(FeedForwardIsFused(pool, m));
    const std::vector<float> x = Random(m * n, 57, 2.0f);
    const std::vector<float> attended = Random(m * attended_width, 62, 1.5f);
    for (CpuPath path : SupportedCpuPaths()) {
      ASSERT_TRUE(SetActiveCpuPath(path).ok());
      auto compare = [&](const auto& up, const auto& down, const auto& o, const char* form) {
        for (Epilogue e : {Epilogue::kGeluErf, Epilogue::kGeluTanh, Epilogue::kNone}) {
          std::vector<float> fused = x, inter(m * width), scratch(m * n);
          FeedForwardAddLayerNorm(pool, fused.data(), up, bu.data(), e, down, bd.data(),
                                  gamma.data(), beta.data(), m, 1e-12f);
          std::vector<float> layers = x;
          Linear(pool, layers.data(), up, bu.data(), inter.data(), m, e);
          LinearAddLayerNorm(pool, inter.data(), down, bd.data(), layers.data(), gamma.data(),
                             beta.data(), scratch.data(), m, 1e-12f);
          EXPECT_TRUE(SameBits(fused, layers)) << CpuPathName(path) << " " << form << " m=" << m;

          // With the attention's output projection and its LayerNorm first.
          using Weights = std::remove_cv_t<std::remove_reference_t<decltype(up)>>;
          const AttentionOutputOf<Weights> first{attended.data(), &o, bo.data(), gamma1.data(),
                                                 beta1.data()};
          std::vector<float> fused_all = x;
          FeedForwardAddLayerNorm(pool, fused_all.data(), up, bu.data(), e, down, bd.data(),
                                  gamma.data(), beta.data(), m, 1e-12f, &first);
          std::vector<float> layers_all = x;
          LinearAddLayerNorm(pool, attended.data(), o, bo.data(), layers_all.data(), gamma1.data(),
                             beta1.data(), scratch.data(), m, 1e-12f);
          Linear(pool, layers_all.data(), up, bu.data(), inter.data(), m, e);
          LinearAddLayerNorm(pool, inter.data(), down, bd.data(), layers_all.data(), gamma.data(),
                             beta.data(), scratch.data(), m, 1e-12f);
          EXPECT_TRUE(SameBits(fused_all, layers_all))
              << CpuPathName(path) << " " << form << " m=" << m;
          EXPECT_FALSE(SameBits(fused_all, fused));
        }
      };
      compare(up8, down8, o8, "int8");
      compare(up32, down32, o32, "f32");
      if (Bf16Supported()) {
        compare(Bf16Weights(wu.data(), width, n), Bf16Weights(wd.data(), n, width),
                Bf16Weights(wo.data(), n, attended_width), "bf16");
      }
    }
  }
}

// The f32 feed-forward's blocks (FeedForwardPlanOf: one per thread, three quarters of a share
// then 64-row blocks, or blocks of about 128 rows) cover every row once whatever the thread
// count: the same bits as the two layers, on the active path.
TEST(FusedFeedForwardPlanTest, F32BlocksCoverEveryRowForAnyThreadCount) {
  const int64_t n = 64, width = 2 * kFeedForwardSlice + 40;
  const std::vector<float> wu = Random(width * n, 71, 0.2f), bu = Random(width, 72, 0.5f),
                           wd = Random(n * width, 73, 0.1f), bd = Random(n, 74, 0.5f),
                           gamma = Random(n, 75, 1.0f), beta = Random(n, 76, 0.5f);
  const PackedWeights up(wu.data(), width, n), down(wd.data(), n, width);
  for (int threads : {1, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t m : {int64_t{200}, int64_t{385}, int64_t{512}, int64_t{1029}, int64_t{2100}}) {
      if (!FeedForwardIsFused(pool, m)) continue;
      const std::vector<float> x = Random(m * n, 77, 2.0f);
      std::vector<float> fused = x, layers = x, inter(m * width), scratch(m * n);
      FeedForwardAddLayerNorm(pool, fused.data(), up, bu.data(), Epilogue::kGeluErf, down,
                              bd.data(), gamma.data(), beta.data(), m, 1e-12f);
      Linear(pool, layers.data(), up, bu.data(), inter.data(), m, Epilogue::kGeluErf);
      LinearAddLayerNorm(pool, inter.data(), down, bd.data(), layers.data(), gamma.data(),
                         beta.data(), scratch.data(), m, 1e-12f);
      EXPECT_TRUE(SameBits(fused, layers)) << threads << " threads, m=" << m;
    }
  }
}

// A plan over the sequences of `cu` (their cumulative lengths).
AttentionPlan PlanOver(const std::vector<int32_t>& cu, int64_t heads, int64_t kv_heads, int64_t d,
                       float scale) {
  AttentionPlan plan;
  plan.cu_seqlens = cu.data();
  plan.num_seqs = static_cast<int64_t>(cu.size()) - 1;
  for (size_t s = 1; s < cu.size(); ++s) {
    plan.max_seqlen = std::max<int64_t>(plan.max_seqlen, cu[s] - cu[s - 1]);
  }
  plan.num_heads = heads;
  plan.num_kv_heads = kv_heads;
  plan.head_dim = d;
  plan.scale = scale;
  return plan;
}

// The attention forms both fused projections are checked in: bidirectional, causal, a sliding
// window, and the bf16 products (with and without causality) where the host has them.
struct AttentionVariant {
  bool causal, bf16;
  int64_t window;
  AttentionPlan Of(AttentionPlan plan) const {
    plan.causal = causal;
    plan.bf16_products = bf16;
    plan.window = window;
    return plan;
  }
};
std::vector<AttentionVariant> AttentionVariants() {
  return {{false, false, -1},
          {true, false, -1},
          {false, false, 20},
          {false, true, -1},
          {true, true, -1}};
}
std::string Describe(const AttentionVariant& v) {
  return "causal=" + std::to_string(v.causal) + " bf16=" + std::to_string(v.bf16) +
         " window=" + std::to_string(v.window);
}

// Linear then FlashAttention, the two steps the fused forms replace: the attention's output, the
// projection in qkv.
template <typename Weights>
std::vector<float> TwoSteps(ThreadPool& pool, const std::vector<float>& x, const Weights& w,
                            const std::vector<float>& bias, const AttentionPlan& p, int64_t m,
                            std::vector<float>& qkv) {
  const int64_t n = w.n(), q_width = p.num_heads * p.head_dim;
  qkv.assign(static_cast<size_t>(m * n), 0.0f);
  std::vector<float> out(static_cast<size_t>(m * q_width), -2.0f);
  Linear(pool, x.data(), w, bias.data(), qkv.data(), m);
  FlashAttention(p, qkv.data(), n, qkv.data() + q_width,
                 qkv.data() + q_width + p.num_kv_heads * p.head_dim, n, out.data(), pool);
  return out;
}

// The fused projection and attention (per sequence on one thread) against the two steps it
// replaces, on every path and for int8, f32 and bf16 weights: the same bits, with grouped heads,
// bidirectional and causal, a sliding window, and the bf16 products where the host has them; a
// sequence of no tokens among them. And where it applies: enough sequences, none too long for its
// share.
TEST_F(CpuPathsTest, FusedQkvAttentionEqualsItsTwoStepsOnEveryPath) {
  PathGuard guard;
  ThreadPool pool(2);
  const int64_t heads = 4, kv_heads = 2, d = 16, k = 96;
  const int64_t n = (heads + 2 * kv_heads) * d;
  const std::vector<int32_t> lengths = {37, 128, 5, 64, 90, 0, 1, 77, 100, 3, 50};
  std::vector<int32_t> cu = {0};
  for (int32_t len : lengths) cu.push_back(cu.back() + len);
  const int64_t m = cu.back();
  const std::vector<float> w = Random(n * k, 71, 0.3f), bias = Random(n, 72, 0.5f),
                           x = Random(m * k, 73, 2.0f);
  const QuantizedWeights qkv_w(w.data(), n, k);
  const PackedWeights qkv_f32(w.data(), n, k);
  const AttentionPlan plan = PlanOver(cu, heads, kv_heads, d, 0.25f);
  ASSERT_TRUE(QkvAttentionIsFused(pool, plan));
  for (CpuPath path : SupportedCpuPaths()) {
    ASSERT_TRUE(SetActiveCpuPath(path).ok());
    for (const AttentionVariant& v : AttentionVariants()) {
      if (v.bf16 && !Bf16Supported()) continue;
      const AttentionPlan p = v.Of(plan);
      auto compare = [&](const auto& weights, const char* form) {
        std::vector<float> qkv2;
        const std::vector<float> steps = TwoSteps(pool, x, weights, bias, p, m, qkv2);
        // The projections in the threads' buffers (the default), and in qkv (no buffer allowed).
        std::vector<float> qkv(m * n), fused(m * heads * d, -1.0f);
        QkvAttention(pool, x.data(), weights, bias.data(), qkv.data(), p, fused.data());
        EXPECT_TRUE(SameBits(fused, steps))
            << CpuPathName(path) << " " << form << " " << Describe(v);
        std::vector<float> fused_qkv(m * heads * d, -3.0f);
        QkvAttention(pool, x.data(), weights, bias.data(), qkv.data(), p, fused_qkv.data(),
                     /*thread_row_bytes=*/0);
        EXPECT_TRUE(SameBits(qkv, qkv2)) << CpuPathName(path) << " " << form;
        EXPECT_TRUE(SameBits(fused_qkv, steps)) << CpuPathName(path) << " " << form;
      };
      compare(qkv_w, "int8");
      compare(qkv_f32, "f32");
      if (Bf16Supported()) compare(Bf16Weights(w.data(), n, k), "bf16");
    }
  }
  // Too few sequences for the threads, or one too long for its share: the two steps instead.
  AttentionPlan few = plan;
  few.num_seqs = 7;
  EXPECT_FALSE(QkvAttentionIsFused(pool, few));
  std::vector<int32_t> long_cu = cu;
  for (size_t i = 2; i < long_cu.size(); ++i) long_cu[i] += 200;  // the second sequence: 328
  AttentionPlan one_long = plan;
  one_long.cu_seqlens = long_cu.data();
  EXPECT_FALSE(QkvAttentionIsFused(pool, one_long));
}

// The projection and attention per (sequence, head) against the two steps it replaces, on every
// path: the same bits, with grouped heads and with one kv head per head, bidirectional and
// causal, a sliding window, the bf16 products where the host has them, a sequence of no tokens
// among a few. And where it applies: not where the per-sequence form does, at least four tasks
// per thread, head_dim a multiple of 16, each head's rows within the thread buffer's bound.
// The whole post-LN layer per sequence (int8 weights) against its two steps, QkvAttention and
// then FeedForwardAddLayerNorm with the output projection first, on every path and over 1, 2
// and 3 threads: the same bits, bidirectional and causal, with a sliding window, with the int16
// and bf16 attention products where the host has them, and with each activation; a sequence of
// no tokens among them. And where it applies: enough sequences for the threads.
TEST_F(CpuPathsTest, PostLnLayerBySequenceEqualsItsTwoStepsOnEveryPath) {
  PathGuard guard;
  const int64_t heads = 4, d = 16, hidden = 64, inter = 160;
  const int64_t n = 3 * heads * d;
  // Enough sequences for 3 threads (QkvAttentionIsFused: 12, the longest within a sixth).
  const std::vector<int32_t> lengths = {37, 128, 5, 64, 90, 0, 1, 77, 100, 3, 50, 60, 33, 20, 120};
  std::vector<int32_t> cu = {0};
  for (int32_t len : lengths) cu.push_back(cu.back() + len);
  const int64_t m = cu.back();
  const std::vector<float> wq = Random(n * hidden, 81, 0.3f), bq = Random(n, 82, 0.5f),
                           wo = Random(hidden * heads * d, 83, 0.2f), bo = Random(hidden, 84, 0.5f),
                           wu = Random(inter * hidden, 85, 0.2f), bu = Random(inter, 86, 0.5f),
                           wd = Random(hidden * inter, 87, 0.2f), bd = Random(hidden, 88, 0.5f),
                           g1 = Random(hidden, 89, 1.0f), b1 = Random(hidden, 90, 0.5f),
                           g2 = Random(hidden, 91, 1.0f), b2 = Random(hidden, 92, 0.5f),
                           x = Random(m * hidden, 93, 2.0f);
  const QuantizedWeights qkv(wq.data(), n, hidden), o(wo.data(), hidden, heads * d),
      up(wu.data(), inter, hidden), down(wd.data(), hidden, inter);
  const AttentionPlan plan = PlanOver(cu, heads, heads, d, 0.25f);
  constexpr float kEps = 1e-12f;
  for (CpuPath path : SupportedCpuPaths()) {
    ASSERT_TRUE(SetActiveCpuPath(path).ok());
    for (const AttentionVariant& v : AttentionVariants()) {
      if (v.bf16 && !Bf16Supported()) continue;
      for (const bool int16 : {false, true}) {
        if (int16 && (v.bf16 || !Int16ProductsSupported())) continue;
        AttentionPlan p = v.Of(plan);
        p.int16_products = int16;
        for (Epilogue e : {Epilogue::kGeluErf, Epilogue::kNone, Epilogue::kGeluTanh}) {
          const PostLnLayer layer{&qkv,      bq.data(), &o,    bo.data(), g1.data(), b1.data(), &up,
                                  bu.data(), e,         &down, bd.data(), g2.data(), b2.data()};
          std::vector<float> reference;
          for (int threads : {1, 2, 3}) {
            ThreadPool pool(threads);
            ASSERT_TRUE(PostLnLayerBySequenceFits(pool, p, n));
            std::vector<float> steps = x, qkv_rows(m * n), attended(m * heads * d, -1.0f);
            QkvAttention(pool, steps.data(), qkv, bq.data(), qkv_rows.data(), p, attended.data());
            const AttentionOutput first{attended.data(), &o, bo.data(), g1.data(), b1.data()};
            FeedForwardAddLayerNorm(pool, steps.data(), up, bu.data(), e, down, bd.data(),
                                    g2.data(), b2.data(), m, kEps, &first);
            std::vector<float> fused = x;
            PostLnLayerBySequence(pool, fused.data(), layer, p, kEps);
            EXPECT_TRUE(SameBits(fused, steps))
                << CpuPathName(path) << " " << Describe(v) << " int16=" << int16
                << " epilogue=" << static_cast<int>(e) << " threads=" << threads;
            if (reference.empty()) reference = fused;
            EXPECT_TRUE(SameBits(fused, reference)) << CpuPathName(path) << " threads=" << threads;
          }
        }
      }
    }
  }
  // Too few sequences for the threads: the two steps instead.
  ThreadPool pool(2);
  AttentionPlan few = plan;
  few.num_seqs = 7;
  EXPECT_FALSE(PostLnLayerBySequenceFits(pool, few, n));
}

TEST_F(CpuPathsTest, QkvAttentionByHeadsEqualsItsTwoStepsOnEveryPath) {
  PathGuard guard;
  ThreadPool pool(2);
  const int64_t d = 32, k = 96;
  const std::vector<int32_t> lengths = {300, 0, 45};
  std::vector<int32_t> cu = {0};
  for (int32_t len : lengths) cu.push_back(cu.back() + len);
  const int64_t m = cu.back();
  for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{6, 3}, {4, 4}}) {
    const int64_t n = (heads + 2 * kv_heads) * d;
    const std::vector<float> w = Random(n * k, 81, 0.3f), bias = Random(n, 82, 0.5f),
                             x = Random(m * k, 83, 2.0f);
    const PackedWeights weights(w.data(), n, k);
    const AttentionPlan plan = PlanOver(cu, heads, kv_heads, d, 0.2f);
    ASSERT_TRUE(QkvAttentionByHeadsFits(pool, plan)) << heads << " heads";
    for (CpuPath path : SupportedCpuPaths()) {
      ASSERT_TRUE(SetActiveCpuPath(path).ok());
      for (const AttentionVariant& v : AttentionVariants()) {
        if (v.bf16 && !Bf16Supported()) continue;
        const AttentionPlan p = v.Of(plan);
        std::vector<float> qkv, by_heads(m * heads * d, -1.0f);
        const std::vector<float> steps = TwoSteps(pool, x, weights, bias, p, m, qkv);
        QkvAttentionByHeads(pool, x.data(), weights, bias.data(), p, by_heads.data());
        EXPECT_TRUE(SameBits(by_heads, steps))
            << CpuPathName(path) << " heads " << heads << "/" << kv_heads << " " << Describe(v);
      }
    }
    // Where it does not apply.
    AttentionPlan one = plan;  // one sequence: 6 or 4 tasks for 2 threads
    one.num_seqs = 1;
    EXPECT_FALSE(QkvAttentionByHeadsFits(pool, one)) << heads << " heads";
    AttentionPlan odd = plan;
    odd.head_dim = 24;
    EXPECT_FALSE(QkvAttentionByHeadsFits(pool, odd));
    const std::vector<int32_t> long_cu = {0, 30000, 30001, 30002};  // 30000 x 3 x 32 floats
    AttentionPlan too_long = plan;
    too_long.cu_seqlens = long_cu.data();
    EXPECT_FALSE(QkvAttentionByHeadsFits(pool, too_long));
  }
  // Many sequences: the per-sequence form's.
  const std::vector<int32_t> many_cu = {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  const AttentionPlan many = PlanOver(many_cu, 4, 4, d, 0.2f);
  ASSERT_TRUE(QkvAttentionIsFused(pool, many));
  EXPECT_FALSE(QkvAttentionByHeadsFits(pool, many));
}

// Attention's products go to bf16 with int8 or bf16 weights only where bf16 products outrun f32
// ones: AMX-BF16 tiles, or vdpbf16ps on AMD; never on Intel's vdpbf16ps alone (a quarter of the
// f32 FMA's issue rate on the Xeon of docs/benchmarks.md), never with f32 weights, never on the
// avx2 paths.
TEST_F(CpuPathsTest, AttentionTakesBf16ProductsOnlyWhereTheyAreFaster) {
  PathGuard guard;
  const CpuFeatures& host = HostCpuFeatures();
  for (CpuPath path : SupportedCpuPaths()) {
    SCOPED_TRACE(CpuPathName(path));
    ASSERT_TRUE(SetActiveCpuPath(path).ok());
    const bool vdpbf16ps = host.avx512_bf16 && path >= CpuPath::kAvx512;
    const bool tiles = path == CpuPath::kAmx && host.amx_bf16 && Bf16InTiles();
    const bool want = tiles || (vdpbf16ps && host.vendor == "AuthenticAMD");
    EXPECT_EQ(Bf16ProductsFast(), want);
    EXPECT_EQ(ops::Bf16AttentionProducts(Device::kCpu, ops::WeightPrecision::kInt8), want);
    EXPECT_EQ(ops::Bf16AttentionProducts(Device::kCpu, ops::WeightPrecision::kBf16), want);
    EXPECT_FALSE(ops::Bf16AttentionProducts(Device::kCpu, ops::WeightPrecision::kF32));
    EXPECT_FALSE(ops::Bf16AttentionProducts(Device::kCuda, ops::WeightPrecision::kInt8));
    if (host.vendor == "GenuineIntel" && path != CpuPath::kAmx) {
      EXPECT_FALSE(want);
    }
  }
}

}  // namespace
}  // namespace quiver::engine::cpu
