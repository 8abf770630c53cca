// The int8 GEMM (gemm_int8.h) against its definition computed here independently: weights
// quantized per output channel (symmetric, round to nearest even, [-127, 127]) and activations
// per row (asymmetric, 256 levels over the row's range and 0), products summed exactly, scaled
// and biased in double; at shapes that cross its
// panel (16 columns), row (6) blocks and odd depths. Then how far it lands from the f32 product
// (the quantization error, bounded), and the batch-invariance property: a row's result does not
// depend on the rows around it or on how the columns were cut.
#include "engine/kernels/cpu/gemm_int8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/thread_pool.h"
#include "engine/ops/linear.h"
#include "tests/engine/quantized_linear_check.h"

namespace quiver::engine::cpu {
namespace {

using testing::RandomValues;  // tests/engine/quantized_linear_check.h

// Symmetric per-row quantization of v [rows, k] to [-levels, levels]: values and scales.
void Quantize(const std::vector<float>& v, int64_t rows, int64_t k, int levels, std::vector<int>& q,
              std::vector<double>& scale) {
  q.assign(v.size(), 0);
  scale.assign(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::abs(v[r * k + i]));
    scale[r] = amax / float(levels);
    const float inv = amax > 0 ? float(levels) / amax : 0.0f;
    for (int64_t i = 0; i < k; ++i) {
      q[r * k + i] = static_cast<int>(std::nearbyint(v[r * k + i] * inv));
      ASSERT_LE(std::abs(q[r * k + i]), levels);
    }
  }
}

// Asymmetric per-row quantization of v [rows, k] on 256 levels over [min(0, v), max(0, v)]:
// values p (x = scale · p, p in [-zero, 255 - zero]) and scales.
void QuantizeAsymmetric(const std::vector<float>& v, int64_t rows, int64_t k, std::vector<int>& q,
                        std::vector<double>& scale) {
  q.assign(v.size(), 0);
  scale.assign(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const auto first = v.begin() + r * k, last = first + k;
    const float lo = std::min(0.0f, *std::min_element(first, last));
    const float hi = std::max(0.0f, *std::max_element(first, last));
    if (hi - lo == 0.0f) continue;
    scale[r] = (hi - lo) / 255.0f;
    const float inv = 255.0f / (hi - lo);
    const int zero = static_cast<int>(std::nearbyint(-lo * inv));
    ASSERT_GE(zero, 0);
    ASSERT_LE(zero, 255);
    for (int64_t i = 0; i < k; ++i) {
      const int p = static_cast<int>(std::nearbyint(v[r * k + i] * inv));
      ASSERT_GE(p, -zero - 1);  // rounding may cross the range by one step at most
      ASSERT_LE(p, 256 - zero);
      q[r * k + i] = std::clamp(p, -zero, 255 - zero);
    }
  }
}

struct QuantizedRows {
  std::vector<int16_t> q;
  std::vector<float> scale;
};

QuantizedRows QuantizeAll(const std::vector<float>& x, int64_t m, int64_t k) {
  QuantizedRows run;
  run.q.assign(static_cast<size_t>(m * ((k + 1) / 2 * 2)), 7);
  run.scale.assign(static_cast<size_t>(m), -1.0f);
  QuantizeRows(x.data(), k, k, 0, m, run.q.data(), run.scale.data());
  return run;
}

TEST(QuantizedGemmTest, MatchesItsDefinition) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 16, 8},
                         {7, 33, 301},
                         {13, 384, 384},
                         {6, 5, 257},
                         {20, 48, 1536}}) {
    std::vector<float> x = RandomValues(m * k, 1, 3.0f);
    const std::vector<float> w = RandomValues(n * k, 2, 0.2f), bias = RandomValues(n, 3);
    // Rows of every sign: all positive (zero point 0), all negative (255), mixed.
    for (int64_t i = 0; i < k && m > 2; ++i) {
      x[i] = std::abs(x[i]);
      x[k + i] = -std::abs(x[k + i]);
    }
    const QuantizedWeights packed(w.data(), n, k);
    const QuantizedRows run = QuantizeAll(x, m, k);
    std::vector<float> y(m * n, 99.0f);
    QuantizedGemm(run.q.data(), run.scale.data(), packed, bias.data(), y.data(), n, m, 0, n);
    std::vector<int> qx, qw;
    std::vector<double> sx, sw;
    QuantizeAsymmetric(x, m, k, qx, sx);
    Quantize(w, n, k, 127, qw, sw);
    for (int64_t c = 0; c < n; ++c) {
      ASSERT_FLOAT_EQ(packed.scales()[c], float(sw[c]));
      int sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += qw[c * k + i];
      ASSERT_EQ(packed.column_sums()[c], sum);
    }
    for (size_t i = 0; i < qx.size(); ++i) {
      ASSERT_EQ(run.q[i / k * ((k + 1) / 2 * 2) + i % k], qx[i]) << i;
    }
    double worst_f32 = 0, scale_f32 = 0;
    for (int64_t r = 0; r < m; ++r) {
      ASSERT_FLOAT_EQ(run.scale[r], float(sx[r]));
      for (int64_t c = 0; c < n; ++c) {
        int64_t dot = 0;
        for (int64_t i = 0; i < k; ++i) dot += int64_t{qx[r * k + i]} * qw[c * k + i];
        const double want = double(float(sx[r]) * float(sw[c])) * double(dot) + bias[c];
        ASSERT_NEAR(y[r * n + c], want, 1e-6 * (std::abs(want) + 1)) << m << "x" << n << "x" << k;
        double exact = bias[c];
        for (int64_t i = 0; i < k; ++i) exact += double(x[r * k + i]) * w[c * k + i];
        worst_f32 = std::max(worst_f32, std::abs(y[r * n + c] - exact));
        scale_f32 = std::max(scale_f32, std::abs(exact));
      }
    }
    // The quantization error itself (8-bit weights and activations): 2% of the product's scale.
    EXPECT_LE(worst_f32, 0.02 * scale_f32) << m << "x" << n << "x" << k;
  }
}

