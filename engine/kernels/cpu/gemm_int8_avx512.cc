// QuantizedGemm and QuantizedGemmU8 on AVX-512 (isa_paths.h): the panels of gemm_int8.h two
// at a time, 13 rows x 32 columns of int32 sums in 26 zmm accumulators; each step broadcasts 4
// bytes of a row to all lanes.
// - int16 rows: a panel's 16 columns of one k pair are 32 int8 values, widened to 32 int16 in
//   one zmm (columns 0-7 in the low half, 8-15 in the high, each as its pair), so one vpmaddwd
//   (AVX-512 BW, then vpaddd) or one vpdpwssd (AVX-512 VNNI) adds a row's two products to all
//   16 columns.
// - byte rows (u = p + z): a panel's 16 columns of 4 k are the quad layout's 64 bytes, so one
//   vpdpbusd adds a row's four products to all 16 columns; the epilogue subtracts z · Σ q.
// The sums are exact integers, the same as the AVX2 path's, and so is the f32 epilogue: the
// paths give the same bits.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
// GCC 12 warns of the undefined source _mm512_cvtepi32_ps passes its builtin (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace quiver::engine::cpu {
namespace {

constexpr int64_t kPanel = QuantizedWeights::kPanel;
// Rows of y per micro-kernel call: 13, so that a step of 64 rows (kernels.cc) is four whole
// calls and one of 12; at 12 its last 4 rows took 4.2% of an int8 batch of 100 x 128 tokens on
// Zen 5 (a quarter more per row than the full calls), and 13 was 0.9% faster there
// (bench/pair_builds.sh, 8 rounds). 26 accumulators, two weight registers and the broadcast
// leave three of 32 (vpmaddwd's product takes one).
constexpr int64_t kRows = 13;

// What one step multiplies: int16 pairs by vpmaddwd + vpaddd or vpdpwssd, or bytes by vpdpbusd.
enum class Op { kMaddwd, kDpwssd, kDpbusd };

// acc += the products of x (the broadcast row values) and w, in place on the accumulator. GCC
// 12's intrinsics (_mm512_dpwssd_epi32 and the others) left the accumulators' registers untied:
// they were copied and spilled to the stack on every step (half the speed).
template <Op kOp>
QUIVER_TARGET_AVX512_VNNI inline __m512i Madd(__m512i acc, __m512i x, __m512i w) {
  if constexpr (kOp == Op::kMaddwd) {
    __m512i product;
    __asm__("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0"
            : "+v"(acc), "=&v"(product)
            : "v"(x), "v"(w));
  } else if constexpr (kOp == Op::kDpwssd) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
  } else {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));  // x unsigned, w signed
  }
  return acc;
}

// One step's weights of a panel: 16 columns x 2 k widened to int16, or x 4 k as bytes.
template <Op kOp>
QUIVER_TARGET_AVX512 inline __m512i LoadStep(const int8_t* b, int64_t step) {
  if constexpr (kOp == Op::kDpbusd) {
    return _mm512_load_si512(b + step * 4 * kPanel);
  } else {
    return _mm512_cvtepi8_epi16(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(b + step * 2 * kPanel)));
  }
}

// What a micro-kernel reads besides the rows: the two panels (b1 = b0 for one), the steps over
// k, the rows' scales and zero points (null for int16 rows), the columns' scales, sums (null for
// int16 rows) and bias (may be null), and the masks of the columns to store.
struct Block {
  const int8_t* b0;
  const int8_t* b1;
  int64_t steps;
  const float* row_scale;
  const int32_t* zero;
  const float* col_scale;
  const int32_t* col_sum;
  const float* bias;
  __mmask16 mask0, mask1;
};

// The epilogue, y = (acc - zero · col_sum) · (row scale · column scale) + bias, in two parts.
// First one panel's column terms, read once per micro-kernel call: read per row, GCC loaded them
// again after every store to y (which might have changed them, for all it knew), and with the
// checks for a missing bias or zero point the epilogue of a 13 x 32 block took 676 instructions
// (231 now), against about 4,000 for its 96 steps over k = 384.
struct PanelTerms {
  __m512i col_sum;  // dpbusd only
  __m512 col_scale, bias;
};

template <Op kOp>
QUIVER_TARGET_AVX512 inline PanelTerms LoadTerms(const int32_t* col_sum, const float* col_scale,
                                                 const float* bias, __mmask16 mask) {
  PanelTerms t;
  t.col_sum = kOp == Op::kDpbusd ? _mm512_maskz_loadu_epi32(mask, col_sum) : _mm512_setzero_si512();
  t.col_scale = _mm512_maskz_loadu_ps(mask, col_scale);
  t.bias = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  return t;
}

