// The row-wise functions of vec.h on 16 lanes (isa_paths.h), for the avx512 paths: the same
// sequence of operations per element as the 8-lane versions, so the same bits.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "engine/kernels/cpu/isa_paths.h"
#include "engine/kernels/cpu/vec.h"

#if defined(__x86_64__)
// GCC 12 warns of the undefined source _mm512_extractf32x8_ps passes its builtin (a false
// positive, as in gemm_int8_avx512.cc).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace quiver::engine::cpu {
namespace {

// vec::SoftmaxExp2 on 16 lanes, without its upper clamp: vscalefps takes any n (2^n past 127 is
// infinity), where the 8-lane form builds 2^n in an exponent field. Up to 127, n is an integer in
// [-126, 127], so the scaling is the one rounding of the product p · 2^n that the 8-lane form's
// multiplication by the built power of two makes: the same bits.
QUIVER_TARGET_AVX512 inline __m512 SoftmaxExp2(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(vec::kExp2P[5]);
  for (int i = 4; i >= 0; --i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(vec::kExp2P[i]));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// t^j's coefficients of vec::kGeluPhi for each lane's interval i: the table of 8 in both halves
// of a register, so that the permutation's 4-bit index (0..7, or a NaN's 0) picks the same one.
QUIVER_TARGET_AVX512 inline __m512 GeluCoefficient(__m512i i, int j) {
  return _mm512_permutexvar_ps(i, _mm512_broadcast_f32x8(_mm256_loadu_ps(vec::kGeluPhi[j])));
}

// vec::Gelu on 16 lanes.
QUIVER_TARGET_AVX512 inline __m512 GeluErf(__m512 x) {
  const __m512 a =
      _mm512_min_ps(_mm512_set1_ps(vec::kGeluClamp), _mm512_andnot_ps(_mm512_set1_ps(-0.0f), x));
  const __m512 s = _mm512_mul_ps(a, _mm512_set1_ps(vec::kGeluIntervalsPerUnit));
  const __m512i i = _mm512_cvttps_epi32(s);
  const __m512 t = _mm512_sub_ps(s, _mm512_cvtepi32_ps(i));
  __m512 p = GeluCoefficient(i, vec::kGeluDegree);
  for (int j = vec::kGeluDegree - 1; j >= 0; --j) p = _mm512_fmadd_ps(p, t, GeluCoefficient(i, j));
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  p = _mm512_mask_sub_ps(p, negative, _mm512_set1_ps(1.0f), p);
  return _mm512_mul_ps(x, p);
}

// vec::Max on 16 lanes (MaxAvx512), inlined where rows are taken several at a time.
QUIVER_TARGET_AVX512 inline float RowMax(const float* x, int64_t n) {
  // Four independent chains: one chain waits a maximum's latency per vector.
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m0 = lowest, m1 = lowest, m2 = lowest, m3 = lowest;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
    m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + i + 32));
    m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + i + 48));
  }
  for (; i < n; i += 16) {
    const auto mask = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
    m0 = _mm512_mask_max_ps(m0, mask, m0, _mm512_maskz_loadu_ps(mask, x + i));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}

}  // namespace

QUIVER_TARGET_AVX512 void GeluErfAvx512(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, GeluErf(_mm512_loadu_ps(x + i)));
  if (i < n) {  // the tail through the same code, the lanes past n zero (vec::Map's way)
    const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(x + i, mask, GeluErf(_mm512_maskz_loadu_ps(mask, x + i)));
  }
}

QUIVER_TARGET_AVX512 float MaxAvx512(const float* x, int64_t n) { return RowMax(x, n); }

QUIVER_TARGET_AVX512 float SoftmaxExp2SumAvx512(float* x, int64_t n, float scale, float shift) {
  const __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = SoftmaxExp2(_mm512_fmsub_ps(_mm512_loadu_ps(x + i), vs, vm));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  return vec::SoftmaxExp2SumTail(x, i, n, _mm512_castps512_ps256(acc),
                                 _mm512_extractf32x8_ps(acc, 1), scale, shift);
}

