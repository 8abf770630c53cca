// Vector helpers for the CPU kernels (private to engine/kernels/cpu). With AVX2 and FMA (the
// x86-64-v3 build), 8 floats at a time, and exp/tanh from glibc's libmvec (the vector variants
// GCC itself calls under -ffast-math; within 4 ulp), but the softmax's exp (SoftmaxExp) and the
// GELU's erf (ErfAs) inlined, each written so that its 16-lane form gives the same bits.
// Elsewhere, the same functions as plain loops.
//
// A tail shorter than a vector goes through the same vector code on a zero-padded copy, so an
// element's result never depends on where the array around it ends: a sequence embeds bit for
// bit the same alone and in any batch.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define QUIVER_VEC_AVX2 1
extern "C" {
__m256 _ZGVdN8v_expf(__m256);
__m256 _ZGVdN8v_tanhf(__m256);
}
#endif

namespace quiver::engine::cpu::vec {

#if QUIVER_VEC_AVX2

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Applies op (an __m256 -> __m256 function) to x[0, n) in place.
template <typename Op>
inline void Map(float* x, int64_t n, Op op) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, op(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(32) float tail[8] = {};
    std::copy(x + i, x + n, tail);
    _mm256_store_ps(tail, op(_mm256_load_ps(tail)));
    std::copy(tail, tail + (n - i), x + i);
  }
}

// Sum of x[0, n): four 8-lane sums over each 32 values (four dependency chains: with one, a
// LayerNorm's row waited on the adder's latency; AddNormRows went from 3.6% to 2.6% of int8
// time on Zen 4, perf), the last whole vectors into the first, the four added pairwise, across,
// then the tail one by one.
inline float Sum(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
  float s = HorizontalSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += x[i];
  return s;
}

// Largest of x[0, n) (n > 0).
inline float Max(const float* x, int64_t n) {
  int64_t i = 0;
  float m = x[0];
  if (n >= 8) {  // four chains where there are 32 values or more: one waits a max's latency
    __m256 a0 = _mm256_loadu_ps(x), a1 = a0, a2 = a0, a3 = a0;
    for (i = 8; i + 32 <= n; i += 32) {
      a0 = _mm256_max_ps(a0, _mm256_loadu_ps(x + i));
      a1 = _mm256_max_ps(a1, _mm256_loadu_ps(x + i + 8));
      a2 = _mm256_max_ps(a2, _mm256_loadu_ps(x + i + 16));
      a3 = _mm256_max_ps(a3, _mm256_loadu_ps(x + i + 24));
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_max_ps(a0, _mm256_loadu_ps(x + i));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3)));
    m = *std::max_element(lanes, lanes + 8);
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// Largest |x| of x[0, n) (0 for n == 0).
inline float MaxAbs(const float* x, int64_t n) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc = _mm256_max_ps(acc, _mm256_and_ps(_mm256_loadu_ps(x + i), magnitude));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float m = *std::max_element(lanes, lanes + 8);
  for (; i < n; ++i) m = std::max(m, std::abs(x[i]));
  return m;
}

// e^x in 8 lanes, for softmax: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts), e^r from
// Cephes' degree-6 expf polynomial, 2^n put into the exponent; within 2 ulp of e^x (1.3 at most
// from -87 to 1, against libmvec's 2.5; tests/engine/softmax_exp_test.cc). x is clamped
// to [-87.3, 88.7], so below -87.3 the result is 2^-126 (about 1e-38), not 0: next to the 1 that
// every softmax row holds, that is nothing. Inlined, unlike libmvec's expf, which also handles
// what softmax never gives it. Above, x is clamped to 88.37626, the largest float whose n is 127
// (e^x is then 2.4e38, where it was infinity from 88.376 to 88.723 when the clamp was 88.72283
// and n could reach 128), so that the 16-lane version's vscalefps gives the same bits.
inline __m256 SoftmaxExp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.336544f)), _mm256_set1_ps(88.37626f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// x[i] = e^(x[i] * scale - shift) over x[0, n), in one pass; returns the sum of the results:
// two 8-lane sums, of the even and the odd vectors of each 16 values (two dependency chains,
// and exactly the two halves of a 16-lane sum: SoftmaxExpSumAvx512 gives the same bits), a last
// whole vector into the first, the two added, across, then the tail one by one.
inline float SoftmaxExpSumTail(float* x, int64_t i, int64_t n, __m256 acc0, __m256 acc1,
                               float scale, float shift) {
  const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(shift);
  if (i + 8 <= n) {
    const __m256 e = SoftmaxExp(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vs, vm));
    _mm256_storeu_ps(x + i, e);
    acc0 = _mm256_add_ps(acc0, e);
    i += 8;
  }
  float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
  if (i < n) {
    alignas(32) float tail[8] = {};
    std::copy(x + i, x + n, tail);
    _mm256_store_ps(tail, SoftmaxExp(_mm256_fmsub_ps(_mm256_load_ps(tail), vs, vm)));
    std::copy(tail, tail + (n - i), x + i);
    for (int64_t j = 0; j < n - i; ++j) sum += tail[j];
  }
  return sum;
}

