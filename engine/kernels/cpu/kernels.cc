#include "engine/kernels/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/base/half.h"
#include "engine/base/thread_pool.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/attention_common.h"
#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/isa_paths.h"
#include "engine/kernels/cpu/vec.h"

namespace quiver::engine::cpu {

namespace {

// vec::GeluErf, on 16 lanes where the path has them (the same bits).
void GeluErfRow(float* x, int64_t n) {
  if (ActiveCpuPath() >= CpuPath::kAvx512) {
    GeluErfAvx512(x, n);
  } else {
    vec::GeluErf(x, n);
  }
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
  // Row blocks start on multiples of 16: the amx path's tiles read 16 rows at a time, and so
  // never read rows that another block is quantizing (only past m, into padding).
  if (t.row_blocks > 1) t.rows = (t.rows + 15) / 16 * 16;
  t.row_blocks = (m + t.rows - 1) / t.rows;
  return t;
}

// A row-wise pass over at most this many values (rows x width) runs on the calling thread: a
// hand-over to the pool and back costs a few microseconds, more than half of such a pass saves.
// A query of up to 10 tokens makes 13 of them per forward pass of all-MiniLM-L6-v2 in f32 (the
// embedding's and each layer's two LayerNorms) and 31 in int8 (also the quantization of three of
// each layer's four products' inputs). Measured on the Xeon of docs/benchmarks.md, batch-1
// queries in one process switching between the two rules round by round (30 rounds): int8 0.938x
// the time, f32 0.955x and 0.988x (two runs); at 16 and 32 tokens, where nothing changes, 0.990x
// to 1.014x (the method's noise). 8,192 values made f32 at 16 and 32 tokens 1.02x slower.
constexpr int64_t kInlineRowPassValues = 4096;

// Splits m rows of `width` values evenly over the pool's threads for a row-wise pass; a pass
// over few values runs on the calling thread instead (kInlineRowPassValues).
template <typename Fn>
void ForRowShares(ThreadPool& pool, int64_t m, int64_t width, Fn fn) {
  if (m * width <= kInlineRowPassValues) {
    if (m > 0) fn(0, m);
    return;
  }
  const int64_t per = (m + pool.num_threads() - 1) / pool.num_threads();
  pool.ParallelFor(pool.num_threads(), [&](int64_t i) {
    const int64_t r0 = i * per;
    if (r0 < m) fn(r0, std::min(r0 + per, m));
  });
}

// x · Wᵀ + bias for one tile of rows [r0, r0 + rows) and columns [c0, c1) of y (row stride n),
// with f32 weights, or int8 ones over x quantized beforehand (Quantized()).
struct F32Product {
  // Whole tiles: the f32 kernel keeps a weight panel in L1 for all of a tile's rows.
  static constexpr int64_t kStepRows = 0;
  const float* x;
  const PackedWeights& w;
  int64_t n() const { return w.n(); }
  void operator()(const float* bias, float* y, int64_t r0, int64_t rows, int64_t c0,
                  int64_t c1) const {
    PackedGemm(x + r0 * w.k(), w.k(), w, bias, y + r0 * n(), n(), rows, c0, c1);
  }
};

// x's rows quantized for w (gemm_int8.h) and multiplied: with u / zero set, as bytes for
// vpdpbusd or the amx path's tiles (QuantizeRowsU8, QuantizedGemmU8); else as int16 in q
// (QuantizeRows). With in_tiles, each tile quantizes
// its own rows just before its product (a tile then holds whole rows, one column block: no two
// tiles share a row), while they are in cache; else Quantized() did all rows.
struct Int8Product {
  // 64 rows at a time: an FFN's 64 x 1536 f32 output (384 KB) is still in L2 for its GELU, its
  // residual or its LayerNorm (at 256 rows, perf showed the GELU waiting on its loads on the
  // Xeon of docs/benchmarks.md); the int8 kernels gain nothing from longer steps. A multiple of
  // 16, as the amx path's tiles read.
  static constexpr int64_t kStepRows = 64;
  const float* x;
  int16_t* q;
  uint8_t* u;
  int32_t* zero;
  float* scale;
  const QuantizedWeights& w;
  bool in_tiles;
  int64_t n() const { return w.n(); }
  void Quantize(int64_t r0, int64_t r1) const {
    if (u != nullptr) {
      QuantizeRowsU8(x, w.k(), w.k(), w.quad_depth(), r0, r1, u, zero, scale);
    } else {
      QuantizeRows(x, w.k(), w.k(), r0, r1, q, scale);
    }
  }
  void operator()(const float* bias, float* y, int64_t r0, int64_t rows, int64_t c0,
                  int64_t c1) const {
    if (in_tiles) Quantize(r0, r0 + rows);
    const int64_t depth = w.quad_depth();
    if (u != nullptr) {
      QuantizedGemmU8(u + r0 * depth, zero + r0, scale + r0, w, bias, y + r0 * n(), n(), rows, c0,
                      c1);
    } else {
      QuantizedGemm(q + r0 * 2 * w.k_pairs(), scale + r0, w, bias, y + r0 * n(), n(), rows, c0, c1);
    }
  }
};

// x's rows rounded to bf16 for w (gemm_bf16.h) and multiplied, 64 rows at a time (as
// Int8Product, so that an epilogue reads its rows from L2). With in_tiles each tile converts its
// own rows (a tile then holds whole rows); else Bf16Converted() did all rows first.
struct Bf16Product {
  static constexpr int64_t kStepRows = 64;
  const float* x;
  uint16_t* a;
  const Bf16Weights& w;
  bool in_tiles;
  int64_t n() const { return w.n(); }
  void Convert(int64_t r0, int64_t r1) const { Bf16Rows(x, w.k(), w.k(), r0, r1, a); }
  void operator()(const float* bias, float* y, int64_t r0, int64_t rows, int64_t c0,
                  int64_t c1) const {
    if (in_tiles) Convert(r0, r0 + rows);
    Bf16Gemm(a + r0 * 2 * w.k_pairs(), w, bias, y + r0 * n(), n(), rows, c0, c1);
  }
};

// The bf16 rows in buffers of the calling thread (as Quantized() below does for int8).
Bf16Product Bf16Converted(ThreadPool& pool, const float* x, const Bf16Weights& w, int64_t m,
                          const Tiles& t) {
  thread_local std::vector<uint16_t> buffer;
  buffer.resize(static_cast<size_t>(m * 2 * w.k_pairs()));
  const Bf16Product product{x, buffer.data(), w, /*in_tiles=*/t.col_blocks == 1};
  if (!product.in_tiles) {
    ForRowShares(pool, m, w.k(), [&](int64_t r0, int64_t r1) { product.Convert(r0, r1); });
  }
  return product;
}

// Buffers for an Int8Product's quantized rows: q for int16 rows, u / zero for byte rows, hi /
// lo for the amx path's split ones (the tiles read 16 rows at a time from a tile's first row,
// which need not be a multiple of 16: 15 rows past the last must be readable), and the rows'
// scales.
struct Int8Rows {
  std::vector<int16_t> q;
  std::vector<uint8_t> u;
  std::vector<int32_t> zero;
  std::vector<float> scale;