// Then each row's arithmetic over them, for its zero point z (dpbusd) and scale rs, into the
// columns `mask` selects.
template <Op kOp>
QUIVER_TARGET_AVX512 inline void StoreRow(__m512i acc, __m512i z, __m512 rs, const PanelTerms& t,
                                          float* y, __mmask16 mask) {
  if constexpr (kOp == Op::kDpbusd) acc = _mm512_sub_epi32(acc, _mm512_mullo_epi32(z, t.col_sum));
  const __m512 r = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(rs, t.col_scale), t.bias);
  _mm512_mask_storeu_ps(y, mask, r);
}

// Rows [0, R) of y over one or two panels (kTwo): int32 sums over all steps, then the epilogue.
// a holds each row's steps as 4-byte words, row stride lda words, or packed per 13 rows as
// [steps][13] (kPacked). Accumulators are named variables, as in gemm_avx512.cc.
template <int R, bool kTwo, Op kOp, bool kPacked>
QUIVER_TARGET_AVX512_VNNI void MicroKernel(const int32_t* a, int64_t lda, const Block& blk,
                                           float* y, int64_t ldy) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i c0a = zero, c0b = zero, c1a = zero, c1b = zero, c2a = zero, c2b = zero, c3a = zero,
          c3b = zero, c4a = zero, c4b = zero, c5a = zero, c5b = zero, c6a = zero, c6b = zero,
          c7a = zero, c7b = zero, c8a = zero, c8b = zero, c9a = zero, c9b = zero, c10a = zero,
          c10b = zero, c11a = zero, c11b = zero, c12a = zero, c12b = zero;
  const int8_t* b0 = blk.b0;
  const int8_t* b1 = blk.b1;
#define QUIVER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12)
#define QUIVER_MADD(i)                                                                  \
  if constexpr (R > (i)) {                                                              \
    const __m512i x = _mm512_set1_epi32(kPacked ? a[p * kRows + (i)] : a[(i)*lda + p]); \
    c##i##a = Madd<kOp>(c##i##a, x, w0);                                                \
    if constexpr (kTwo) c##i##b = Madd<kOp>(c##i##b, x, w1);                            \
  }
#define QUIVER_STEP(step)                                \
  {                                                      \
    const int64_t p = (step);                            \
    const __m512i w0 = LoadStep<kOp>(b0, p);             \
    const __m512i w1 = kTwo ? LoadStep<kOp>(b1, p) : w0; \
    QUIVER_ROWS(QUIVER_MADD)                             \
  }
  // Packed rows take two steps per loop iteration (the same sums), as gemm_avx512.cc's f32
  // kernel takes two k: int8 on the avx512_vnni path 1.027x on the model-167 Xeon
  // (bench/pair_builds.sh, 10 rounds). Not by `#pragma GCC unroll`: GCC 12 then kept the
  // accumulators on the stack (0.655x). Strided rows keep one: their 13 row addresses did not fit
  // the registers twice over.
  int64_t step = 0;
  if constexpr (kPacked) {
    for (; step + 2 <= blk.steps; step += 2) {
      QUIVER_STEP(step)
      QUIVER_STEP(step + 1)
    }
  }
  for (; step < blk.steps; ++step) QUIVER_STEP(step)
#undef QUIVER_STEP
#undef QUIVER_MADD
  const float* bias1 = blk.bias != nullptr ? blk.bias + kPanel : nullptr;
  const int32_t* sum1 = blk.col_sum != nullptr ? blk.col_sum + kPanel : nullptr;
  const PanelTerms t0 = LoadTerms<kOp>(blk.col_sum, blk.col_scale, blk.bias, blk.mask0);
  const PanelTerms t1 = kTwo ? LoadTerms<kOp>(sum1, blk.col_scale + kPanel, bias1, blk.mask1) : t0;
  // blk's fields in locals too: read through blk, they were read again after every store.
  const __mmask16 mask0 = blk.mask0, mask1 = blk.mask1;
  const int32_t* const zeros = blk.zero;
  const float* const row_scale = blk.row_scale;
