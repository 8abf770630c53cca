#include "engine/kernels/cpu/gemm_int8.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/isa_paths.h"
#include "engine/kernels/cpu/vec.h"

namespace quiver::engine::cpu {
namespace {

constexpr int64_t kPanel = QuantizedWeights::kPanel;
constexpr int64_t kRows = 6;  // rows of y per micro-kernel call

// y = acc · (row scale · column scale) + bias, for `cols` columns of one row.
inline void Finish(const int32_t* acc, float row_scale, const float* col_scale, const float* bias,
                   float* y, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    y[j] = std::fma(static_cast<float>(acc[j]), row_scale * col_scale[j], bias ? bias[j] : 0.0f);
  }
}

#if QUIVER_VEC_AVX2

// Rows [0, R) of y over one panel: int32 sums over all k pairs, then the f32 epilogue.
template <int R>
void MicroKernel(const int16_t* a, int64_t lda, const int8_t* b, int64_t pairs,
                 const float* row_scale, const float* col_scale, const float* bias, float* y,
                 int64_t ldy, int64_t cols) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < pairs; ++p) {
    const __m256i w0 =
        _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(b + p * 2 * kPanel)));
    const __m256i w1 = _mm256_cvtepi8_epi16(
        _mm_load_si128(reinterpret_cast<const __m128i*>(b + p * 2 * kPanel + 16)));
#define QUIVER_MADD(i)                                             \
  if constexpr (R > (i)) {                                         \
    int32_t pair;                                                  \
    std::memcpy(&pair, a + (i)*lda + 2 * p, sizeof(pair));         \
    const __m256i x = _mm256_set1_epi32(pair);                     \
    c##i##0 = _mm256_add_epi32(c##i##0, _mm256_madd_epi16(x, w0)); \
    c##i##1 = _mm256_add_epi32(c##i##1, _mm256_madd_epi16(x, w1)); \
  }
    QUIVER_MADD(0) QUIVER_MADD(1) QUIVER_MADD(2) QUIVER_MADD(3) QUIVER_MADD(4) QUIVER_MADD(5)
#undef QUIVER_MADD
  }
  // The epilogue in vectors where the panel is whole; the same fused multiply-add as Finish.
  const bool whole = cols == kPanel;
  const __m256 cs0 = whole ? _mm256_loadu_ps(col_scale) : _mm256_setzero_ps();
  const __m256 cs1 = whole ? _mm256_loadu_ps(col_scale + 8) : _mm256_setzero_ps();
  const __m256 b0 = whole && bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  const __m256 b1 = whole && bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
  alignas(32) int32_t acc[kPanel];