  // A product of x's `rows` rows and w over these buffers (grown as needed).
  Int8Product Bind(const float* x, const QuantizedWeights& w, int64_t rows, bool in_tiles) {
    scale.resize(static_cast<size_t>(rows));
    Int8Product product{x, nullptr, nullptr, nullptr, scale.data(), w, in_tiles};
    if (Int8BytesActive() && w.quad_panel(0) != nullptr) {
      // 15 rows more: the amx path's tiles read 16 rows at a time.
      const size_t size = static_cast<size_t>((rows + 15) * w.quad_depth());
      if (u.size() < size) u.resize(size);
      zero.resize(static_cast<size_t>(rows));
      product.u = u.data();
      product.zero = zero.data();
    } else {
      q.resize(static_cast<size_t>(rows * 2 * w.k_pairs()));
      product.q = q.data();
    }
    return product;
  }
};

// The product of x and w, in buffers of the calling thread (reused by its next call; the pool's
// threads only use them while this thread waits; the product holds the pointers, not the
// thread_local names, which inside the pool's threads are theirs), for the tiles t: its rows
// quantized here over the pool unless each tile can quantize its own.
Int8Product Quantized(ThreadPool& pool, const float* x, const QuantizedWeights& w, int64_t m,
                      const Tiles& t) {
  thread_local Int8Rows buffers;
  const Int8Product product = buffers.Bind(x, w, m, /*in_tiles=*/t.col_blocks == 1);
  if (!product.in_tiles) {
    ForRowShares(pool, m, w.k(), [&](int64_t r0, int64_t r1) { product.Quantize(r0, r1); });
  }
  return product;
}

// Runs every tile of y = x · Wᵀ + bias over the pool, and then(r0, rows, c0, cols) right after
// each tile on the thread that computed it; a product with kStepRows > 0 runs a tile in steps of
// that many rows, each followed by its then(), so that what then() reads is still in cache.
template <typename Product, typename Then>
void TiledGemm(ThreadPool& pool, const Tiles& t, const Product& product, const float* bias,
               float* y, int64_t m, Then then) {
  const int64_t n = product.n();
  pool.ParallelFor(t.count(), [&](int64_t i) {
    const int64_t r0 = (i / t.col_blocks) * t.rows, rows = std::min(t.rows, m - r0);
    const int64_t c0 = (i % t.col_blocks) * t.cols, cols = std::min(t.cols, n - c0);
    const int64_t step = Product::kStepRows > 0 ? Product::kStepRows : rows;
    for (int64_t r = r0; r < r0 + rows; r += step) {
      const int64_t count = std::min(step, r0 + rows - r);
      product(bias, y, r, count, c0, c0 + cols);
      then(r, count, c0, cols);
    }
  });
}

inline void NormalizeRow(float* row, const float* gamma, const float* beta, int64_t n, float eps) {
  const float mean = vec::Sum(row, n) / static_cast<float>(n);
  const float var = vec::SumSquaredDiff(row, mean, n) / static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (int64_t j = 0; j < n; ++j) row[j] = (row[j] - mean) * inv * gamma[j] + beta[j];
}

// io[r] = LayerNorm(io[r] + add[r]) for rows [r0, r1) of n values (row stride n).
void AddNormRows(float* io, const float* add, const float* gamma, const float* beta, int64_t n,
                 float eps, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    float* row = io + r * n;
    const float* a = add + r * n;
    // io's row after next into L1 meanwhile: a block's rows of the batch are often first read
    // here, from L3 (perf: 5% of an int8 batch of 100 x 128 tokens on the Xeon of
    // docs/benchmarks.md waited on them).
    if (r + 2 < r1) {
      for (int64_t j = 0; j < n; j += 16) __builtin_prefetch(row + 2 * n + j, 1, 3);
    }
    for (int64_t j = 0; j < n; ++j) row[j] += a[j];
    NormalizeRow(row, gamma, beta, n, eps);
  }
}

// The epilogue of one tile of y (rows [r0, r0 + rows), columns [c0, c0 + cols), row stride n).
void ApplyEpilogue(float* y, const float* residual, int64_t n, int64_t r0, int64_t rows, int64_t c0,
                   int64_t cols, Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::kNone:
      return;
    case Epilogue::kGeluErf:
      for (int64_t r = r0; r < r0 + rows; ++r) GeluErfRow(y + r * n + c0, cols);
      return;
    case Epilogue::kGeluTanh:
      for (int64_t r = r0; r < r0 + rows; ++r) vec::GeluTanh(y + r * n + c0, cols);
      return;
    case Epilogue::kResidual:
      for (int64_t r = r0; r < r0 + rows; ++r) {
        float* dst = y + r * n + c0;
        const float* add = residual + r * n + c0;
        for (int64_t j = 0; j < cols; ++j) dst[j] += add[j];
      }
      return;
  }
}