#define QUIVER_STORE(i)                                                                          \
  if constexpr (R > (i)) {                                                                       \
    const __m512i z = kOp == Op::kDpbusd ? _mm512_set1_epi32(zeros[i]) : _mm512_setzero_si512(); \
    const __m512 rs = _mm512_set1_ps(row_scale[i]);                                              \
    StoreRow<kOp>(c##i##a, z, rs, t0, y + (i)*ldy, mask0);                                       \
    if constexpr (kTwo) StoreRow<kOp>(c##i##b, z, rs, t1, y + (i)*ldy + kPanel, mask1);          \
  }
  QUIVER_ROWS(QUIVER_STORE)
#undef QUIVER_STORE
#undef QUIVER_ROWS
}

using Kernel = void (*)(const int32_t*, int64_t, const Block&, float*, int64_t);

template <bool kTwo, Op kOp, bool kPacked, int... R>
constexpr std::array<Kernel, sizeof...(R)> MakeTable(std::integer_sequence<int, R...>) {
  return {&MicroKernel<R + 1, kTwo, kOp, kPacked>...};
}

template <bool kTwo, Op kOp, bool kPacked>
constexpr auto kTable = MakeTable<kTwo, kOp, kPacked>(std::make_integer_sequence<int, kRows>());

template <Op kOp>
const std::array<Kernel, kRows>& Table(bool two, bool packed) {
  if (packed) return two ? kTable<true, kOp, true> : kTable<false, kOp, true>;
  return two ? kTable<true, kOp, false> : kTable<false, kOp, false>;
}

// As in gemm_avx512.cc: packing the rows pays where a call spans many columns.
constexpr int64_t kMinPackedCols = 8 * kPanel;

// The product over rows of `steps` 4-byte words each (row stride lda words), for ops of kOp.
template <Op kOp>
void Run(const int32_t* a, int64_t lda, int64_t steps, const float* scale, const int32_t* zero,
         const QuantizedWeights& w, const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0,
         int64_t c1) {
  // The rows' words packed per block of 13 rows as [steps][13]: the broadcasts read one
  // sequential stream, not 13 strided ones (the packing is a bitwise copy).
  const bool pack = c1 - c0 >= kMinPackedCols;
  thread_local std::vector<int32_t> packed;
  if (pack) {
    packed.resize(static_cast<size_t>((m + kRows - 1) / kRows * kRows * steps));
    for (int64_t r = 0; r < m; r += kRows) {
      PackRowsAvx512(reinterpret_cast<const float*>(a + r * lda), lda, std::min(kRows, m - r),
                     steps, reinterpret_cast<float*>(packed.data() + r * steps), kRows);
    }
  }
  const std::array<Kernel, kRows>& one = Table<kOp>(false, pack);
  const std::array<Kernel, kRows>& two = Table<kOp>(true, pack);
  for (int64_t col = c0; col < c1; col += 2 * kPanel) {
    const int64_t cols = std::min(2 * kPanel, c1 - col);
    const bool both = cols > kPanel;
    Block blk;
    blk.b0 = kOp == Op::kDpbusd ? w.quad_panel(col / kPanel) : w.panel(col / kPanel);
    blk.b1 = both
                 ? (kOp == Op::kDpbusd ? w.quad_panel(col / kPanel + 1) : w.panel(col / kPanel + 1))
                 : blk.b0;
    blk.steps = steps;
    blk.col_scale = w.scales() + col;
    blk.col_sum = zero != nullptr ? w.column_sums() + col : nullptr;
    blk.bias = bias != nullptr ? bias + col : nullptr;
    blk.mask0 = static_cast<__mmask16>((1u << std::min(cols, kPanel)) - 1);
    blk.mask1 = static_cast<__mmask16>(both ? (1u << (cols - kPanel)) - 1 : 0);
    const std::array<Kernel, kRows>& table = both ? two : one;
    for (int64_t r = 0; r < m; r += kRows) {
      blk.row_scale = scale + r;
      blk.zero = zero != nullptr ? zero + r : nullptr;
      const int32_t* rows = pack ? packed.data() + r * steps : a + r * lda;
      table[std::min(kRows, m - r) - 1](rows, lda, blk, y + r * ldy + col, ldy);
    }
  }
}

}  // namespace

QUIVER_TARGET_AVX512 void Int8EpilogueRowsAvx512(const int32_t* sums, int64_t rows,
                                                 const int32_t* zero, const int32_t* col_sum,
                                                 const float* row_scale, const float* col_scale,
                                                 const float* bias, float* y, int64_t ldy,
                                                 uint16_t mask) {
  const auto m = static_cast<__mmask16>(mask);
  const PanelTerms t = LoadTerms<Op::kDpbusd>(col_sum, col_scale, bias, m);
  for (int64_t i = 0; i < rows; ++i) {
    StoreRow<Op::kDpbusd>(_mm512_load_si512(sums + i * kPanel), _mm512_set1_epi32(zero[i]),
                          _mm512_set1_ps(row_scale[i]), t, y + i * ldy, m);
  }
}

