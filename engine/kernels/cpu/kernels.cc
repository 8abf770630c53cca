#include "engine/kernels/cpu/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/kernels/cpu/vec.h"
#include "engine/runtime/thread_pool.h"

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

// How a product is cut into tasks. Rows in blocks of at most 256 (the block's output stays in
// cache for its epilogue); with enough of them (four per thread or more), whole rows per tile, a
// multiple of the thread count. With fewer (short batches, batch-1 latency) the columns are split
// too, in whole panels of at least 64 columns, so that there are about four tiles per thread: a
// thread slowed down by a neighbour on a shared core leaves its remaining tiles to the others.
struct Tiles {
  int64_t row_blocks, rows, col_blocks, cols;
  int64_t count() const { return row_blocks * col_blocks; }
};

Tiles SplitProduct(int64_t m, int64_t n, int threads) {  // m > 0
  constexpr int64_t kMaxRows = 256, kPanel = PackedWeights::kPanel, kMinCols = 4 * kPanel;
  const int64_t want = 4 * static_cast<int64_t>(threads);
  Tiles t{std::max<int64_t>(1, (m + kMaxRows - 1) / kMaxRows), 0, 1, n};
  if (t.row_blocks >= want) {
    t.row_blocks = std::min((t.row_blocks + threads - 1) / threads * threads, m);
  } else {
    const int64_t col_blocks = (want + t.row_blocks - 1) / t.row_blocks;
    const int64_t cols = (n + col_blocks - 1) / col_blocks;
    t.cols = std::max(kMinCols, (cols + kPanel - 1) / kPanel * kPanel);
    t.col_blocks = (n + t.cols - 1) / t.cols;
    if (t.col_blocks == 1) t.cols = n;
  }
  t.rows = (m + t.row_blocks - 1) / t.row_blocks;
  t.row_blocks = (m + t.rows - 1) / t.rows;
  return t;
}

// Runs every tile of y = x · Wᵀ + bias over the pool, and then(r0, rows, c0, cols) right after
// each tile on the thread that computed it.
template <typename Then>
void TiledGemm(ThreadPool& pool, const Tiles& t, const float* x, const PackedWeights& w,
               const float* bias, float* y, int64_t m, Then then) {
  const int64_t n = w.n(), k = w.k();
  pool.ParallelFor(t.count(), [&](int64_t i) {
    const int64_t r0 = (i / t.col_blocks) * t.rows, rows = std::min(t.rows, m - r0);
    const int64_t c0 = (i % t.col_blocks) * t.cols, cols = std::min(t.cols, n - c0);
    PackedGemm(x + r0 * k, k, w, bias, y + r0 * n, n, rows, c0, c0 + cols);
    then(r0, rows, c0, cols);
  });
}

// Splits m rows evenly over the pool's threads for a row-wise pass.
template <typename Fn>
void ForRowShares(ThreadPool& pool, int64_t m, Fn fn) {
  const int64_t per = (m + pool.num_threads() - 1) / pool.num_threads();
  pool.ParallelFor(pool.num_threads(), [&](int64_t i) {
    const int64_t r0 = i * per;
    if (r0 < m) fn(r0, std::min(r0 + per, m));
  });
}

inline void NormalizeRow(float* row, const float* gamma, const float* beta, int64_t n, float eps) {
  const float mean = vec::Sum(row, n) / static_cast<float>(n);
  const float var = vec::SumSquaredDiff(row, mean, n) / static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (int64_t j = 0; j < n; ++j) row[j] = (row[j] - mean) * inv * gamma[j] + beta[j];
}

void Activate(float* row, int64_t n, Activation act) {
  switch (act) {
    case Activation::kNone: break;
    case Activation::kGeluErf: vec::GeluErf(row, n); break;
    case Activation::kGeluTanh: vec::GeluTanh(row, n); break;
  }
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
    for (int64_t r = 0; r < m; ++r) std::copy_n(bias, n, y + r * n);
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), w, static_cast<int>(k), beta, y,
              static_cast<int>(n));
}

void Linear(ThreadPool& pool, const float* x, const PackedWeights& w, const float* bias,
            float* y, int64_t m, Activation act) {
  if (m == 0) return;
  const int64_t n = w.n();
  TiledGemm(pool, SplitProduct(m, n, pool.num_threads()), x, w, bias, y, m,
            [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
              if (act == Activation::kNone) return;
              for (int64_t r = r0; r < r0 + rows; ++r) Activate(y + r * n + c0, cols, act);
            });
}

void LinearAddLayerNorm(ThreadPool& pool, const float* x, const PackedWeights& w,
                        const float* bias, float* io, const float* gamma, const float* beta,
                        float* scratch, int64_t m, float eps) {
  if (m == 0) return;
  const int64_t n = w.n();
  auto add_norm = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = io + r * n;
      const float* add = scratch + r * n;
      for (int64_t j = 0; j < n; ++j) row[j] += add[j];
      NormalizeRow(row, gamma, beta, n, eps);
    }
  };
  const Tiles t = SplitProduct(m, n, pool.num_threads());
  if (t.col_blocks == 1) {  // whole rows per tile: residual and LayerNorm while they are in cache
    TiledGemm(pool, t, x, w, bias, scratch, m,
              [&](int64_t r0, int64_t rows, int64_t, int64_t) { add_norm(r0, r0 + rows); });
    return;
  }
  TiledGemm(pool, t, x, w, bias, scratch, m, [](int64_t, int64_t, int64_t, int64_t) {});
  ForRowShares(pool, m, add_norm);
}

void EmbedLayerNorm(ThreadPool& pool, const int32_t* ids, const int32_t* positions,
                    const int32_t* type_ids, const float* word, const float* position,
                    const float* type, const float* gamma, const float* beta, float* x,
                    int64_t m, int64_t n, float eps) {
  ForRowShares(pool, m, [&](int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t) {
      float* row = x + t * n;
      const float* wv = word + static_cast<int64_t>(ids[t]) * n;
      const float* pv = position + static_cast<int64_t>(positions[t]) * n;
      if (type != nullptr) {
        const float* tv = type + static_cast<int64_t>(type_ids ? type_ids[t] : 0) * n;
        for (int64_t j = 0; j < n; ++j) row[j] = wv[j] + pv[j] + tv[j];
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] = wv[j] + pv[j];
      }
      NormalizeRow(row, gamma, beta, n, eps);
    }
  });
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


void SiluMul(const float* gate_up, float* out, int64_t rows, int64_t inter) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    for (int64_t j = 0; j < inter; ++j) o[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
  }
}

void Tanh(float* x, int64_t n) { vec::Tanh(x, n); }

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