template <typename Product>
void RunLinear(ThreadPool& pool, const Tiles& t, const Product& product, const float* bias,
               float* y, int64_t m, Epilogue epilogue, const float* residual) {
  const int64_t n = product.n();
  TiledGemm(pool, t, product, bias, y, m, [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    ApplyEpilogue(y, residual, n, r0, rows, c0, cols, epilogue);
  });
}

template <typename Product>
void RunLinearAddLayerNorm(ThreadPool& pool, const Tiles& t, const Product& product,
                           const float* bias, float* io, const float* gamma, const float* beta,
                           float* scratch, int64_t m, float eps) {
  const int64_t n = product.n();
  auto add_norm = [&](int64_t r0, int64_t r1) {
    AddNormRows(io, scratch, gamma, beta, n, eps, r0, r1);
  };
  if (t.col_blocks == 1) {  // whole rows per tile: residual and LayerNorm while they are in cache
    TiledGemm(pool, t, product, bias, scratch, m,
              [&](int64_t r0, int64_t rows, int64_t, int64_t) { add_norm(r0, r0 + rows); });
    return;
  }
  TiledGemm(pool, t, product, bias, scratch, m, [](int64_t, int64_t, int64_t, int64_t) {});
  ForRowShares(pool, m, n, add_norm);
}

}  // namespace

void Linear(ThreadPool& pool, const float* x, const PackedWeights& w, const float* bias, float* y,
            int64_t m, Epilogue epilogue, const float* residual) {
  if (m == 0) return;
  RunLinear(pool, SplitProduct(m, w.n(), pool.num_threads()), F32Product{x, w}, bias, y, m,
            epilogue, residual);
}

void Linear(ThreadPool& pool, const float* x, const QuantizedWeights& w, const float* bias,
            float* y, int64_t m, Epilogue epilogue, const float* residual) {
  if (m == 0) return;
  const Tiles t = SplitProduct(m, w.n(), pool.num_threads());
  RunLinear(pool, t, Quantized(pool, x, w, m, t), bias, y, m, epilogue, residual);
}

void LinearAddLayerNorm(ThreadPool& pool, const float* x, const PackedWeights& w, const float* bias,
                        float* io, const float* gamma, const float* beta, float* scratch, int64_t m,
                        float eps) {
  if (m == 0) return;
  RunLinearAddLayerNorm(pool, SplitProduct(m, w.n(), pool.num_threads()), F32Product{x, w}, bias,
                        io, gamma, beta, scratch, m, eps);
}

void LinearAddLayerNorm(ThreadPool& pool, const float* x, const QuantizedWeights& w,
                        const float* bias, float* io, const float* gamma, const float* beta,
                        float* scratch, int64_t m, float eps) {
  if (m == 0) return;
  const Tiles t = SplitProduct(m, w.n(), pool.num_threads());
  RunLinearAddLayerNorm(pool, t, Quantized(pool, x, w, m, t), bias, io, gamma, beta, scratch, m,
                        eps);
}

void Linear(ThreadPool& pool, const float* x, const Bf16Weights& w, const float* bias, float* y,
            int64_t m, Epilogue epilogue, const float* residual) {
  if (m == 0) return;
  const Tiles t = SplitProduct(m, w.n(), pool.num_threads());
  RunLinear(pool, t, Bf16Converted(pool, x, w, m, t), bias, y, m, epilogue, residual);
}

void LinearAddLayerNorm(ThreadPool& pool, const float* x, const Bf16Weights& w, const float* bias,
                        float* io, const float* gamma, const float* beta, float* scratch, int64_t m,
                        float eps) {
  if (m == 0) return;
  const Tiles t = SplitProduct(m, w.n(), pool.num_threads());
  RunLinearAddLayerNorm(pool, t, Bf16Converted(pool, x, w, m, t), bias, io, gamma, beta, scratch, m,
                        eps);
}

namespace {

// y [rows, w.n()] = epilogue(x [rows, w.k()] · Wᵀ + bias) on the calling thread, in steps of
// Int8Product::kStepRows rows, quantized in buffers of this thread.
void QuantizedRows(const float* x, const QuantizedWeights& w, const float* bias, float* y,
                   int64_t rows, Epilogue epilogue) {
  thread_local Int8Rows buffers;
  const Int8Product product = buffers.Bind(x, w, rows, /*in_tiles=*/true);
  const int64_t n = w.n();
  for (int64_t r = 0; r < rows; r += Int8Product::kStepRows) {
    const int64_t count = std::min(Int8Product::kStepRows, rows - r);
    product(bias, y, r, count, 0, n);
    ApplyEpilogue(y, nullptr, n, r, count, 0, n, epilogue);
  }
}

}  // namespace

bool FeedForwardIsFused(const ThreadPool& pool, int64_t m) {
  // A block per thread or more (fewer rows: the unfused layers, which split columns too). With
  // one or two blocks per thread a thread slowed by a neighbour leaves the others waiting, but
  // the unfused layers cost more than that: each layer's rows pass between the cores' caches
  // (a tile's columns for the residual and LayerNorm, which read whole rows), and each column
  // tile packs or strides over all the rows. Measured at 128 tokens, batch 1, 2 threads, fused
  // against unfused in one process: f32 -2.3%, int8 -9%, bf16 -12% (docs/benchmarks.md).
  return m >= kFeedForwardRows * pool.num_threads();
}

