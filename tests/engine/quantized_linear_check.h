// Shared by the int8 and bf16 GEMM tests: a layer prepared at `precision` runs ops::Linear (every
// epilogue) and ops::LinearAddLayerNorm on the CPU within `tolerance` x the f32 layer's scale of
// the same layer in f32 (and not bit-equal to it), and is refused on CUDA naming the CPU.
#pragma once

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

namespace quiver::engine::testing {

inline std::vector<float> RandomValues(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline void ExpectLayerNearF32(ops::WeightPrecision precision, double tolerance, int64_t m,
                               int64_t n, int64_t k) {
  const std::vector<float> x = RandomValues(m * k, 11), w = RandomValues(n * k, 12, 0.3f),
                           bias = RandomValues(n, 13), residual = RandomValues(m * n, 14);
  ThreadPool pool(2);
  const ExecContext ctx{Device::kCpu, &pool};
  auto host = [](const std::vector<float>& v, std::initializer_list<int64_t> shape) {
    return Tensor(v.data(), DType::kF32, Device::kCpu, shape);
  };
  auto out = [](std::vector<float>& v, std::initializer_list<int64_t> shape) {
    return Tensor(v.data(), DType::kF32, Device::kCpu, shape);
  };
  const ops::LinearWeights f32 = ops::PrepareLinear(Device::kCpu, host(w, {n, k}), host(bias, {n}));
  const ops::LinearWeights low =
      ops::PrepareLinear(Device::kCpu, host(w, {n, k}), host(bias, {n}), precision);
  EXPECT_EQ(low.precision, precision);
  auto close = [&](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
    double scale = 0, worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, std::abs(double(b[i])));
      worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    }
    EXPECT_LE(worst, tolerance * scale) << what;
    EXPECT_GT(worst, 0.0) << what << ": bit-equal to f32";
  };
  for (Epilogue e :
       {Epilogue::kNone, Epilogue::kGeluErf, Epilogue::kGeluTanh, Epilogue::kResidual}) {
    std::vector<float> a(m * n), b(m * n);
    const Tensor r = e == Epilogue::kResidual ? host(residual, {m, n}) : Tensor();
    ops::Linear(ctx, host(x, {m, k}), low, out(a, {m, n}), e, r);
    ops::Linear(ctx, host(x, {m, k}), f32, out(b, {m, n}), e, r);
    close(a, b, "Linear");
  }
  const std::vector<float> gamma = RandomValues(n, 15), beta = RandomValues(n, 16);
  std::vector<float> io_a = residual, io_b = residual, scratch(m * n);
  for (auto [weights, io] : {std::pair{&low, &io_a}, std::pair{&f32, &io_b}}) {
    ops::LinearAddLayerNorm(ctx, host(x, {m, k}), *weights, out(*io, {m, n}), host(gamma, {n}),
                            host(beta, {n}), 1e-12f, out(scratch, {m, n}));
  }
  close(io_a, io_b, "LinearAddLayerNorm");
  try {
    ops::PrepareLinear(Device::kCuda, host(w, {n, k}), Tensor(), precision);
    ADD_FAILURE() << "CPU-only weights prepared for CUDA";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CPU only"), std::string::npos) << e.what();
  }
}

}  // namespace quiver::engine::testing
