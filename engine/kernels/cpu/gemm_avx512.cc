// PackedGemm on AVX-512 F (isa_paths.h): the panels of gemm.h two at a time, 14 rows x 32
// columns of y in 28 zmm accumulators; per k, two weight loads and 14 broadcasts feed 28 fused
// multiply-adds. Each element still starts from its bias (or from y) and adds its products in k
// order with one rounding each, as the AVX2 kernel does: the two give the same bits.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace quiver::engine::cpu {
namespace {

constexpr int64_t kPanel = PackedWeights::kPanel;
constexpr int64_t kRows = 14;    // rows of y per micro-kernel call
constexpr int64_t kDepth = 512;  // k per pass (measured best of 128-768 on a Xeon with AMX)

// y[0, R) x one or two panels (kTwo) over k in [0, kc): from `init` (32 values: the bias or
// zeros) on the first pass, else from y; mask0 / mask1 select each panel's columns that exist.
// Then the next `strips` - 1 strips of R rows below (x's rows and y's R further on): one call
// for a column's whole strips, the next strip's products starting while the last one's sums
// are stored (measured: Q·Kᵀ's 32-deep products 4% faster, docs/benchmarks.md). Meanwhile the
// 64-byte lines [pf, pf + 64 · pf_lines), and the same pf_stride bytes on (the next pair's two
// panels), are prefetched into L2, shared out over the strips, a line of each per k from each
// strip's first (none when pf_lines is 0).
// Accumulators are named variables: GCC keeps an array of vectors on the stack.
template <int R, bool kTwo, bool kPacked>
QUIVER_TARGET_AVX512 void MicroKernel(const float* a, int64_t lda, const float* b0, const float* b1,
                                      int64_t kc, float* y, int64_t ldy, const float* init,
                                      __mmask16 mask0, __mmask16 mask1, int64_t strips,
                                      const char* pf, int64_t pf_stride, int64_t pf_lines) {
  const int64_t a_step = kPacked ? kRows * kc : R * lda;
  for (int64_t strip = 0; strip < strips; ++strip, a += a_step, y += R * ldy) {
    const int64_t from = pf_lines * strip / strips, to = pf_lines * (strip + 1) / strips;
    const char* const pf_strip = pf + 64 * from;
    const int64_t pf_count = to - from;
    const __m512 zero = _mm512_setzero_ps();
    __m512 c0a = zero, c0b = zero, c1a = zero, c1b = zero, c2a = zero, c2b = zero, c3a = zero,
           c3b = zero, c4a = zero, c4b = zero, c5a = zero, c5b = zero, c6a = zero, c6b = zero,
           c7a = zero, c7b = zero, c8a = zero, c8b = zero, c9a = zero, c9b = zero, c10a = zero,
           c10b = zero, c11a = zero, c11b = zero, c12a = zero, c12b = zero, c13a = zero,
           c13b = zero;
#define QUIVER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define QUIVER_LOAD(i)                                                                  \
  if constexpr (R > (i)) {                                                              \
    if (init != nullptr) {                                                              \
      c##i##a = _mm512_loadu_ps(init);                                                  \
      if constexpr (kTwo) c##i##b = _mm512_loadu_ps(init + kPanel);                     \
    } else {                                                                            \
      c##i##a = _mm512_maskz_loadu_ps(mask0, y + (i)*ldy);                              \
      if constexpr (kTwo) c##i##b = _mm512_maskz_loadu_ps(mask1, y + (i)*ldy + kPanel); \
    }                                                                                   \
  }
    QUIVER_ROWS(QUIVER_LOAD)
#undef QUIVER_LOAD
    // Two k per iteration (the same order of operations): on the Xeon reporting CPUID model 167
    // the kernel alone, its data in L1 and L2, ran at 0.86 of the FMA units' rate, 0.91 with two
    // and 0.85 with four; the whole model's f32 throughput 1.016-1.022x (docs/benchmarks.md).
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; ++k) {
      const __m512 w0 = _mm512_load_ps(b0 + k * kPanel);
      const __m512 w1 = kTwo ? _mm512_load_ps(b1 + k * kPanel) : w0;
      if (k < pf_count) {
        _mm_prefetch(pf_strip + 64 * k, _MM_HINT_T1);
        _mm_prefetch(pf_strip + pf_stride + 64 * k, _MM_HINT_T1);
      }
#define QUIVER_FMA(i)                                                               \
  if constexpr (R > (i)) {                                                          \
    const __m512 x = _mm512_set1_ps(kPacked ? a[k * kRows + (i)] : a[(i)*lda + k]); \
    c##i##a = _mm512_fmadd_ps(x, w0, c##i##a);                                      \
    if constexpr (kTwo) c##i##b = _mm512_fmadd_ps(x, w1, c##i##b);                  \
  }
      QUIVER_ROWS(QUIVER_FMA)
#undef QUIVER_FMA
    }
#define QUIVER_STORE(i)                                                              \
  if constexpr (R > (i)) {                                                           \
    _mm512_mask_storeu_ps(y + (i)*ldy, mask0, c##i##a);                              \
    if constexpr (kTwo) _mm512_mask_storeu_ps(y + (i)*ldy + kPanel, mask1, c##i##b); \
  }
    QUIVER_ROWS(QUIVER_STORE)
#undef QUIVER_STORE
#undef QUIVER_ROWS
  }
}

using Kernel = void (*)(const float*, int64_t, const float*, const float*, int64_t, float*, int64_t,
                        const float*, __mmask16, __mmask16, int64_t, const char*, int64_t, int64_t);

template <bool kTwo, bool kPacked, int... R>
constexpr std::array<Kernel, sizeof...(R)> MakeTable(std::integer_sequence<int, R...>) {
  return {&MicroKernel<R + 1, kTwo, kPacked>...};
}

template <bool kTwo, bool kPacked>
constexpr auto kTable = MakeTable<kTwo, kPacked>(std::make_integer_sequence<int, kRows>());

// Whether to pack x's rows for a call over `cols` columns. Packing costs about as much per
// element as a few columns of products, and what it saves depends on x's row stride: rows a
// multiple of 2 KiB apart (ldx a multiple of 512 floats: the feed-forward's 1536-wide
// intermediate) fall on the same two sets of L1, where 14 strided
// broadcast streams can evict each other, so there it pays from 256 columns (the feed-forward's
// down projection over whole rows); other strides run the strided kernel as fast as the packed
// one, so packing pays only over whole rows of a wide layer (1,024 columns and up). Measured in
// one process, the two rules alternating (docs/benchmarks.md): 128 columns for every stride ran
// batch-1 1.4% slower at 128 tokens and 0.8-1.3% at 512.
bool PackRows(int64_t cols, int64_t ldx) { return cols >= (ldx % 512 == 0 ? 16 : 64) * kPanel; }

}  // namespace

// out[kk · out_rows + i] = x[i · ldx + kk] for rows i < `rows` (<= out_rows <= 16) and kk < kc, 16
// k at a time through a 16 x 16 transpose in registers (rows past `rows` read as zeros; out's rows
// past out_rows are not written). A copy, bit for bit (no arithmetic): the products see the same
// values, and int32 data may pass through it as floats.
QUIVER_TARGET_AVX512 void PackRowsAvx512(const float* x, int64_t ldx, int64_t rows, int64_t kc,
                                         float* out, int64_t out_rows) {
  for (int64_t kk = 0; kk < kc; kk += 16) {
    const int64_t n = std::min<int64_t>(16, kc - kk);
    const auto load_mask = static_cast<__mmask16>(n == 16 ? 0xffff : (1u << n) - 1);
    __m512 r[16], t[16];
    for (int i = 0; i < 16; ++i) {
      r[i] = i < rows ? _mm512_maskz_loadu_ps(load_mask, x + i * ldx + kk) : _mm512_setzero_ps();
    }
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
      r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
      r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
      r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; ++i) {
      t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
      t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
      t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
      t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 8; ++i) {
      r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
      r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
    const auto row_mask = static_cast<__mmask16>((1u << out_rows) - 1);
    for (int j = 0; j < n; ++j) _mm512_mask_storeu_ps(out + (kk + j) * out_rows, row_mask, r[j]);
  }
}

void PackedGemmAvx512(const float* x, int64_t ldx, const PackedWeights& w, int64_t k_begin,
                      int64_t k_end, const float* bias, float* y, int64_t ldy, int64_t m,
                      int64_t c0, int64_t c1, bool accumulate) {
  const int64_t k = k_end - k_begin;
  const bool pack = PackRows(c1 - c0, ldx);
  // x's rows for one k pass, packed per micro-kernel call (KernelRows) as [k][14] (GotoBLAS'
  // packed A): the micro-kernel's broadcasts then read one sequential stream, not 14 strided
  // ones.
  thread_local std::vector<float> packed;
  if (pack) {
    packed.resize(static_cast<size_t>((m + kRows - 1) / kRows * kRows * std::min(kDepth, k)));
  }
  alignas(64) static constexpr float kZeros[2 * kPanel] = {};
  alignas(64) float first[2 * kPanel];
  // k0 counts from the slice's start: x's column k0 meets W's depth k_begin + k0.
  for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
    const int64_t kc = std::min(kDepth, k - k0);
    if (pack) {  // call j's rows at packed + j · kRows · kc
      for (int64_t r = 0, j = 0, rows = 0; r < m; r += rows, ++j) {
        rows = KernelRows(m, r, kRows);
        PackRowsAvx512(x + r * ldx + k0, ldx, rows, kc, packed.data() + j * kRows * kc, kRows);
      }
    }
    for (int64_t col = c0; col < c1; col += 2 * kPanel) {
      const int64_t cols = std::min(2 * kPanel, c1 - col);
      const bool two = cols > kPanel;
      const float* b0 = w.panel(col / kPanel) + (k_begin + k0) * kPanel;
      const float* b1 = two ? w.panel(col / kPanel + 1) + (k_begin + k0) * kPanel : nullptr;
      const auto mask0 = static_cast<__mmask16>((1u << std::min(cols, kPanel)) - 1);
      const auto mask1 = static_cast<__mmask16>(two ? (1u << (cols - kPanel)) - 1 : 0);
      const float* init = nullptr;  // later passes continue from y
      if (k0 == 0 && !accumulate) {
        // Without a bias, constant zeros: zeros stored just before the micro-kernel's loads
        // kept those loads waiting (Bf16GemmAvx512 says how much).
        init = kZeros;
        if (bias != nullptr) {
          std::fill(first, first + 2 * kPanel, 0.0f);
          std::copy(bias + col, bias + col + cols, first);
          init = first;
        }
      }
      const auto& table = pack ? (two ? kTable<true, true> : kTable<false, true>)
                               : (two ? kTable<true, false> : kTable<false, false>);
      // The whole strips of kRows in one call, then KernelRows' last one or two.
      const int64_t whole = WholeKernelRowCalls(m, kRows);
      // Streamed weights (gemm.h): the next pair (or the first of the next pass) is prefetched
      // while this one works, for m of StreamedPrefetchMinRows() or more (cpu_features.h: the
      // rule differs by vendor). A lone last panel prefetches its own lines twice (pf_stride 0).
      const char* next = nullptr;
      int64_t next_lines = 0, pf_stride = 0;
      if (w.streamed() && m >= StreamedPrefetchMinRows()) {
        const int64_t next_col = col + 2 * kPanel < c1 ? col + 2 * kPanel : c0;
        const int64_t next_k = next_col == c0 ? k0 + kDepth : k0;
        if (next_k < k) {
          next = reinterpret_cast<const char*>(w.panel(next_col / kPanel) +
                                               (k_begin + next_k) * kPanel);
          next_lines = std::min(kDepth, k - next_k);
          if (next_col + kPanel < c1) {
            pf_stride = w.k() * kPanel * static_cast<int64_t>(sizeof(float));
          }
        }
      }
      // The lines shared out over every strip: strip s asks for [share(s), share(s + 1)).
      const int64_t strips = whole + CallsAfterWhole(m, kRows);
      auto share = [&](int64_t s) { return next_lines * s / strips; };
      if (whole > 0) {
        table[kRows - 1](pack ? packed.data() : x + k0, ldx, b0, b1, kc, y + col, ldy, init, mask0,
                         mask1, whole, next, pf_stride, share(whole));
      }
      for (int64_t r = whole * kRows, j = whole, rows = 0; r < m; r += rows, ++j) {
        rows = KernelRows(m, r, kRows);
        const float* a = pack ? packed.data() + j * kRows * kc : x + r * ldx + k0;
        table[rows - 1](a, ldx, b0, b1, kc, y + r * ldy + col, ldy, init, mask0, mask1, 1,
                        next == nullptr ? nullptr : next + 64 * share(j), pf_stride,
                        share(j + 1) - share(j));
      }
    }
  }
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no avx512 path)

namespace quiver::engine::cpu {
void PackedGemmAvx512(const float*, int64_t, const PackedWeights&, int64_t, int64_t, const float*,
                      float*, int64_t, int64_t, int64_t, int64_t, bool) {
  std::abort();
}
void PackRowsAvx512(const float*, int64_t, int64_t, int64_t, float*, int64_t) { std::abort(); }
}  // namespace quiver::engine::cpu

#endif