namespace {

// y [rows, w.n()] = epilogue(x [rows, w.k()] · Wᵀ + bias) on the calling thread, for each form of
// weights (the same bits as Linear gives these rows).
void RowsProduct(const float* x, const QuantizedWeights& w, const float* bias, float* y,
                 int64_t rows, Epilogue epilogue) {
  QuantizedRows(x, w, bias, y, rows, epilogue);
}
void RowsProduct(const float* x, const PackedWeights& w, const float* bias, float* y, int64_t rows,
                 Epilogue epilogue) {
  PackedGemm(x, w.k(), w, bias, y, w.n(), rows, 0, w.n());
  ApplyEpilogue(y, nullptr, w.n(), 0, rows, 0, w.n(), epilogue);
}
void RowsProduct(const float* x, const Bf16Weights& w, const float* bias, float* y, int64_t rows,
                 Epilogue epilogue) {
  thread_local std::vector<uint16_t> a;
  a.resize(static_cast<size_t>(rows * 2 * w.k_pairs()));
  Bf16Rows(x, w.k(), w.k(), 0, rows, a.data());
  Bf16Gemm(a.data(), w, bias, y, w.n(), rows, 0, w.n());
  ApplyEpilogue(y, nullptr, w.n(), 0, rows, 0, w.n(), epilogue);
}

// in [rows, up.n()] = epilogue(x · Upᵀ + up_bias), then out [rows, down.n()] = in · Downᵀ +
// down_bias, on the calling thread (int8 weights: each in steps of 64 rows, QuantizedRows).
template <typename Weights>
void FeedForwardRows(const float* x, const Weights& up, const float* up_bias, Epilogue epilogue,
                     const Weights& down, const float* down_bias, float* in, float* out,
                     int64_t rows) {
  RowsProduct(x, up, up_bias, in, rows, epilogue);
  RowsProduct(in, down, down_bias, out, rows, Epilogue::kNone);
}

// f32: the intermediate made and consumed kFeedForwardSlice columns at a time, each slice's
// down products added onto the last slice's sums (PackedGemmSlice: the same bits as the whole
// depth at once), so that a block of many rows keeps its slice of the intermediate in L2 where
// its whole [rows, 1536] one would not fit; many rows per block then read each weight once per
// block instead of once per 64 rows.
void FeedForwardRows(const float* x, const PackedWeights& up, const float* up_bias,
                     Epilogue epilogue, const PackedWeights& down, const float* down_bias,
                     float* in, float* out, int64_t rows) {
  const int64_t width = up.n(), n = down.n();
  for (int64_t j = 0; j < width; j += kFeedForwardSlice) {
    const int64_t cols = std::min(kFeedForwardSlice, width - j);
    // PackedGemm writes column c of a row at in + c: the slice's column c - j.
    PackedGemm(x, up.k(), up, up_bias, in - j, cols, rows, j, j + cols);
    ApplyEpilogue(in, nullptr, cols, 0, rows, 0, cols, epilogue);
    PackedGemmSlice(in, cols, down, j, j + cols, down_bias, out, n, rows, 0, n,
                    /*accumulate=*/j > 0);
  }
}

// How FeedForwardBlocks cuts m rows: `head_blocks` blocks of head_rows, then the rest in blocks
// of tail_rows (the last one short). The threads take blocks in order as they finish the last.
struct FeedForwardPlan {
  int64_t m, head_blocks, head_rows, tail_rows;
  static FeedForwardPlan Even(int64_t m, int64_t rows) { return {m, 0, 0, rows}; }
  int64_t count() const {
    const int64_t rest = m - head_blocks * head_rows;
    return head_blocks + (rest + tail_rows - 1) / tail_rows;
  }
  int64_t max_rows() const { return std::max(head_rows, tail_rows); }
  // The first row of block i and its row count.
  std::pair<int64_t, int64_t> Block(int64_t i) const {
    if (i < head_blocks) return {i * head_rows, head_rows};
    const int64_t r0 = head_blocks * head_rows + (i - head_blocks) * tail_rows;
    return {r0, std::min(tail_rows, m - r0)};
  }
};

// - int8: blocks of 64 (it steps 64 rows at a time; blocks of 96 and 128 ran 3% slower at
//   100 x 128 tokens on the Xeon of docs/benchmarks.md).
// - bf16 on AMX tiles: blocks of kBf16FeedForwardRows from four such blocks per thread (the tiles
//   run their column pairs outside the blocks of 32 rows: three of those per pass over the
//   weights took 0.949x-0.974x the time of two there at 100 x 128 tokens), else 64 (at 512
//   tokens, 3 blocks of 86 rows per thread, their last tile partial, took 1.025x the time of 4
//   blocks of 64: no gain within this host's noise). bf16 by vdpbf16ps: 64 (not measured).
// - f32: see FeedForwardPlanOf(PackedWeights).
FeedForwardPlan FeedForwardPlanOf(const ThreadPool&, int64_t m, const QuantizedWeights&) {
  return FeedForwardPlan::Even(m, kFeedForwardRows);
}
FeedForwardPlan FeedForwardPlanOf(const ThreadPool& pool, int64_t m, const Bf16Weights&) {
  return FeedForwardPlan::Even(
      m, Bf16InTiles() && m >= 4 * kBf16FeedForwardRows * pool.num_threads() ? kBf16FeedForwardRows
                                                                             : kFeedForwardRows);
}
// f32 weights are read once per block, so the blocks are large: at most kF32FeedForwardRows rows
// per thread (512 tokens at batch 1 on 2 threads), a thread's rows in one block read each weight
// once (with the slices, 6% faster than blocks of 64 on the Xeon of docs/benchmarks.md); but
// one block per thread leaves the others waiting on a thread whose core is slowed by a
// neighbour, as on a shared host's vCPUs (run 40 there: often one at 90-105 GFLOP/s beside one
// at 150). So from kF32FeedForwardTailRows x 2 rows per thread, each thread first takes a block
// of three quarters of its share and the last quarter goes in blocks of kF32FeedForwardTailRows,
// to whichever thread is free: here a thread up to 1.67x slower than the other costs nothing,
// and one 2.2x slower costs 0.75x the time it did (512 tokens: 2 x 192 rows, then 2 x 64).
// Measured on the Xeon at batch 1, 512 tokens, the whole model against one block per thread:
// 0.987x the time over 30 rounds on the vCPUs as they were (0.996x in the rounds where both
// were quiet, 0.930x in the others), 0.942x-0.965x with a busy loop sharing one of them
// (docs/benchmarks.md, "Xeon (2026-12-06, an eighth session)").
// Fewer rows: one block per thread (128 tokens: 64 rows each). More: blocks of about
// kF32FeedForwardStepRows, as many on every thread (100 x 128 tokens: 1-2% faster than blocks
// of 64 and 2-4% faster than 256 there).
FeedForwardPlan FeedForwardPlanOf(const ThreadPool& pool, int64_t m, const PackedWeights&) {
  const int64_t threads = pool.num_threads();
  const int64_t per_thread = (m + threads - 1) / threads;
  if (per_thread > kF32FeedForwardRows) {
    const int64_t blocks =
        ((m + kF32FeedForwardStepRows - 1) / kF32FeedForwardStepRows + threads - 1) / threads *
        threads;
    return FeedForwardPlan::Even(m, (m + blocks - 1) / blocks);
  }
  if (threads == 1 || per_thread < 2 * kF32FeedForwardTailRows) {
    return FeedForwardPlan::Even(m, std::max<int64_t>(1, per_thread));
  }
  const int64_t head_rows = m * 3 / 4 / threads;
  const int64_t rest = m - head_rows * threads;
  const int64_t tails = (rest + kF32FeedForwardTailRows - 1) / kF32FeedForwardTailRows;
  return {m, threads, head_rows, (rest + tails - 1) / tails};
}

// One block of rows of the post-LN layer after attention on the calling thread: with `attended`
// (the block's rows of the attention's output, first's o and norms), io's rows = LayerNorm(rows
// + attended · Oᵀ + o_bias) first; then rows = LayerNorm(rows + FFN(rows)). The block's
// intermediate and products in buffers of the calling thread (each ParallelFor task's own
// thread_local), reused block after block: they stay in its cache and are never written back to
// memory, where slices of inter and scratch would be (a fresh [64, inter] slice per block: 78 MB
// per layer for 100 x 128 tokens of all-MiniLM-L6-v2). block_rows: the most rows a block of the
// caller's has (the buffers' size, kept across its blocks).
template <typename Weights>
void FeedForwardBlock(float* x, int64_t rows, int64_t block_rows, const Weights& up,
                      const float* up_bias, Epilogue epilogue, const Weights& down,
                      const float* down_bias, const float* gamma, const float* beta, float eps,
                      const AttentionOutputOf<Weights>* first, const float* attended) {
  const int64_t n = down.n(), width = up.n();
  thread_local std::vector<float> block_inter, block_out;
  // f32 makes the intermediate one slice of columns at a time (FeedForwardRows).
  const int64_t inter_width =
      std::is_same_v<Weights, PackedWeights> ? std::min(width, kFeedForwardSlice) : width;
  block_inter.resize(static_cast<size_t>(block_rows * inter_width));
  block_out.resize(static_cast<size_t>(block_rows * n));
  float* const in = block_inter.data();
  float* const out = block_out.data();
  if (first != nullptr) {
    RowsProduct(attended, *first->o, first->bias, out, rows, Epilogue::kNone);
    AddNormRows(x, out, first->gamma, first->beta, n, eps, 0, rows);
  }
  FeedForwardRows(x, up, up_bias, epilogue, down, down_bias, in, out, rows);
  AddNormRows(x, out, gamma, beta, n, eps, 0, rows);
}

template <typename Weights>
void FeedForwardBlocks(ThreadPool& pool, float* io, const Weights& up, const float* up_bias,
                       Epilogue epilogue, const Weights& down, const float* down_bias,
                       const float* gamma, const float* beta, int64_t m, float eps,
                       const AttentionOutputOf<Weights>* first) {
  const int64_t n = down.n();
  const FeedForwardPlan plan = FeedForwardPlanOf(pool, m, up);
  const int64_t block_rows = plan.max_rows();
  pool.ParallelFor(plan.count(), [&](int64_t block) {
    const auto [r0, rows] = plan.Block(block);
    FeedForwardBlock(io + r0 * n, rows, block_rows, up, up_bias, epilogue, down, down_bias, gamma,
                     beta, eps, first,
                     first != nullptr ? first->attended + r0 * first->o->k() : nullptr);
  });
}

}  // namespace

