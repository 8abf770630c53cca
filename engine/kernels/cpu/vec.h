// Vector helpers for the CPU kernels (private to engine/kernels/cpu). With AVX2 and FMA (the
// x86-64-v3 build), 8 floats at a time, and exp/tanh from glibc's libmvec (the vector variants
// GCC itself calls under -ffast-math; within 4 ulp), but the softmax's 2^x (SoftmaxExp2) and the
// exact GELU (Gelu) inlined, each written so that its 16-lane form gives the same bits.
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

// 2^x in 8 lanes, for softmax (its arguments in log2 units: the scale times log2(e), so that no
// ln2 is split off): x = n + r with n the nearest integer and r = x - n exactly (|r| <= 1/2), 2^r
// by a degree-6 polynomial fitted for this project to 2^r's relative error on [-1/2, 1/2]
// (2e-9 before rounding; tools/golden/fit_exp2.py), 2^n put into the exponent: within 1 ulp of
// 2^x from -126 to 0 (0.93 at most; tests/engine/softmax_exp_test.cc), in 12 operations where
// e^x took 16. x is clamped to [-126, 127]: below -126 the result is 2^-126 (about 1e-38), not
// 0 (next to the 1 that every softmax row holds, that is nothing); -infinity and NaN give it
// too. The 16-lane form (vec_avx512.cc) leaves out the upper clamp, which n's exponent field
// needs here and vscalefps does not: the two give the same bits up to 127, and a softmax's
// arguments are at most one rounding above 0.
inline constexpr float kExp2P[6] = {6.9314718246e-01f, 2.4022647738e-01f, 5.5503323674e-02f,
                                    9.6184369177e-03f, 1.3398873853e-03f, 1.5353361960e-04f};

inline __m256 SoftmaxExp2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-126.0f)), _mm256_set1_ps(127.0f));
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(kExp2P[5]);
  for (int i = 4; i >= 0; --i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExp2P[i]));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// x[i] = 2^(x[i] * scale - shift) over x[0, n), in one pass; returns the sum of the results:
// two 8-lane sums, of the even and the odd vectors of each 16 values (two dependency chains,
// and exactly the two halves of a 16-lane sum: SoftmaxExp2SumAvx512 gives the same bits), a last
// whole vector into the first, the two added, across, then the tail one by one. A softmax passes
// its scale times log2(e) and its maximum times that.
inline float SoftmaxExp2SumTail(float* x, int64_t i, int64_t n, __m256 acc0, __m256 acc1,
                                float scale, float shift) {
  const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(shift);
  if (i + 8 <= n) {
    const __m256 e = SoftmaxExp2(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vs, vm));
    _mm256_storeu_ps(x + i, e);
    acc0 = _mm256_add_ps(acc0, e);
    i += 8;
  }
  float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
  if (i < n) {
    alignas(32) float tail[8] = {};
    std::copy(x + i, x + n, tail);
    _mm256_store_ps(tail, SoftmaxExp2(_mm256_fmsub_ps(_mm256_load_ps(tail), vs, vm)));
    std::copy(tail, tail + (n - i), x + i);
    for (int64_t j = 0; j < n - i; ++j) sum += tail[j];
  }
  return sum;
}

inline float SoftmaxExp2Sum(float* x, int64_t n, float scale, float shift) {
  const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(shift);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = SoftmaxExp2(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vs, vm));
    const __m256 e1 = SoftmaxExp2(_mm256_fmsub_ps(_mm256_loadu_ps(x + i + 8), vs, vm));
    _mm256_storeu_ps(x + i, e0);
    _mm256_storeu_ps(x + i + 8, e1);
    acc0 = _mm256_add_ps(acc0, e0);
    acc1 = _mm256_add_ps(acc1, e1);
  }
  return SoftmaxExp2SumTail(x, i, n, acc0, acc1, scale, shift);
}

