#include "engine/kernels/cpu/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace quiver::engine::cpu {

namespace {

// OpenBLAS switches to a different kernel for small products (M·N·K ≤ 100³ in its small-matrix
// path, which this Debian build enables), and that kernel sums in a different order. A row's
// result would then depend on how many other rows share its batch. Padding M past that size
// makes every row's result independent of the batch around it, so a sequence embeds bit for bit
// the same alone and in any batch (tests/engine/invariance_test.cc, the worker's byte-for-byte
// test). Costs a few padded rows only when a batch is tiny.
constexpr double kSmallProduct = 100.0 * 100.0 * 100.0;

int64_t MinRows(int64_t n, int64_t k) {
  return std::max<int64_t>(4, static_cast<int64_t>(kSmallProduct / (double(n) * double(k))) + 1);
}

}  // namespace

void Linear(const float* x, const float* w, const float* bias, float* y, int64_t m, int64_t n,
            int64_t k) {
  if (m == 0) return;
  const int64_t min_rows = MinRows(n, k);
  if (m < min_rows) {
    thread_local std::vector<float> x_pad, y_pad;
    x_pad.assign(static_cast<size_t>(min_rows * k), 0.0f);
    std::copy(x, x + m * k, x_pad.begin());
    y_pad.resize(static_cast<size_t>(min_rows * n));
    Linear(x_pad.data(), w, bias, y_pad.data(), min_rows, n, k);
    std::copy(y_pad.begin(), y_pad.begin() + m * n, y);
    return;
  }
  float beta = 0.0f;
  if (bias != nullptr) {
    for (int64_t r = 0; r < m; ++r) {
      float* row = y + r * n;
      for (int64_t j = 0; j < n; ++j) row[j] = bias[j];
    }
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), w, static_cast<int>(k), beta, y,
              static_cast<int>(n));
}

namespace {

inline void NormalizeRow(float* row, const float* gamma, const float* beta, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += row[j];
  const float mean = static_cast<float>(sum / n);
  double var = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const float d = row[j] - mean;
    var += static_cast<double>(d) * d;
  }
  const float inv = 1.0f / std::sqrt(static_cast<float>(var / n) + eps);
  for (int64_t j = 0; j < n; ++j) row[j] = (row[j] - mean) * inv * gamma[j] + beta[j];
}

}  // namespace

void LayerNorm(float* x, const float* gamma, const float* beta, int64_t rows, int64_t n,
               float eps) {
  for (int64_t r = 0; r < rows; ++r) NormalizeRow(x + r * n, gamma, beta, n, eps);
}

void AddLayerNorm(float* x, const float* residual, const float* gamma, const float* beta,
                  int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * n;
    const float* res = residual + r * n;
    for (int64_t j = 0; j < n; ++j) row[j] += res[j];
    NormalizeRow(row, gamma, beta, n, eps);
  }
}

void RmsNorm(const float* x, const float* gamma, float* out, int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    float* o = out + r * n;
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(in[j]) * in[j];
    const float inv = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
    for (int64_t j = 0; j < n; ++j) o[j] = in[j] * inv * gamma[j];
  }
}

void GeluErf(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

void GeluTanh(float* x, int64_t n) {
  constexpr float kAlpha = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kAlpha * (v + 0.044715f * v * v * v)));
  }
}

void SiluMul(const float* gate_up, float* out, int64_t rows, int64_t inter) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    for (int64_t j = 0; j < inter; ++j) o[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
  }
}

void Tanh(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
}

void Add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void Rotary(float* x, const int32_t* positions, int64_t num_tokens, int64_t heads,
            int64_t head_dim, int64_t stride, double theta) {
  const int64_t half = head_dim / 2;
  // inv_freq as transformers computes it: 1 / theta^(2i / d), in float32.
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = 1.0f / static_cast<float>(std::pow(theta, static_cast<double>(2 * i) / head_dim));
  }
  std::vector<float> cos_v(static_cast<size_t>(half)), sin_v(static_cast<size_t>(half));
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      cos_v[i] = std::cos(angle);
      sin_v[i] = std::sin(angle);
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + t * stride + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cos_v[i] - b * sin_v[i];
        v[i + half] = b * cos_v[i] + a * sin_v[i];
      }
    }
  }
}

}  // namespace quiver::engine::cpu