void FeedForwardAddLayerNorm(ThreadPool& pool, float* io, const QuantizedWeights& up,
                             const float* up_bias, Epilogue epilogue, const QuantizedWeights& down,
                             const float* down_bias, const float* gamma, const float* beta,
                             int64_t m, float eps, const AttentionOutput* first) {
  FeedForwardBlocks(pool, io, up, up_bias, epilogue, down, down_bias, gamma, beta, m, eps, first);
}
void FeedForwardAddLayerNorm(ThreadPool& pool, float* io, const PackedWeights& up,
                             const float* up_bias, Epilogue epilogue, const PackedWeights& down,
                             const float* down_bias, const float* gamma, const float* beta,
                             int64_t m, float eps, const AttentionOutputOf<PackedWeights>* first) {
  FeedForwardBlocks(pool, io, up, up_bias, epilogue, down, down_bias, gamma, beta, m, eps, first);
}
void FeedForwardAddLayerNorm(ThreadPool& pool, float* io, const Bf16Weights& up,
                             const float* up_bias, Epilogue epilogue, const Bf16Weights& down,
                             const float* down_bias, const float* gamma, const float* beta,
                             int64_t m, float eps, const AttentionOutputOf<Bf16Weights>* first) {
  FeedForwardBlocks(pool, io, up, up_bias, epilogue, down, down_bias, gamma, beta, m, eps, first);
}

namespace {

int64_t LongestSequence(const AttentionPlan& plan) {
  int64_t longest = 0;
  for (int64_t s = 0; s < plan.num_seqs; ++s) {
    longest = std::max<int64_t>(longest, plan.cu_seqlens[s + 1] - plan.cu_seqlens[s]);
  }
  return longest;
}

}  // namespace

