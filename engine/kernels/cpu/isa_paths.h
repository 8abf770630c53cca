// The wider paths' bodies of PackedGemm (gemm.h), QuantizedGemm (gemm_int8.h) and the GELU
// (vec.h), private to engine/kernels/cpu: each has its caller's contract and gives the same numbers
// bit for bit (cpu_features.h). They are compiled for the default target with their own functions
// marked for the wider one (__attribute__((target))), so no template or inline function shared with
// the rest of the binary is ever emitted with instructions an older host lacks; they run only
// where ActiveCpuPath() allows.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/kernels/cpu/gemm.h"
#include "engine/kernels/cpu/gemm_int8.h"

// What the wider paths' functions are compiled for, one function at a time.
#define QUIVER_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define QUIVER_TARGET_AVX512_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define QUIVER_TARGET_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define QUIVER_TARGET_AMX \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-int8")))

namespace quiver::engine::cpu {

// A row's quantization (gemm_int8.h) from its largest magnitude: levels / amax, or 0 where that
// is not finite or amax is not positive (the row then quantizes as zeros; the int16 values must
// stay within [-levels, levels]); and the row's scale amax / levels (0 with it).
inline float ActivationInverse(float amax, int32_t levels) {
  const float inv = static_cast<float>(levels) / amax;
  return amax > 0.0f && std::isfinite(inv) && std::isfinite(amax) ? inv : 0.0f;
}
inline float ActivationScale(float amax, int32_t levels, float inv) {
  return inv > 0.0f ? amax / static_cast<float>(levels) : 0.0f;
}

// AVX-512 F: R x 32 blocks of y (two panels at a time, 12 rows), the products in k order.
void PackedGemmAvx512(const float* x, int64_t ldx, const PackedWeights& w, const float* bias,
                      float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1, bool accumulate);

// out[kk · out_rows + i] = x[i · ldx + kk] for i < rows <= out_rows <= 16, kk < kc (GotoBLAS'
// packed A): a bitwise copy through a 16 x 16 register transpose.
void PackRowsAvx512(const float* x, int64_t ldx, int64_t rows, int64_t kc, float* out,
                    int64_t out_rows);

// AVX-512 BW (vpmaddwd + vpaddd) or, with `vnni`, AVX-512 VNNI (vpdpwssd): the int16 x int8
// products of gemm_int8.h 32 columns at a time.
void QuantizedGemmAvx512(const int16_t* q, const float* scale, const QuantizedWeights& w,
                         const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0,
                         int64_t c1, bool vnni);

// QuantizeRows (gemm_int8.h) on 16 lanes: the same values and scales.
void QuantizeRowsAvx512(const float* x, int64_t ldx, int64_t k, int32_t levels, int64_t r0,
                        int64_t r1, int16_t* q, float* scale);

// AMX-INT8: 16 x 16 tiles of int32 sums, each int16 activation split as 256 · hi + lo (hi a
// signed byte, lo an unsigned one) into two tile products, tdpbssd and tdpbusd; the integers
// are the same as the other paths' (exact), so is the f32 epilogue.
void QuantizedGemmAmx(const int16_t* q, const float* scale, const QuantizedWeights& w,
                      const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1);

// vec::GeluErf on 16 lanes (AVX-512 F): the same bits.
void GeluErfAvx512(float* x, int64_t n);
// vec::SoftmaxExpSum on 16 lanes (AVX-512 F): the same bits, the sum too.
float SoftmaxExpSumAvx512(float* x, int64_t n, float scale, float shift);

}  // namespace quiver::engine::cpu