#define QUIVER_STORE(i)                                                                           \
  if constexpr (R > (i)) {                                                                        \
    if (whole) {                                                                                  \
      const __m256 rs = _mm256_set1_ps(row_scale[i]);                                             \
      float* out = y + (i)*ldy;                                                                   \
      _mm256_storeu_ps(out,                                                                       \
                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(c##i##0), _mm256_mul_ps(rs, cs0), b0)); \
      _mm256_storeu_ps(out + 8,                                                                   \
                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(c##i##1), _mm256_mul_ps(rs, cs1), b1)); \
    } else {                                                                                      \
      _mm256_store_si256(reinterpret_cast<__m256i*>(acc), c##i##0);                               \
      _mm256_store_si256(reinterpret_cast<__m256i*>(acc + 8), c##i##1);                           \
      Finish(acc, row_scale[i], col_scale, bias, y + (i)*ldy, cols);                              \
    }                                                                                             \
  }
  QUIVER_STORE(0) QUIVER_STORE(1) QUIVER_STORE(2) QUIVER_STORE(3) QUIVER_STORE(4) QUIVER_STORE(5)
#undef QUIVER_STORE
}

#else  // the same sums in plain loops

template <int R>
void MicroKernel(const int16_t* a, int64_t lda, const int8_t* b, int64_t pairs,
                 const float* row_scale, const float* col_scale, const float* bias, float* y,
                 int64_t ldy, int64_t cols) {
  for (int i = 0; i < R; ++i) {
    int32_t acc[kPanel] = {};
    for (int64_t p = 0; p < pairs; ++p) {
      for (int64_t j = 0; j < kPanel; ++j) {
        const int8_t* w = b + p * 2 * kPanel + (j < 8 ? 0 : 16) + 2 * (j % 8);
        acc[j] += int32_t{a[i * lda + 2 * p]} * w[0] + int32_t{a[i * lda + 2 * p + 1]} * w[1];
      }
    }
    Finish(acc, row_scale[i], col_scale, bias, y + i * ldy, cols);
  }
}

#endif

void RunMicroKernel(int64_t rows, const int16_t* a, int64_t lda, const int8_t* b, int64_t pairs,
                    const float* row_scale, const float* col_scale, const float* bias, float* y,
                    int64_t ldy, int64_t cols) {
  switch (rows) {
    case 6:
      MicroKernel<6>(a, lda, b, pairs, row_scale, col_scale, bias, y, ldy, cols);
      break;
    case 5:
      MicroKernel<5>(a, lda, b, pairs, row_scale, col_scale, bias, y, ldy, cols);
      break;
    case 4:
      MicroKernel<4>(a, lda, b, pairs, row_scale, col_scale, bias, y, ldy, cols);
      break;
    case 3:
      MicroKernel<3>(a, lda, b, pairs, row_scale, col_scale, bias, y, ldy, cols);
      break;
    case 2:
      MicroKernel<2>(a, lda, b, pairs, row_scale, col_scale, bias, y, ldy, cols);
      break;
    default:
      MicroKernel<1>(a, lda, b, pairs, row_scale, col_scale, bias, y, ldy, cols);
      break;
  }
}

}  // namespace

void QuantizedWeights::Free::operator()(int8_t* p) const { std::free(p); }

QuantizedWeights::QuantizedWeights(const float* w, int64_t n, int64_t k) : n_(n), k_(k) {
  if (k > kMaxDepth) throw std::invalid_argument("int8 weights: k above kMaxDepth");
  const std::vector<CpuPath>& paths = SupportedCpuPaths();
  quads_possible_ = std::find(paths.begin(), paths.end(), CpuPath::kAvx512Vnni) != paths.end() ||
                    std::find(paths.begin(), paths.end(), CpuPath::kAvx2Vnni) != paths.end();
  const Layout layout = quads_possible_ && Int8BytesActive() ? kQuads : kPairs;
  Allocate(layout);
  scales_.reset(new float[static_cast<size_t>(n)]);
  sums_.reset(new int32_t[static_cast<size_t>(n)]);
  std::vector<int8_t> q(static_cast<size_t>(k));
  for (int64_t c = 0; c < n; ++c) {
    const float* row = w + c * k;
    float amax = 0.0f;
    for (int64_t kk = 0; kk < k; ++kk) amax = std::max(amax, std::abs(row[kk]));
    const float s = amax / 127.0f;
    scales_[c] = s;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    int32_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      q[kk] = static_cast<int8_t>(std::clamp(std::nearbyint(row[kk] * inv), -127.0f, 127.0f));
      sum += q[kk];
    }
    sums_[c] = sum;
    Place(layout, c, q.data());
  }
  held_[layout].store(layouts_[layout].get(), std::memory_order_release);
}

int64_t QuantizedWeights::LayoutBytes(Layout layout) const {
  const int64_t panels = (n_ + kPanel - 1) / kPanel;
  return panels * kPanel * (layout == kQuads ? quad_depth() : 2 * k_pairs());
}

void QuantizedWeights::Allocate(Layout layout) const {
  const auto bytes = static_cast<size_t>(LayoutBytes(layout));
  layouts_[layout].reset(static_cast<int8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  if (layouts_[layout] == nullptr) throw std::bad_alloc();
  std::memset(layouts_[layout].get(), 0, bytes);  // k's padding stays zero
}

int64_t QuantizedWeights::layout_bytes() const {
  int64_t bytes = 0;
  for (Layout layout : {kPairs, kQuads}) {
    if (held_[layout].load(std::memory_order_acquire) != nullptr) bytes += LayoutBytes(layout);
  }
  return bytes;
}

int8_t QuantizedWeights::Weight(Layout from, int64_t c, int64_t k) const {
  const int64_t j = c % kPanel;
  const int8_t* data = layouts_[from].get();
  if (from == kQuads) {
    return data[(c / kPanel) * quad_depth() * kPanel + (k / 4) * 4 * kPanel + 4 * j + k % 4];
  }
  const int64_t half = j < 8 ? 0 : 16, lane = 2 * (j % 8);
  return data[(c / kPanel) * k_pairs() * 2 * kPanel + (k / 2) * 2 * kPanel + half + lane + k % 2];
}

void QuantizedWeights::Place(Layout to, int64_t c, const int8_t* q) const {
  const int64_t j = c % kPanel;
  int8_t* data = layouts_[to].get();
  if (to == kQuads) {
    int8_t* quad = data + (c / kPanel) * quad_depth() * kPanel;
    for (int64_t kk = 0; kk < k_; ++kk) quad[(kk / 4) * 4 * kPanel + 4 * j + kk % 4] = q[kk];
    return;
  }
  int8_t* panel = data + (c / kPanel) * k_pairs() * 2 * kPanel;
  const int64_t half = j < 8 ? 0 : 16, lane = 2 * (j % 8);
  for (int64_t p = 0; p < k_pairs(); ++p) {
    panel[p * 2 * kPanel + half + lane] = q[2 * p];
    panel[p * 2 * kPanel + half + lane + 1] = 2 * p + 1 < k_ ? q[2 * p + 1] : int8_t{0};
  }
}

const int8_t* QuantizedWeights::Build(Layout layout) const {
  std::lock_guard<std::mutex> lock(build_);
  if (const int8_t* held = held_[layout].load(std::memory_order_acquire)) return held;
  const Layout from = layout == kQuads ? kPairs : kQuads;
  Allocate(layout);
  std::vector<int8_t> q(static_cast<size_t>(k_));
  for (int64_t c = 0; c < n_; ++c) {
    for (int64_t kk = 0; kk < k_; ++kk) q[kk] = Weight(from, c, kk);
    Place(layout, c, q.data());
  }
  held_[layout].store(layouts_[layout].get(), std::memory_order_release);
  return layouts_[layout].get();
}

void QuantizeRows(const float* x, int64_t ldx, int64_t k, int64_t r0, int64_t r1, int16_t* q,
                  float* scale) {
  if (ActiveCpuPath() >= CpuPath::kAvx512) {
    QuantizeRowsAvx512(x, ldx, k, r0, r1, q, scale);
    return;
  }
  const int64_t width = (k + 1) / 2 * 2;
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * ldx;
    int16_t* out = q + r * width;
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < k; ++i) {  // NaNs skipped, as RowRangeAvx512
      lo = row[i] < lo ? row[i] : lo;
      hi = row[i] > hi ? row[i] : hi;
    }
    const RowQuantization rq = QuantizeRange(lo, hi);
    scale[r] = rq.scale;
    if (rq.inv == 0.0f) {  // zeros, written: x · 0 is NaN for an infinite x
      std::fill(out, out + width, int16_t{0});
      continue;
    }
    const auto least = static_cast<float>(-rq.zero), most = static_cast<float>(255 - rq.zero);
    int64_t i = 0;
#if QUIVER_VEC_AVX2
    const __m256 vinv = _mm256_set1_ps(rq.inv);
    const __m256i vleast = _mm256_set1_epi32(-rq.zero), vmost = _mm256_set1_epi32(255 - rq.zero);
    // The row after next into L1 meanwhile, as QuantizeRowsAvx512 does (its rows often come from
    // L3).
    const float* ahead = r + 2 < r1 ? x + (r + 2) * ldx : nullptr;
    for (; i + 16 <= k; i += 16) {
      if (ahead != nullptr) __builtin_prefetch(ahead + i, 0, 3);
      // Round to nearest even (the MXCSR default), as std::nearbyint below, then clamp.
      const __m256i lo8 = _mm256_min_epi32(
          _mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(row + i), vinv)),
                           vleast),
          vmost);
      const __m256i hi8 = _mm256_min_epi32(
          _mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(row + i + 8), vinv)),
                           vleast),
          vmost);
      // packs interleaves the 128-bit halves: put them back in order.
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo8, hi8), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
    }
