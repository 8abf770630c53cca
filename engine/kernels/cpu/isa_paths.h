// The wider paths' bodies of PackedGemm (gemm.h), QuantizedGemm (gemm_int8.h) and the GELU
// (vec.h), private to engine/kernels/cpu: each has its caller's contract and gives the same numbers
// bit for bit (cpu_features.h). They are compiled for the default target with their own functions
// marked for the wider one (__attribute__((target))), so no template or inline function shared with
// the rest of the binary is ever emitted with instructions an older host lacks; they run only
// where ActiveCpuPath() allows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/kernels/cpu/gemm.h"
#include "engine/kernels/cpu/gemm_bf16.h"
#include "engine/kernels/cpu/gemm_int8.h"

// What the wider paths' functions are compiled for, one function at a time.
#define QUIVER_TARGET_AVX_VNNI __attribute__((target("avx2,fma,avxvnni")))
#define QUIVER_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define QUIVER_TARGET_AVX512_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define QUIVER_TARGET_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define QUIVER_TARGET_AMX \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-int8")))
#define QUIVER_TARGET_AMX_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")))

namespace quiver::engine::cpu {

// A row's quantization (gemm_int8.h) from its least and greatest values lo <= 0 <= hi: the
// inverse step 255 / (hi - lo), the step (the row's scale) and the zero point; all three 0 where
// the range is 0 or the inverse not finite (the row then quantizes as zeros). Every path
// quantizes through this, then p = clamp(nearbyint(x · inv), -zero, 255 - zero).
struct RowQuantization {
  float inv = 0.0f, scale = 0.0f;
  int32_t zero = 0;
};
inline RowQuantization QuantizeRange(float lo, float hi) {
  const float range = hi - lo;
  const float inv = 255.0f / range;
  if (!(range > 0.0f) || !std::isfinite(range) || !std::isfinite(inv)) return {};
  return {inv, range / 255.0f,
          static_cast<int32_t>(std::clamp(std::nearbyint(-lo * inv), 0.0f, 255.0f))};
}

// The rows of the micro-kernel call that starts at row r of m, for kernels of up to `block`
// rows: `block` each, but where m leaves fewer than block / 2 rows over, the last two calls share
// the last block + (m mod block) rows evenly (128 rows of 14: 8 + 8 at the end, not 14 + 2; a
// 2-row call makes 4 multiply-adds per 4 loads, and cost 1.4x a 14-row call's time per row in
// f32 batch-1 at 128 tokens on Zen 4, perf). Which call computes a row never changes its result.
inline bool KernelRowsSplitTheLastBlock(int64_t m, int64_t block) {
  const int64_t rem = m % block;
  return !(rem == 0 || 2 * rem >= block || m < block);
}
inline int64_t KernelRows(int64_t m, int64_t r, int64_t block) {
  if (!KernelRowsSplitTheLastBlock(m, block)) return std::min(block, m - r);
  const int64_t rem = m % block;
  const int64_t shared = m - block - rem;  // where the last two calls begin
  if (r < shared) return block;
  return r == shared ? (block + rem + 1) / 2 : m - r;
}
// How many calls from row 0 take a whole `block` rows (KernelRows' leading ones).
inline int64_t WholeKernelRowCalls(int64_t m, int64_t block) {
  return m / block - (KernelRowsSplitTheLastBlock(m, block) ? 1 : 0);
}

// How many calls KernelRows makes after the whole ones: 0, 1, or 2 where it splits the last block.
inline int64_t CallsAfterWhole(int64_t m, int64_t block) {
  if (KernelRowsSplitTheLastBlock(m, block)) return 2;
  return m % block == 0 ? 0 : 1;
}

// AVX-512 F: R x 32 blocks of y (two panels at a time, 14 rows), the products in k order; over
// W's depth [k_begin, k_end) as PackedGemmSlice.
void PackedGemmAvx512(const float* x, int64_t ldx, const PackedWeights& w, int64_t k_begin,
                      int64_t k_end, const float* bias, float* y, int64_t ldy, int64_t m,
                      int64_t c0, int64_t c1, bool accumulate);

// out[kk · out_rows + i] = x[i · ldx + kk] for i < rows <= out_rows <= 16, kk < kc (GotoBLAS'
// packed A): a bitwise copy through a 16 x 16 register transpose.
void PackRowsAvx512(const float* x, int64_t ldx, int64_t rows, int64_t kc, float* out,
                    int64_t out_rows);

// AVX-512 BW (vpmaddwd + vpaddd) or, with `vnni`, AVX-512 VNNI (vpdpwssd): the int16 x int8
// products of gemm_int8.h 32 columns at a time.
void QuantizedGemmAvx512(const int16_t* q, const float* scale, const QuantizedWeights& w,
                         const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0,
                         int64_t c1, bool vnni);

// The least and greatest of a row's k values and 0 (lo <= 0 <= hi), on 16 lanes; NaNs skipped.
void RowRangeAvx512(const float* row, int64_t k, float* lo, float* hi);

// QuantizeRows (gemm_int8.h) on 16 lanes: the same values and scales.
void QuantizeRowsAvx512(const float* x, int64_t ldx, int64_t k, int64_t r0, int64_t r1, int16_t* q,
                        float* scale);

// QuantizeRowsU8 and QuantizedGemmU8 (gemm_int8.h) on AVX2 + AVX-VNNI (the avx2_vnni path,
// gemm_int8_avxvnni.cc): the same bytes and bits as the AVX-512 VNNI ones below.
void QuantizeRowsU8AvxVnni(const float* x, int64_t ldx, int64_t k, int64_t depth, int64_t r0,
                           int64_t r1, uint8_t* u, int32_t* zero, float* scale);
void QuantizedGemmU8AvxVnni(const uint8_t* u, const int32_t* zero, const float* scale,
                            const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                            int64_t m, int64_t c0, int64_t c1);

// QuantizeRowsU8 and QuantizedGemmU8 (gemm_int8.h): AVX-512 VNNI.
void QuantizeRowsU8Avx512(const float* x, int64_t ldx, int64_t k, int64_t depth, int64_t r0,
                          int64_t r1, uint8_t* u, int32_t* zero, float* scale);
void QuantizedGemmU8Avx512(const uint8_t* u, const int32_t* zero, const float* scale,
                           const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                           int64_t m, int64_t c0, int64_t c1);

// The avx512_vnni path's f32 epilogue (y = (sum - zero · col_sum) · (row scale · column scale)
// + bias) for `rows` rows of one panel's 16 columns: sums [rows][16] int32, 64-byte aligned;
// the columns `mask` selects are stored. The amx path's byte products end with it: the same
// bits.
void Int8EpilogueRowsAvx512(const int32_t* sums, int64_t rows, const int32_t* zero,
                            const int32_t* col_sum, const float* row_scale, const float* col_scale,
                            const float* bias, float* y, int64_t ldy, uint16_t mask);

// AMX-INT8: QuantizedGemmU8 in tiles, one tdpbusd per step (unsigned bytes times the signed
// weights, the integers vpdpbusd gives) and Int8EpilogueRowsAvx512: the same bits. u must be
// readable for m rounded up to a multiple of 16 rows (what those rows hold does not matter).
void QuantizedGemmU8Amx(const uint8_t* u, const int32_t* zero, const float* scale,
                        const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                        int64_t m, int64_t c0, int64_t c1);
// Whether QuantizedGemmU8Amx gave vpdpbusd's bits on a fixed product, checked once per process
// (on a host with the amx path only): where not, a line on stderr, and QuantizedGemmU8 keeps to
// vpdpbusd.
bool AmxBytesAgree();

// The mask of a 16-column panel's first `cols` columns (all 16 from 16 on, none at 0 or below):
// what the bf16 kernels store of a partial panel.
inline uint16_t PanelColumnMask(int64_t cols) {
  return cols >= 16 ? uint16_t{0xFFFF}
                    : static_cast<uint16_t>((1u << std::max<int64_t>(cols, 0)) - 1);
}

// The operands of the AMX kernels' self-checks: weights [n, k], rows [m, k] and a bias [n] from
// a fixed linear congruential sequence (uniform in +-0.2, +-3 and +-1), the same in every process.
struct SelfCheckOperands {
  std::vector<float> w, x, bias;
  SelfCheckOperands(int64_t m, int64_t n, int64_t k, uint32_t seed);
};

// The tiles' configuration both AMX kernels use (palette 1, eight tiles of 16 rows x 64 bytes),
// loaded once per thread and kept: a kernel's call then starts with its products, not with
// ldtilecfg (attention calls the bf16 one per block of queries and keys).
void ConfigureTilesAmx();

// Bf16Gemm (gemm_bf16.h) by vdpbf16ps, the avx512 paths' bf16 products, and on AMX-BF16 tiles
// (tdpbf16ps; not vdpbf16ps's bits: gemm_bf16_amx.cc), with its contract.
void Bf16GemmAvx512(const uint16_t* a, const Bf16Weights& w, const float* bias, float* y,
                    int64_t ldy, int64_t m, int64_t c0, int64_t c1, bool accumulate);
void Bf16GemmAmx(const uint16_t* a, const Bf16Weights& w, const float* bias, float* y, int64_t ldy,
                 int64_t m, int64_t c0, int64_t c1, bool accumulate);
// Whether Bf16GemmAmx came within 1e-5 of Bf16GemmAvx512 on a fixed product, checked once per
// process: where not, a line on stderr, and the bf16 products keep to vdpbf16ps.
bool AmxBf16Agree();

// vec::GeluErf on 16 lanes (AVX-512 F): the same bits.
void GeluErfAvx512(float* x, int64_t n);
// vec::Max on 16 lanes in four chains (a maximum is exact: any order gives it; n >= 1).
float MaxAvx512(const float* x, int64_t n);
// vec::SoftmaxExp2Sum on 16 lanes (AVX-512 F): the same bits, the sum too (for x[i] · scale -
// shift up to 127; a softmax's are at most one rounding above 0).
float SoftmaxExp2SumAvx512(float* x, int64_t n, float scale, float shift);
// vec::SoftmaxExp2Rows on 16 lanes (AVX-512 F): the same bits.
void SoftmaxExp2RowsAvx512(float* x, int64_t ld, int64_t rows, int64_t n, float scale, float* shift,
                           float* sum);
// For attention's bf16 products (AVX512_BF16): 2^(x[i] · scale - shift) rounded to bf16 (nearest
// even) into out[0, n), and the sum of the f32 values (x is left as it was). 2^x by a degree-4
// polynomial, within 3e-6 of it (relative): a thousandth of the bf16 rounding that follows
// (2^-8), two operations fewer per 16 values than vec::SoftmaxExp2 (tests/engine/
// softmax_exp_test.cc holds both). Not the f32 path's bits, which nothing asks of it: only
// hosts with AVX512_BF16 run it, on every path they offer.
float SoftmaxExp2SumBf16Avx512(float* x, int64_t n, float scale, float shift, uint16_t* out);
// For attention's int16 products (gemm_int16.h): the same 2^x, each value (in [0, 1]) as
// round(2^x · limit) clamped to [0, limit] into out[0, n), and the sum of the f32 values.
float SoftmaxExp2SumInt16Avx512(const float* x, int64_t n, float scale, float shift, int32_t limit,
                                int16_t* out);
// The same for a block's `rows` rows of n values at once (x's rows n apart, out's out_ld): for
// each row r, shift[r] = max(shift[r], scale · the row's largest value), then
// SoftmaxExp2SumInt16Avx512 of the row from it into out's row r and sum[r]: the same bits as row by
// row, two rows' steps interleaved (vec::SoftmaxExp2Rows says why).
void SoftmaxExp2RowsInt16Avx512(const float* x, int64_t rows, int64_t n, float scale, float* shift,
                                int32_t limit, int16_t* out, int64_t out_ld, float* sum);

}  // namespace quiver::engine::cpu