void QuantizedGemmAvx512(const int16_t* q, const float* scale, const QuantizedWeights& w,
                         const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0,
                         int64_t c1, bool vnni) {
  const int64_t pairs = w.k_pairs();
  const auto* a = reinterpret_cast<const int32_t*>(q);  // each int16 pair as one word
  if (vnni) {
    Run<Op::kDpwssd>(a, pairs, pairs, scale, nullptr, w, bias, y, ldy, m, c0, c1);
  } else {
    Run<Op::kMaddwd>(a, pairs, pairs, scale, nullptr, w, bias, y, ldy, m, c0, c1);
  }
}

void QuantizedGemmU8Avx512(const uint8_t* u, const int32_t* zero, const float* scale,
                           const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                           int64_t m, int64_t c0, int64_t c1) {
  const int64_t quads = w.quad_depth() / 4;
  Run<Op::kDpbusd>(reinterpret_cast<const int32_t*>(u), quads, quads, scale, zero, w, bias, y, ldy,
                   m, c0, c1);
}

// The row two after r while r1 is past it, else null: rows a thread quantizes often come from
// L3 (a batch's activations, a layer's input), and perf showed the range's first loads of each
// row waiting on them (6% of an int8 batch of 100 x 128 tokens on the Xeon of
// docs/benchmarks.md, the avx512_vnni path); one row ahead of the row being read is too close.
inline const float* RowAhead(const float* x, int64_t ldx, int64_t r, int64_t r1) {
  return r + 2 < r1 ? x + (r + 2) * ldx : nullptr;
}

QUIVER_TARGET_AVX512 void RowRangeAvx512(const float* row, int64_t k, float* lo, float* hi) {
  // Four pairs of accumulators, 64 values a step: one pair waits on vminps' latency every 16
  // values (a 1536-wide row took 2.3% of int8's time at 100 x 128 tokens on Zen 5).
  __m512 least[4], most[4];
  for (int j = 0; j < 4; ++j) least[j] = most[j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    for (int64_t j = 0; j < 4; ++j) {
      const __m512 v = _mm512_loadu_ps(row + i + 16 * j);
      // min(v, acc) gives acc where v is NaN: NaNs are skipped, as in QuantizeRows.
      least[j] = _mm512_min_ps(v, least[j]);
      most[j] = _mm512_max_ps(v, most[j]);
    }
  }
  for (; i < k; i += 16) {
    const auto mask = static_cast<__mmask16>(k - i >= 16 ? 0xffff : (1u << (k - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(mask, row + i);  // zeros past k: within [lo, hi]
    least[0] = _mm512_min_ps(v, least[0]);
    most[0] = _mm512_max_ps(v, most[0]);
  }
  // A minimum and a maximum: the same in any order (a -0 never enters an accumulator that
  // starts at +0, which only a smaller or a larger value replaces).
  least[0] = _mm512_min_ps(_mm512_min_ps(least[0], least[1]), _mm512_min_ps(least[2], least[3]));
  most[0] = _mm512_max_ps(_mm512_max_ps(most[0], most[1]), _mm512_max_ps(most[2], most[3]));
  *lo = _mm512_reduce_min_ps(least[0]);
  *hi = _mm512_reduce_max_ps(most[0]);
}

// p = clamp(nearbyint(x · inv), -zero, 255 - zero) for 16 values (masked loads read zeros).
QUIVER_TARGET_AVX512 inline __m512i QuantizeStep(const float* x, __mmask16 mask,
                                                 const RowQuantization& rq) {
  // Round to nearest even (the MXCSR default), as QuantizeRows.
  const __m512i p =
      _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x), _mm512_set1_ps(rq.inv)));
  return _mm512_min_epi32(_mm512_max_epi32(p, _mm512_set1_epi32(-rq.zero)),
                          _mm512_set1_epi32(255 - rq.zero));
}