#endif
    for (; i < k; ++i) {
      // A NaN goes to the least value, as the vector conversion's integer indefinite does.
      const float v = std::nearbyint(row[i] * rq.inv);
      out[i] = static_cast<int16_t>(v >= least ? std::min(v, most) : least);
    }
    if (width > k) out[k] = 0;
  }
}

bool Int8BytesActive() {
  const CpuPath path = ActiveCpuPath();
  return path == CpuPath::kAvx2Vnni || path >= CpuPath::kAvx512Vnni;
}

void QuantizeRowsU8(const float* x, int64_t ldx, int64_t k, int64_t depth, int64_t r0, int64_t r1,
                    uint8_t* u, int32_t* zero, float* scale) {
  if (!Int8BytesActive()) std::abort();  // see gemm_int8.h
  if (ActiveCpuPath() == CpuPath::kAvx2Vnni) {
    QuantizeRowsU8AvxVnni(x, ldx, k, depth, r0, r1, u, zero, scale);
    return;
  }
  QuantizeRowsU8Avx512(x, ldx, k, depth, r0, r1, u, zero, scale);
}

void QuantizedGemmU8(const uint8_t* u, const int32_t* zero, const float* scale,
                     const QuantizedWeights& w, const float* bias, float* y, int64_t ldy, int64_t m,
                     int64_t c0, int64_t c1) {
  if (!Int8BytesActive() || w.quad_panel(0) == nullptr) std::abort();
  if (ActiveCpuPath() == CpuPath::kAvx2Vnni) {
    QuantizedGemmU8AvxVnni(u, zero, scale, w, bias, y, ldy, m, c0, c1);
    return;
  }
  if (ActiveCpuPath() == CpuPath::kAmx && AmxBytesAgree()) {
    QuantizedGemmU8Amx(u, zero, scale, w, bias, y, ldy, m, c0, c1);
    return;
  }
  QuantizedGemmU8Avx512(u, zero, scale, w, bias, y, ldy, m, c0, c1);
}