// A softmax block's rows at once: for each of `rows` rows of n values (ld apart), shift[r] =
// max(shift[r], scale · the row's largest value), then SoftmaxExp2Sum(row, n, scale, shift[r])
// into sum[r], the same bits as row by row; two rows' steps interleaved, since one row of a
// short sequence's block (128 keys: 16 vectors here) cannot hide its 2^x's chain of dependent
// operations. SoftmaxExp2RowsAvx512 (isa_paths.h) is its 16-lane form.
inline void SoftmaxExp2Rows(float* x, int64_t ld, int64_t rows, int64_t n, float scale,
                            float* shift, float* sum) {
  const __m256 vs = _mm256_set1_ps(scale);
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    float* const a = x + r * ld;
    float* const b = a + ld;
    const float ma = std::max(shift[r], scale * Max(a, n));
    const float mb = std::max(shift[r + 1], scale * Max(b, n));
    const __m256 vma = _mm256_set1_ps(ma), vmb = _mm256_set1_ps(mb);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256 ea0 = SoftmaxExp2(_mm256_fmsub_ps(_mm256_loadu_ps(a + i), vs, vma));
      const __m256 eb0 = SoftmaxExp2(_mm256_fmsub_ps(_mm256_loadu_ps(b + i), vs, vmb));
      const __m256 ea1 = SoftmaxExp2(_mm256_fmsub_ps(_mm256_loadu_ps(a + i + 8), vs, vma));
      const __m256 eb1 = SoftmaxExp2(_mm256_fmsub_ps(_mm256_loadu_ps(b + i + 8), vs, vmb));
      _mm256_storeu_ps(a + i, ea0);
      _mm256_storeu_ps(a + i + 8, ea1);
      _mm256_storeu_ps(b + i, eb0);
      _mm256_storeu_ps(b + i + 8, eb1);
      a0 = _mm256_add_ps(a0, ea0);
      a1 = _mm256_add_ps(a1, ea1);
      b0 = _mm256_add_ps(b0, eb0);
      b1 = _mm256_add_ps(b1, eb1);
    }
    sum[r] = SoftmaxExp2SumTail(a, i, n, a0, a1, scale, ma);
    sum[r + 1] = SoftmaxExp2SumTail(b, i, n, b0, b1, scale, mb);
    shift[r] = ma;
    shift[r + 1] = mb;
  }
  if (r < rows) {
    float* const a = x + r * ld;
    shift[r] = std::max(shift[r], scale * Max(a, n));
    sum[r] = SoftmaxExp2Sum(a, n, scale, shift[r]);
  }
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

inline void Exp(float* x, int64_t n) {
  Map(x, n, [](__m256 v) { return _ZGVdN8v_expf(v); });
}

inline void Tanh(float* x, int64_t n) {
  Map(x, n, [](__m256 v) { return _ZGVdN8v_tanhf(v); });
}