bool QkvAttentionIsFused(const ThreadPool& pool, const AttentionPlan& plan) {
  const int64_t threads = pool.num_threads();
  if (plan.num_seqs < 4 * threads) return false;
  // The longest sequence at most half a thread's share of the tokens (its attention grows with
  // the square of its length, so a longer one would leave the other threads waiting).
  return LongestSequence(plan) * 2 * threads <= plan.cu_seqlens[plan.num_seqs];
}

namespace {

// The plan's sequences, longest first (a long one started last would leave the other threads
// waiting), in a buffer of the calling thread.
const std::vector<int64_t>& LongestFirst(const AttentionPlan& plan) {
  thread_local std::vector<int64_t> order;
  order.resize(static_cast<size_t>(plan.num_seqs));
  for (int64_t s = 0; s < plan.num_seqs; ++s) order[static_cast<size_t>(s)] = s;
  const auto length = [&](int64_t s) { return plan.cu_seqlens[s + 1] - plan.cu_seqlens[s]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return length(a) > length(b); });
  return order;
}

// qkv_rows [len, w.n()] = the sequence's rows of x times Wᵀ + bias, then its attention into out
// (row stride q_width), on the calling thread: the projections from its cache.
template <typename Weights>
void SequenceQkvAttention(const AttentionPlan& plan, int64_t len, const float* x, const Weights& w,
                          const float* bias, float* qkv_rows, float* out) {
  const int64_t n = w.n();
  const int64_t q_width = plan.num_heads * plan.head_dim;
  const int64_t kv_width = plan.num_kv_heads * plan.head_dim;
  RowsProduct(x, w, bias, qkv_rows, len, Epilogue::kNone);
  const int32_t bounds[2] = {0, static_cast<int32_t>(len)};
  AttentionPlan one = plan;
  one.cu_seqlens = bounds;
  one.num_seqs = 1;
  one.max_seqlen = len;
  FlashAttentionSequence(one, 0, qkv_rows, n, qkv_rows + q_width, qkv_rows + q_width + kv_width, n,
                         out);
}

template <typename Weights>
void RunQkvAttention(ThreadPool& pool, const float* x, const Weights& w, const float* bias,
                     float* qkv, const AttentionPlan& plan, float* out, int64_t thread_row_bytes) {
  const int64_t n = w.n(), k = w.k();
  const int64_t q_width = plan.num_heads * plan.head_dim;
  const int64_t kv_width = plan.num_kv_heads * plan.head_dim;
  const std::vector<int64_t>& seqs = LongestFirst(plan);  // this thread's, not each worker's own
  pool.ParallelFor(plan.num_seqs, [&](int64_t i) {
    const int64_t s = seqs[static_cast<size_t>(i)];
    const int64_t begin = plan.cu_seqlens[s], len = plan.cu_seqlens[s + 1] - begin;
    if (len == 0) return;
    if (len * n * static_cast<int64_t>(sizeof(float)) > thread_row_bytes) {
      RowsProduct(x + begin * k, w, bias, qkv + begin * n, len, Epilogue::kNone);
      FlashAttentionSequence(plan, s, qkv, n, qkv + q_width, qkv + q_width + kv_width, n, out);
      return;
    }
    // The rows in this thread's buffer, the attention over them as a batch of one sequence.
    thread_local std::vector<float> rows;
    rows.resize(static_cast<size_t>(len * n));
    SequenceQkvAttention(plan, len, x + begin * k, w, bias, rows.data(), out + begin * q_width);
  });
}

}  // namespace

void QkvAttention(ThreadPool& pool, const float* x, const QuantizedWeights& w, const float* bias,
                  float* qkv, const AttentionPlan& plan, float* out, int64_t thread_row_bytes) {
  RunQkvAttention(pool, x, w, bias, qkv, plan, out, thread_row_bytes);
}
void QkvAttention(ThreadPool& pool, const float* x, const PackedWeights& w, const float* bias,
                  float* qkv, const AttentionPlan& plan, float* out, int64_t thread_row_bytes) {
  RunQkvAttention(pool, x, w, bias, qkv, plan, out, thread_row_bytes);
}
void QkvAttention(ThreadPool& pool, const float* x, const Bf16Weights& w, const float* bias,
                  float* qkv, const AttentionPlan& plan, float* out, int64_t thread_row_bytes) {
  RunQkvAttention(pool, x, w, bias, qkv, plan, out, thread_row_bytes);
}

bool PostLnLayerBySequenceFits(const ThreadPool& pool, const AttentionPlan& plan,
                               int64_t qkv_width) {
  if (!QkvAttentionIsFused(pool, plan)) return false;
  if (!FeedForwardIsFused(pool, plan.cu_seqlens[plan.num_seqs])) return false;
  return LongestSequence(plan) * qkv_width * static_cast<int64_t>(sizeof(float)) <=
         kQkvThreadRowBytes;
}

void PostLnLayerBySequence(ThreadPool& pool, float* io, const PostLnLayer& l,
                           const AttentionPlan& plan, float eps) {
  const int64_t n = l.qkv->n(), k = l.qkv->k();
  const int64_t q_width = plan.num_heads * plan.head_dim;
  const AttentionOutput first{nullptr, l.o, l.o_bias, l.ln1_gamma, l.ln1_beta};
  const std::vector<int64_t>& seqs = LongestFirst(plan);
  pool.ParallelFor(plan.num_seqs, [&](int64_t i) {
    const int64_t s = seqs[static_cast<size_t>(i)];
    const int64_t begin = plan.cu_seqlens[s], len = plan.cu_seqlens[s + 1] - begin;
    if (len == 0) return;
    thread_local std::vector<float> qkv_rows, attended;
    qkv_rows.resize(static_cast<size_t>(len * n));
    attended.resize(static_cast<size_t>(len * q_width));
    float* const x = io + begin * k;
    SequenceQkvAttention(plan, len, x, *l.qkv, l.qkv_bias, qkv_rows.data(), attended.data());
    // The feed-forward's blocks of FeedForwardBlocks, kFeedForwardRows at most, as even as
    // they come (100 rows: 50 + 50).
    const int64_t count = (len + kFeedForwardRows - 1) / kFeedForwardRows;
    const FeedForwardPlan blocks = FeedForwardPlan::Even(len, (len + count - 1) / count);
    for (int64_t b = 0; b < blocks.count(); ++b) {
      const auto [r0, rows] = blocks.Block(b);
      FeedForwardBlock(x + r0 * k, rows, kFeedForwardRows, *l.up, l.up_bias, l.epilogue, *l.down,
                       l.down_bias, l.ln2_gamma, l.ln2_beta, eps, &first,
                       attended.data() + r0 * q_width);
    }
  });
}