inline float SoftmaxExpSum(float* x, int64_t n, float scale, float shift) {
  const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(shift);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = SoftmaxExp(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vs, vm));
    const __m256 e1 = SoftmaxExp(_mm256_fmsub_ps(_mm256_loadu_ps(x + i + 8), vs, vm));
    _mm256_storeu_ps(x + i, e0);
    _mm256_storeu_ps(x + i + 8, e1);
    acc0 = _mm256_add_ps(acc0, e0);
    acc1 = _mm256_add_ps(acc1, e1);
  }
  return SoftmaxExpSumTail(x, i, n, acc0, acc1, scale, shift);
}

// Sum of (x[i] - mean)^2, in Sum's order.
inline float SumSquaredDiff(const float* x, float mean, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const __m256 m = _mm256_set1_ps(mean);
  const auto step = [&](__m256 acc, int64_t at) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + at), m);
    return _mm256_fmadd_ps(d, d, acc);
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = step(a0, i);
    a1 = step(a1, i + 8);
    a2 = step(a2, i + 16);
    a3 = step(a3, i + 24);
  }
  for (; i + 8 <= n; i += 8) a0 = step(a0, i);
  float s = HorizontalSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += (x[i] - mean) * (x[i] - mean);
  return s;
}

inline void Exp(float* x, int64_t n) { Map(x, n, [](__m256 v) { return _ZGVdN8v_expf(v); }); }

inline void Tanh(float* x, int64_t n) { Map(x, n, [](__m256 v) { return _ZGVdN8v_tanhf(v); }); }

// erf(z) as z P(z^2) / Q(z^2), P and Q of degree 5 (a rational fit, weighted towards the
// largest error, made for this project over [0, 3.92]: within 1.7e-8 of erf in exact arithmetic,
// 3.2e-7 after f32 rounding; tests/engine/gelu_test.cc holds it to 5e-7; glibc's erff is within
// 4 ulp, 4.8e-7 near 1), and exactly +-1 from |z| >= 3.92 on (where erf rounds to 1 in f32; a
// NaN stays NaN). Eleven multiply-adds and one division, no e^x: it replaced Abramowitz and
// Stegun 7.1.26 (t = 1 / (1 + p |z|), a degree-5 polynomial in t times e^(-z^2), 4.2e-7), which
// took some thirty operations. A fixed sequence of correctly rounded operations, written the
// same on 16 lanes (isa_paths.h, GeluErfAvx512): every path gives the same bits (glibc's 8- and
// 16-lane erff differ in the last bits).
inline constexpr float kErfP[6] = {1.12837899f,    0.192744076f,    0.0530580543f,
                                   0.00386753166f, 0.000287471892f, 2.03502259e-06f};
inline constexpr float kErfQ[5] = {0.504146636f, 0.115076549f, 0.0151706925f, 0.00118794176f,
                                   3.80732345e-05f};  // and 1 for t^0
inline constexpr float kErfSaturation = 3.92f;

inline __m256 ErfAs(__m256 z) {
  const __m256 t = _mm256_mul_ps(z, z);
  __m256 p = _mm256_set1_ps(kErfP[5]);
  for (int i = 4; i >= 0; --i) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kErfP[i]));
  __m256 q = _mm256_set1_ps(kErfQ[4]);
  for (int i = 3; i >= 0; --i) q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(kErfQ[i]));
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.0f));
  const __m256 r = _mm256_div_ps(_mm256_mul_ps(z, p), q);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 saturated =
      _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, z), _mm256_set1_ps(kErfSaturation), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(sign_bit, z), _mm256_set1_ps(1.0f));
  return _mm256_blendv_ps(r, one, saturated);
}

// 0.5 x (1 + erf(x / sqrt 2)), PyTorch's exact GELU (erf by ErfAs).
inline void GeluErf(float* x, int64_t n) {
  Map(x, n, [](__m256 v) {
    const __m256 e = ErfAs(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f)));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  });
}

// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), gelu_new / gelu_pytorch_tanh.
inline void GeluTanh(float* x, int64_t n) {
  Map(x, n, [](__m256 v) {
    const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
    const __m256 inner = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                       _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), cube, v));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), _ZGVdN8v_tanhf(inner)));
  });
}

#else  // portable loops

inline float Sum(const float* x, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

inline float Max(const float* x, int64_t n) { return *std::max_element(x, x + n); }

inline float MaxAbs(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(x[i]));
  return m;
}

inline float SoftmaxExpSum(float* x, int64_t n, float scale, float shift) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] * scale - shift);
    sum += x[i];
  }
  return sum;
}

inline float SumSquaredDiff(const float* x, float mean, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += (x[i] - mean) * (x[i] - mean);
  return s;
}

inline void Exp(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

inline void Tanh(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
}

inline void GeluErf(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
  }
}

inline void GeluTanh(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  }
}

#endif

}  // namespace quiver::engine::cpu::vec