// PyTorch's exact GELU, x Phi(x) with Phi(a) = (1 + erf(a / sqrt 2)) / 2, division-free: for
// a = min(|x|, 5.625), Phi(a) by one of 8 polynomials of degree 6, each for an interval of width
// 0.75 of [0, 6), in t = a · 4/3 - i (i the interval; t exact), its coefficients picked per lane
// by one permutation each (tools/golden/fit_gelu.py, which fitted them: within 1.4e-8 of Phi in
// exact arithmetic; GELU within |x| 1e-7 plus an f32 rounding of it after f32 rounding, 0.68 of
// that measured; tests/engine/gelu_test.cc), then x Phi(|x|) for x >= 0 and x (1 - Phi(|x|)) for
// x < 0. Phi is exactly 1 from the clamp on, so GELU is x beyond it and -0 below -5.625; a NaN
// stays NaN (it passes the clamp's minimum, and any interval gives NaN for it). It replaced
// 0.5 x (1 + erf(x / sqrt 2)) with erf by a rational fit (z P(z^2) / Q(z^2), eleven multiply-adds
// and one division, 1.2e-6 at worst), which took 3.8 ns per 16 values on 16 lanes on Zen 5, 2.1
// ns this way (6.8 and 4.4 on 8 lanes; the 16-lane form could pick from 16 intervals in one
// permutation, but on 8 lanes that takes two and a blend, and the paths give the same bits).
// A fixed sequence of correctly rounded operations, written the same on 16 lanes (isa_paths.h,
// GeluErfAvx512): every path gives the same bits.
inline constexpr int kGeluDegree = 6;
// kGeluPhi[j][i]: t^j's coefficient on interval i.
inline constexpr float kGeluPhi[kGeluDegree + 1][8] = {
    {5.000000000e-01f, 7.733726501e-01f, 9.331927896e-01f, 9.877755046e-01f, 9.986500740e-01f,
     9.999116063e-01f, 9.999966025e-01f, 9.999999404e-01f},
    {2.992078066e-01f, 2.258517891e-01f, 9.713810682e-02f, 2.380510233e-02f, 3.323880723e-03f,
     2.644120541e-04f, 1.198209156e-05f, 3.092800398e-07f},
    {-1.811280890e-05f, -6.350073963e-02f, -5.463844165e-02f, -2.009117603e-02f, -3.739352804e-03f,
     -3.713110927e-04f, -2.013370431e-05f, -6.035372166e-07f},
    {-2.793643437e-02f, -9.384647943e-03f, 1.136961486e-02f, 9.102513082e-03f, 2.493263455e-03f,
     3.203577653e-04f, 2.102747385e-05f, 7.318291750e-07f},
    {-3.466617491e-04f, 7.596953772e-03f, 1.972939586e-03f, -2.047865884e-03f, -1.054564840e-03f,
     -1.825657528e-04f, -1.449041611e-05f, -5.774683132e-07f},
    {2.918065758e-03f, -5.120734568e-04f, -1.499855658e-03f, 5.063343633e-05f, 2.717954048e-04f,
     6.540129834e-05f, 6.147454769e-06f, 2.732951714e-07f},
    {-4.519825743e-04f, -2.311505232e-04f, 2.403609687e-04f, 5.537355901e-05f, -3.354163346e-05f,
     -1.127536143e-05f, -1.211388735e-06f, -5.834267469e-08f},
};
inline constexpr float kGeluClamp = 5.625f;
inline constexpr float kGeluIntervalsPerUnit = 4.0f / 3.0f;

inline __m256 Gelu(__m256 x) {
  const __m256 a =  // the clamp first: a NaN is what the minimum gives
      _mm256_min_ps(_mm256_set1_ps(kGeluClamp), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x));
  const __m256 s = _mm256_mul_ps(a, _mm256_set1_ps(kGeluIntervalsPerUnit));
  const __m256i i = _mm256_cvttps_epi32(s);  // 0..7 (a NaN's INT_MIN picks interval 0)
  const __m256 t = _mm256_sub_ps(s, _mm256_cvtepi32_ps(i));
  __m256 p = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kGeluPhi[kGeluDegree]), i);
  for (int j = kGeluDegree - 1; j >= 0; --j) {
    p = _mm256_fmadd_ps(p, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kGeluPhi[j]), i));
  }
  const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  p = _mm256_blendv_ps(p, _mm256_sub_ps(_mm256_set1_ps(1.0f), p), negative);
  return _mm256_mul_ps(x, p);
}

inline void GeluErf(float* x, int64_t n) { Map(x, n, Gelu); }

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

inline float SoftmaxExp2Sum(float* x, int64_t n, float scale, float shift) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp2(x[i] * scale - shift);
    sum += x[i];
  }
  return sum;
}

inline void SoftmaxExp2Rows(float* x, int64_t ld, int64_t rows, int64_t n, float scale,
                            float* shift, float* sum) {
  for (int64_t r = 0; r < rows; ++r) {
    float* const row = x + r * ld;
    shift[r] = std::max(shift[r], scale * Max(row, n));
    sum[r] = SoftmaxExp2Sum(row, n, scale, shift[r]);
  }
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