bool QkvAttentionByHeadsFits(const ThreadPool& pool, const AttentionPlan& plan) {
  if (plan.num_seqs <= 0 || plan.num_kv_heads <= 0 || plan.num_heads % plan.num_kv_heads != 0 ||
      plan.head_dim % PackedWeights::kPanel != 0 || QkvAttentionIsFused(pool, plan)) {
    return false;
  }
  if (plan.num_seqs * plan.num_heads < 4 * static_cast<int64_t>(pool.num_threads())) return false;
  return LongestSequence(plan) * 3 * plan.head_dim * static_cast<int64_t>(sizeof(float)) <=
         kQkvThreadRowBytes;
}

void QkvAttentionByHeads(ThreadPool& pool, const float* x, const PackedWeights& w,
                         const float* bias, const AttentionPlan& plan, float* out) {
  const int64_t d = plan.head_dim, k = w.k();
  const int64_t q_width = plan.num_heads * d;
  const int64_t kv_width = plan.num_kv_heads * d;
  const int64_t width = 3 * d;  // the buffer's row: the head's q, then its kv head's k and v
  pool.ParallelFor(plan.num_seqs * plan.num_heads, [&](int64_t task) {
    const int64_t s = task / plan.num_heads, h = task % plan.num_heads;
    const int64_t begin = plan.cu_seqlens[s], len = plan.cu_seqlens[s + 1] - begin;
    if (len == 0) return;
    const int64_t kv_column = KvHead(plan, h) * d;
    thread_local std::vector<float> rows;
    rows.resize(static_cast<size_t>(len * width));
    const int64_t columns[3] = {h * d, q_width + kv_column, q_width + kv_width + kv_column};
    for (int64_t j = 0; j < 3; ++j) {
      // PackedGemm writes column c of a row at y + c: the buffer's slot j for c = columns[j].
      PackedGemm(x + begin * k, k, w, bias, rows.data() + j * d - columns[j], width, len,
                 columns[j], columns[j] + d);
    }
    FlashAttentionHead(plan, s, h, rows.data(), rows.data() + d, rows.data() + 2 * d, width, out);
  });
}

void Embedding(ThreadPool& pool, const int32_t* ids, const int32_t* positions,
               const int32_t* type_ids, const float* word, const float* position, const float* type,
               const float* gamma, const float* beta, float* x, int64_t m, int64_t n, float eps) {
  ForRowShares(pool, m, n, [&](int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t) {
      float* row = x + t * n;
      const float* wv = word + static_cast<int64_t>(ids[t]) * n;
      if (position == nullptr && type == nullptr) {
        std::copy(wv, wv + n, row);
      } else if (position == nullptr) {
        const float* tv = type + static_cast<int64_t>(type_ids ? type_ids[t] : 0) * n;
        for (int64_t j = 0; j < n; ++j) row[j] = wv[j] + tv[j];
      } else {
        const float* pv = position + static_cast<int64_t>(positions[t]) * n;
        if (type != nullptr) {
          const float* tv = type + static_cast<int64_t>(type_ids ? type_ids[t] : 0) * n;
          for (int64_t j = 0; j < n; ++j) row[j] = wv[j] + pv[j] + tv[j];
        } else {
          for (int64_t j = 0; j < n; ++j) row[j] = wv[j] + pv[j];
        }
      }
      if (gamma != nullptr) NormalizeRow(row, gamma, beta, n, eps);
    }
  });
}

void LayerNorm(ThreadPool& pool, const float* x, const float* gamma, const float* beta, float* out,
               int64_t rows, int64_t n, float eps) {
  ForRowShares(pool, rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (out != x) std::copy(x + r * n, x + (r + 1) * n, out + r * n);
      NormalizeRow(out + r * n, gamma, beta, n, eps);
    }
  });
}

void AddLayerNorm(ThreadPool& pool, float* io, const float* add, const float* gamma,
                  const float* beta, int64_t rows, int64_t n, float eps) {
  ForRowShares(pool, rows, n,
               [&](int64_t r0, int64_t r1) { AddNormRows(io, add, gamma, beta, n, eps, r0, r1); });
}

void AddPreLayerNorm(ThreadPool& pool, float* residual, float* y, const float* gamma,
                     const float* beta, int64_t rows, int64_t n, float eps) {
  ForRowShares(pool, rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* x = residual + r * n;
      float* o = y + r * n;
      for (int64_t j = 0; j < n; ++j) {
        x[j] += o[j];
        o[j] = x[j];
      }
      NormalizeRow(o, gamma, beta, n, eps);
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

void AddRmsNorm(ThreadPool& pool, float* residual, float* y, const float* gamma, int64_t rows,
                int64_t n, float eps) {
  ForRowShares(pool, rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* x = residual + r * n;
      float* o = y + r * n;
      for (int64_t j = 0; j < n; ++j) x[j] += o[j];
      RmsNorm(x, gamma, o, 1, n, eps);
    }
  });
}

void HeadRmsNorm(float* x, const float* gamma, int64_t num_tokens, int64_t heads, int64_t head_dim,
                 int64_t stride, float eps) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* row = x + t * stride;
    RmsNorm(row, gamma, row, heads, head_dim, eps);
  }
}