QUIVER_TARGET_AVX512 void QuantizeRowsAvx512(const float* x, int64_t ldx, int64_t k, int64_t r0,
                                             int64_t r1, int16_t* q, float* scale) {
  const int64_t width = (k + 1) / 2 * 2;
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * ldx;
    int16_t* out = q + r * width;
    float lo, hi;
    RowRangeAvx512(row, k, &lo, &hi);
    const RowQuantization rq = QuantizeRange(lo, hi);
    scale[r] = rq.scale;
    if (rq.inv == 0.0f) {  // zeros, written: x · 0 is NaN for an infinite x
      std::fill(out, out + width, int16_t{0});
      continue;
    }
    const float* ahead = RowAhead(x, ldx, r, r1);
    for (int64_t i = 0; i < k; i += 16) {
      if (ahead != nullptr) _mm_prefetch(reinterpret_cast<const char*>(ahead + i), _MM_HINT_T0);
      const auto mask = static_cast<__mmask16>(k - i >= 16 ? 0xffff : (1u << (k - i)) - 1);
      _mm256_mask_storeu_epi16(out + i, mask,
                               _mm512_cvtepi32_epi16(QuantizeStep(row + i, mask, rq)));
    }
    if (width > k) out[k] = 0;
  }
}

QUIVER_TARGET_AVX512 void QuantizeRowsU8Avx512(const float* x, int64_t ldx, int64_t k,
                                               int64_t depth, int64_t r0, int64_t r1, uint8_t* u,
                                               int32_t* zero, float* scale) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * ldx;
    uint8_t* out = u + r * depth;
    float lo, hi;
    RowRangeAvx512(row, k, &lo, &hi);
    const RowQuantization rq = QuantizeRange(lo, hi);
    scale[r] = rq.scale;
    zero[r] = rq.zero;
    if (rq.inv == 0.0f) {  // zeros, written: x · 0 is NaN for an infinite x
      std::fill(out, out + depth, uint8_t{0});
      continue;
    }
    const __m512i z = _mm512_set1_epi32(rq.zero);
    // The row after next into L1 meanwhile (RowAhead).
    const float* ahead = RowAhead(x, ldx, r, r1);
    int64_t i = 0;
    // 64 values a step where k has them: p + z for each, clamped to [0, 255] by the saturating
    // packs (int32 to int16, then to unsigned bytes), which is the clamp of p to [-z, 255 - z]
    // then + z below (|p| is far from int32's limits: x · inv is within the row's range, bar
    // rounding; a NaN's p is INT_MIN, 0 either way); the packs interleave 128-bit lanes, one
    // permutation puts the bytes back in order. Fewer operations than four of the steps below.
    const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    const __m512 inv = _mm512_set1_ps(rq.inv);
    for (; i + 64 <= k; i += 64) {
      if (ahead != nullptr) {
        for (int j = 0; j < 64; j += 16) {
          _mm_prefetch(reinterpret_cast<const char*>(ahead + i + j), _MM_HINT_T0);
        }
      }
      __m512i p[4];
      for (int64_t j = 0; j < 4; ++j) {
        p[j] = _mm512_add_epi32(
            _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(row + i + 16 * j), inv)), z);
      }
      const __m512i words01 = _mm512_packs_epi32(p[0], p[1]);
      const __m512i words23 = _mm512_packs_epi32(p[2], p[3]);
      const __m512i bytes = _mm512_packus_epi16(words01, words23);
      _mm512_storeu_si512(out + i, _mm512_permutexvar_epi32(order, bytes));
    }
    for (; i < depth; i += 16) {
      if (ahead != nullptr && i < k) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + i), _MM_HINT_T0);
      }
      const __mmask16 mask =
          k - i >= 16 ? __mmask16(0xffff) : __mmask16(k > i ? (1u << (k - i)) - 1 : 0);
      // u = p + z in [0, 255]; past k, 0 (the weights there are 0 too).
      const __m512i v = _mm512_maskz_add_epi32(mask, QuantizeStep(row + i, mask, rq), z);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(v));
    }
  }
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no avx512 path)

namespace quiver::engine::cpu {
void QuantizedGemmAvx512(const int16_t* q, const float* scale, const QuantizedWeights& w,
                         const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0,
                         int64_t c1, bool) {
  QuantizedGemm(q, scale, w, bias, y, ldy, m, c0, c1);
}
void RowRangeAvx512(const float*, int64_t, float*, float*) { std::abort(); }
void QuantizeRowsAvx512(const float*, int64_t, int64_t, int64_t, int64_t, int16_t*, float*) {
  std::abort();  // the avx512 paths exist on x86-64 only
}
void QuantizeRowsU8Avx512(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, uint8_t*,
                          int32_t*, float*) {
  std::abort();
}
void QuantizedGemmU8Avx512(const uint8_t*, const int32_t*, const float*, const QuantizedWeights&,
                           const float*, float*, int64_t, int64_t, int64_t, int64_t) {
  std::abort();
}
}  // namespace quiver::engine::cpu

#endif