QUIVER_TARGET_AVX512 void SoftmaxExp2RowsAvx512(float* x, int64_t ld, int64_t rows, int64_t n,
                                                float scale, float* shift, float* sum) {
  const __m512 vs = _mm512_set1_ps(scale);
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    float* const a = x + r * ld;
    float* const b = a + ld;
    const float ma = std::max(shift[r], scale * RowMax(a, n));
    const float mb = std::max(shift[r + 1], scale * RowMax(b, n));
    const __m512 vma = _mm512_set1_ps(ma), vmb = _mm512_set1_ps(mb);
    __m512 acc_a = _mm512_setzero_ps(), acc_b = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512 ea = SoftmaxExp2(_mm512_fmsub_ps(_mm512_loadu_ps(a + i), vs, vma));
      const __m512 eb = SoftmaxExp2(_mm512_fmsub_ps(_mm512_loadu_ps(b + i), vs, vmb));
      _mm512_storeu_ps(a + i, ea);
      _mm512_storeu_ps(b + i, eb);
      acc_a = _mm512_add_ps(acc_a, ea);
      acc_b = _mm512_add_ps(acc_b, eb);
    }
    sum[r] = vec::SoftmaxExp2SumTail(a, i, n, _mm512_castps512_ps256(acc_a),
                                     _mm512_extractf32x8_ps(acc_a, 1), scale, ma);
    sum[r + 1] = vec::SoftmaxExp2SumTail(b, i, n, _mm512_castps512_ps256(acc_b),
                                         _mm512_extractf32x8_ps(acc_b, 1), scale, mb);
    shift[r] = ma;
    shift[r + 1] = mb;
  }
  if (r < rows) {
    float* const a = x + r * ld;
    shift[r] = std::max(shift[r], scale * RowMax(a, n));
    sum[r] = SoftmaxExp2SumAvx512(a, n, scale, shift[r]);
  }
}

namespace {

// 2^x within 3e-6 (relative) for x <= 0, for values rounded to bf16 next: x = n + r (r exact),
// 2^r by a degree-4 polynomial fitted to 2^r's relative error on [-1/2, 1/2] for this project
// (2.9e-6 at most after f32 rounding; tools/golden/fit_exp2.py 4), 2^n by vscalefps. x is held
// above -126 so that -infinity gives 2^-126 (1e-38), not NaN; a NaN stays NaN.
QUIVER_TARGET_AVX512 inline __m512 Exp2ForBf16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-126.0f), x);  // x second: a NaN x is what max gives
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(9.5828529447e-03f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.5906426162e-02f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.4024099112e-01f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.9312417507e-01f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// One step of SoftmaxExp2SumBf16Avx512 over x[i, i + 16), lanes outside `mask` zero in the sum
// and not stored.
QUIVER_TARGET_AVX512_BF16 inline __m512 ExpBf16Step(const float* x, __mmask16 mask, __m512 scale,
                                                    __m512 shift, uint16_t* out, __m512 acc) {
  const __m512 e = _mm512_maskz_mov_ps(
      mask, Exp2ForBf16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(mask, x), scale, shift)));
  const __m256bh p = _mm512_cvtneps_pbh(e);
  _mm256_mask_storeu_epi16(out, mask, reinterpret_cast<const __m256i&>(p));
  return _mm512_add_ps(acc, e);
}

}  // namespace

QUIVER_TARGET_AVX512_BF16 float SoftmaxExp2SumBf16Avx512(float* x, int64_t n, float scale,
                                                         float shift, uint16_t* out) {
  const __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(shift);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = ExpBf16Step(x + i, 0xffff, vs, vm, out + i, acc0);
    acc1 = ExpBf16Step(x + i + 16, 0xffff, vs, vm, out + i + 16, acc1);
  }
  for (; i < n; i += 16) {
    const auto mask = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
    acc0 = ExpBf16Step(x + i, mask, vs, vm, out + i, acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

namespace {

// One step of SoftmaxExp2SumInt16Avx512 over x[i, i + 16), lanes outside `mask` zero in the sum
// and not stored.
QUIVER_TARGET_AVX512 inline __m512 ExpInt16Step(const float* x, __mmask16 mask, __m512 scale,
                                                __m512 shift, __m512 limit, __m512i top,
                                                int16_t* out, __m512 acc) {
  const __m512 e = _mm512_maskz_mov_ps(
      mask, Exp2ForBf16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(mask, x), scale, shift)));
  const __m512i q = _mm512_max_epi32(
      _mm512_setzero_si512(), _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(e, limit)), top));
  _mm256_mask_storeu_epi16(out, mask, _mm512_cvtepi32_epi16(q));
  return _mm512_add_ps(acc, e);
}

}  // namespace