TEST(QuantizedGemmTest, RowsAndColumnRangesDoNotChangeAnyBit) {
  const int64_t m = 19, n = 80, k = 131;
  const std::vector<float> x = RandomValues(m * k, 4), w = RandomValues(n * k, 5),
                           bias = RandomValues(n, 6);
  const QuantizedWeights packed(w.data(), n, k);
  const QuantizedRows all = QuantizeAll(x, m, k);
  std::vector<float> whole(m * n);
  QuantizedGemm(all.q.data(), all.scale.data(), packed, bias.data(), whole.data(), n, m, 0, n);
  for (int64_t r = 0; r < m; ++r) {
    // The row alone, quantized alone, in two column ranges.
    const std::vector<float> row(x.begin() + r * k, x.begin() + (r + 1) * k);
    const QuantizedRows one = QuantizeAll(row, 1, k);
    std::vector<float> y(n);
    QuantizedGemm(one.q.data(), one.scale.data(), packed, bias.data(), y.data(), n, 1, 0, 32);
    QuantizedGemm(one.q.data(), one.scale.data(), packed, bias.data(), y.data(), n, 1, 32, n);
    for (int64_t c = 0; c < n; ++c) ASSERT_EQ(y[c], whole[r * n + c]) << r << "," << c;
  }
}

TEST(QuantizedGemmTest, ZeroRowsAndNoBias) {
  const int64_t m = 3, n = 17, k = 10;
  std::vector<float> x = RandomValues(m * k, 7);
  std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);  // row 1 all zero
  const std::vector<float> w = RandomValues(n * k, 8);
  const QuantizedWeights packed(w.data(), n, k);
  const QuantizedRows run = QuantizeAll(x, m, k);
  EXPECT_EQ(run.scale[1], 0.0f);
  std::vector<float> y(m * n, 5.0f);
  QuantizedGemm(run.q.data(), run.scale.data(), packed, nullptr, y.data(), n, m, 0, n);
  for (int64_t c = 0; c < n; ++c) EXPECT_EQ(y[n + c], 0.0f);
  for (int64_t c = 0; c < n; ++c) EXPECT_NE(y[c], 5.0f);
}

}  // namespace
}  // namespace quiver::engine::cpu

namespace quiver::engine {
namespace {

// Through the ops layer: a layer prepared in int8 runs Linear (every epilogue) and
// LinearAddLayerNorm on the CPU within the quantization error of the same layer in f32 (2%), and
// is refused on another device.
TEST(Int8LinearOpTest, EveryEpilogueStaysNearF32AndOtherDevicesAreRefused) {
  testing::ExpectLayerNearF32(ops::WeightPrecision::kInt8, 0.02, 9, 40, 72);
}

// A layer deeper than the int32 sums allow (255 · 127 · k < 2^31) is refused at load, naming
// the limit; one at the limit is prepared.
TEST(Int8LinearOpTest, LayersDeeperThanTheSumsAllowAreRefused) {
  const int64_t limit = cpu::QuantizedWeights::kMaxDepth;
  ASSERT_LT(255 * 127 * limit, (int64_t{1} << 31));
  for (int64_t k : {limit, limit + 1}) {
    std::vector<float> w(static_cast<size_t>(k), 0.5f);
    const Tensor weight(w.data(), DType::kF32, Device::kCpu, {1, k});
    if (k == limit) {
      EXPECT_EQ(
          ops::PrepareLinear(Device::kCpu, weight, Tensor(), ops::WeightPrecision::kInt8).precision,
          ops::WeightPrecision::kInt8);
      continue;
    }
    try {
      ops::PrepareLinear(Device::kCpu, weight, Tensor(), ops::WeightPrecision::kInt8);
      ADD_FAILURE() << "an int8 layer of depth " << k << " was prepared";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("at most 65536 input features"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace quiver::engine