void MaxRows(const float* x, int64_t rows, int64_t m, float* out, bool accumulate) {
  if (!accumulate) std::copy(x, x + m, out);
  for (int64_t r = accumulate ? 0 : 1; r < rows; ++r) {
    const float* row = x + r * m;
    for (int64_t j = 0; j < m; ++j) out[j] = std::max(out[j], row[j]);
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

void GeluMul(const float* gate_up, float* out, int64_t rows, int64_t inter, bool tanh_form) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    std::copy(g, g + inter, o);
    if (tanh_form) {
      vec::GeluTanh(o, inter);
    } else {
      GeluErfRow(o, inter);
    }
    for (int64_t j = 0; j < inter; ++j) o[j] *= u[j];
  }
}

void Tanh(float* x, int64_t n) { vec::Tanh(x, n); }
void Relu(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
void GeluErf(float* x, int64_t n) { GeluErfRow(x, n); }
void GeluTanh(float* x, int64_t n) { vec::GeluTanh(x, n); }

void Add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void Rotary(float* x, const int32_t* positions, int64_t num_tokens, int64_t heads, int64_t head_dim,
            int64_t stride, double theta, RotaryLayout layout) {
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
      if (layout == RotaryLayout::kNeox) {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * cos_v[i] - b * sin_v[i];
          v[i + half] = b * cos_v[i] + a * sin_v[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * cos_v[i] - b * sin_v[i];
          v[2 * i + 1] = b * cos_v[i] + a * sin_v[i];
        }
      }
    }
  }
}

void Pool(const float* hidden, const int32_t* bounds, int64_t width, int64_t rows, int64_t n,
          PoolMode mode, float* out) {
  for (int64_t s = 0; s < rows; ++s) {
    const int64_t begin = bounds[width * s], end = bounds[width * s + 1];
    const int64_t origin = width == 3 ? bounds[width * s + 2] : begin;
    float* dst = out + s * n;
    switch (mode) {
      case PoolMode::kCls:
      case PoolMode::kLastToken: {
        const float* src = hidden + (mode == PoolMode::kCls ? begin : end - 1) * n;
        std::copy(src, src + n, dst);
        break;
      }
      case PoolMode::kMean:
      case PoolMode::kMeanSqrtLen: {
        std::fill(dst, dst + n, 0.0f);
        for (int64_t t = begin; t < end; ++t) {
          const float* src = hidden + t * n;
          for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
        }
        const float count = static_cast<float>(end - begin);
        const float inv = 1.0f / (mode == PoolMode::kMean ? count : std::sqrt(count));
        for (int64_t j = 0; j < n; ++j) dst[j] *= inv;
        break;
      }
      case PoolMode::kWeightedMean: {
        std::fill(dst, dst + n, 0.0f);
        for (int64_t t = begin; t < end; ++t) {
          const float* src = hidden + t * n;
          const float w = static_cast<float>(t - origin + 1);
          for (int64_t j = 0; j < n; ++j) dst[j] += w * src[j];
        }
        // Σ (t - origin + 1) over [begin, end): the weights up to end less those before begin.
        const double hi = static_cast<double>(end - origin),
                     lo = static_cast<double>(begin - origin);
        const float inv = static_cast<float>(1.0 / (hi * (hi + 1) / 2 - lo * (lo + 1) / 2));
        for (int64_t j = 0; j < n; ++j) dst[j] *= inv;
        break;
      }
      case PoolMode::kMax: {
        const float* first = hidden + begin * n;
        std::copy(first, first + n, dst);
        for (int64_t t = begin + 1; t < end; ++t) {
          const float* src = hidden + t * n;
          for (int64_t j = 0; j < n; ++j) dst[j] = std::max(dst[j], src[j]);
        }
        break;
      }
    }
  }
}

int64_t EncodedRowBytes(Encoding encoding, int64_t dims) {
  switch (encoding) {
    case Encoding::kF32:
      return dims * 4;
    case Encoding::kF16:
      return dims * 2;
    case Encoding::kInt8:
      return dims;
    case Encoding::kBinary:
      return (dims + 7) / 8;
  }
  return 0;
}

void EncodeRows(const float* x, int64_t x_stride, int64_t rows, int64_t dims, bool normalize,
                Encoding encoding, uint8_t* out) {
  const int64_t row_bytes = EncodedRowBytes(encoding, dims);
  std::fill(out, out + rows * row_bytes, uint8_t{0});
  std::vector<float> row(static_cast<size_t>(dims));
  for (int64_t s = 0; s < rows; ++s) {
    std::copy(x + s * x_stride, x + s * x_stride + dims, row.begin());
    if (normalize) {
      double norm = 0.0;
      for (float v : row) norm += static_cast<double>(v) * v;
      // sentence-transformers / torch.nn.functional.normalize: x / max(||x||, 1e-12)
      const float inv = 1.0f / static_cast<float>(std::max(std::sqrt(norm), 1e-12));
      for (float& v : row) v *= inv;
    }
    uint8_t* dst = out + s * row_bytes;
    switch (encoding) {
      case Encoding::kF32:
        std::memcpy(dst, row.data(), static_cast<size_t>(row_bytes));
        break;
      case Encoding::kF16:
        for (int64_t j = 0; j < dims; ++j) {
          const uint16_t half = FloatToHalf(row[j]);
          std::memcpy(dst + 2 * j, &half, 2);
        }
        break;
      case Encoding::kInt8:
        for (int64_t j = 0; j < dims; ++j) {
          const float q = std::round(std::tanh(row[j]) * 127.0f);
          dst[j] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -128.0f, 127.0f)));
        }
        break;
      case Encoding::kBinary:
        for (int64_t j = 0; j < dims; ++j) {
          if (row[j] > 0.0f) dst[j / 8] |= static_cast<uint8_t>(0x80 >> (j % 8));
        }
        break;
    }
  }
}

void LogitDifference(const float* x, int64_t rows, int64_t n, const float* yes, const float* no,
                     float* scores) {
  for (int64_t s = 0; s < rows; ++s) {
    const float* last = x + s * n;
    float yes_logit = 0.0f, no_logit = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      yes_logit += last[j] * yes[j];
      no_logit += last[j] * no[j];
    }
    scores[s] = yes_logit - no_logit;
  }
}

}  // namespace quiver::engine::cpu