void QuantizedGemm(const int16_t* q, const float* scale, const QuantizedWeights& w,
                   const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1) {
  switch (ActiveCpuPath()) {
    case CpuPath::kAmx:  // int16 rows: the engine's layers take bytes there (QuantizedGemmU8)
    case CpuPath::kAvx512Vnni:
      QuantizedGemmAvx512(q, scale, w, bias, y, ldy, m, c0, c1, /*vnni=*/true);
      return;
    case CpuPath::kAvx512:
      QuantizedGemmAvx512(q, scale, w, bias, y, ldy, m, c0, c1, /*vnni=*/false);
      return;
    default:
      break;
  }
  const int64_t pairs = w.k_pairs(), lda = 2 * pairs;
  for (int64_t col = c0; col < c1; col += kPanel) {
    const int64_t cols = std::min(kPanel, c1 - col);
    const int8_t* b = w.panel(col / kPanel);
    const float* col_scale = w.scales() + col;
    const float* col_bias = bias ? bias + col : nullptr;
    for (int64_t r = 0; r < m; r += kRows) {
      RunMicroKernel(std::min(kRows, m - r), q + r * lda, lda, b, pairs, scale + r, col_scale,
                     col_bias, y + r * ldy + col, ldy, cols);
    }
  }
}

}  // namespace quiver::engine::cpu