QUIVER_TARGET_AVX512 float SoftmaxExp2SumInt16Avx512(const float* x, int64_t n, float scale,
                                                     float shift, int32_t limit, int16_t* out) {
  const __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(shift);
  const __m512 vl = _mm512_set1_ps(static_cast<float>(limit));
  const __m512i top = _mm512_set1_epi32(limit);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = ExpInt16Step(x + i, 0xffff, vs, vm, vl, top, out + i, acc0);
    acc1 = ExpInt16Step(x + i + 16, 0xffff, vs, vm, vl, top, out + i + 16, acc1);
  }
  for (; i < n; i += 16) {
    const auto mask = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
    acc0 = ExpInt16Step(x + i, mask, vs, vm, vl, top, out + i, acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

QUIVER_TARGET_AVX512 void SoftmaxExp2RowsInt16Avx512(const float* x, int64_t rows, int64_t n,
                                                     float scale, float* shift, int32_t limit,
                                                     int16_t* out, int64_t out_ld, float* sum) {
  const __m512 vs = _mm512_set1_ps(scale);
  const __m512 vl = _mm512_set1_ps(static_cast<float>(limit));
  const __m512i top = _mm512_set1_epi32(limit);
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    const float* const a = x + r * n;
    const float* const b = a + n;
    int16_t* const oa = out + r * out_ld;
    int16_t* const ob = oa + out_ld;
    const float ma = std::max(shift[r], scale * RowMax(a, n));
    const float mb = std::max(shift[r + 1], scale * RowMax(b, n));
    const __m512 vma = _mm512_set1_ps(ma), vmb = _mm512_set1_ps(mb);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      a0 = ExpInt16Step(a + i, 0xffff, vs, vma, vl, top, oa + i, a0);
      b0 = ExpInt16Step(b + i, 0xffff, vs, vmb, vl, top, ob + i, b0);
      a1 = ExpInt16Step(a + i + 16, 0xffff, vs, vma, vl, top, oa + i + 16, a1);
      b1 = ExpInt16Step(b + i + 16, 0xffff, vs, vmb, vl, top, ob + i + 16, b1);
    }
    for (; i < n; i += 16) {
      const auto mask = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
      a0 = ExpInt16Step(a + i, mask, vs, vma, vl, top, oa + i, a0);
      b0 = ExpInt16Step(b + i, mask, vs, vmb, vl, top, ob + i, b0);
    }
    sum[r] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    sum[r + 1] = _mm512_reduce_add_ps(_mm512_add_ps(b0, b1));
    shift[r] = ma;
    shift[r + 1] = mb;
  }
  if (r < rows) {
    const float* const a = x + r * n;
    shift[r] = std::max(shift[r], scale * RowMax(a, n));
    sum[r] = SoftmaxExp2SumInt16Avx512(a, n, scale, shift[r], limit, out + r * out_ld);
  }
}

}  // namespace quiver::engine::cpu

#else  // not x86-64: never called (cpu_features.h offers no avx512 path)

#include <cstdlib>

namespace quiver::engine::cpu {
void GeluErfAvx512(float*, int64_t) { std::abort(); }
float MaxAvx512(const float*, int64_t) { std::abort(); }
float SoftmaxExp2SumAvx512(float*, int64_t, float, float) { std::abort(); }
void SoftmaxExp2RowsAvx512(float*, int64_t, int64_t, int64_t, float, float*, float*) {
  std::abort();
}
float SoftmaxExp2SumBf16Avx512(float*, int64_t, float, float, uint16_t*) { std::abort(); }
void SoftmaxExp2RowsInt16Avx512(const float*, int64_t, int64_t, float, float*, int32_t, int16_t*,
                                int64_t, float*) {
  std::abort();
}
float SoftmaxExp2SumInt16Avx512(const float*, int64_t, float, float, int32_t, int16_t*) {
  std::abort();
}
}  // namespace quiver::engine::cpu

#endif
