// Attention's two products in int16 on AVX-512 VNNI (vpdpwssd: pairs of int16 products summed
// into int32, 32 multiply-adds per instruction, twice the f32 FMA's 16), for models with int8 or
// bf16 weights on hosts where bf16 products are not faster than f32 (Intel cores without AMX,
// whose vdpbf16ps issues at a quarter of the FMA's rate: gemm_bf16.h, Bf16ProductsFast).
//
// Symmetric quantization, one scale per row of the left operand and one per column of the right
// one: x[r, i] ≈ a[r, i] · sa[r], W[c, i] ≈ q[c, i] · sw[c], |a|, |q| <= Int16Limit(depth), so
// that the int32 sums are exact whatever the values (depth · limit² < 2^31); then
// y[r, c] = float(Σ_i a[r, i] · q[c, i]) · (sa[r] · sw[c]). With a depth of 32 (a head of
// all-MiniLM-L6-v2) the limit is 8,191: 13 bits, against bf16's 8 of mantissa, so the products are
// at least as close to f32 as the bf16 ones (tests/engine/gemm_int16_test.cc,
// tests/engine/attention_test.cc). An element's result depends only on its row and its column's
// values: batching never changes it.
//
// Layout as Bf16Weights': panels of kPanel (16) columns; per pair of k, the panel's 16 columns hold
// (q[c][k], q[c][k + 1]) (64 bytes, one zmm). Rows: 2 · k_pairs int16, the odd tail zero.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/cpu/pair_panels.h"

namespace quiver::engine::cpu {

// The avx512_vnni or amx path is active (vpdpwssd exists there).
bool Int16ProductsSupported();

// The largest |value| both operands may hold for products of `depth` terms (pairs: an odd depth
// counts its zero tail) to be summed exactly in int32: floor(sqrt((2^31 - 1) / depth)), at most
// 32,767.
int32_t Int16Limit(int64_t depth);

class Int16Weights : public PairPanels<int16_t> {
 public:
  // W = w[n, k] (row stride ldw), each column c (row of w) scaled by its own largest |value| to
  // `limit`. Reuses the allocation when large enough (attention packs K per block).
  void Pack(const float* w, int64_t n, int64_t k, int64_t ldw, int32_t limit);
  // W = vᵀ for v [k, n] (row stride ldv): W[c, kk] = v[kk, c], one scale per column c of v from
  // its first range_rows (>= k) rows (the whole of a key block of which a causal run packs k).
  void PackTransposed(const float* v, int64_t k, int64_t n, int64_t ldv, int32_t limit,
                      int64_t range_rows);

  // One per column, then zeros to the end of the last panel.
  const float* scales() const { return scales_.data(); }

 private:
  // PairPanels::Reserve, and the scales zeroed.
  int16_t* ReserveWithScales(int64_t n, int64_t k);

  std::vector<float> scales_;
};

// Rows [0, m) of x [m, k] (row stride ldx), each scaled by its largest |value| to `limit`: a [m,
// 2 · k_pairs] (the odd tail zero) and scale[r] (0 for a row of zeros, which quantizes as zeros).
void Int16Rows(const float* x, int64_t ldx, int64_t k, int64_t m, int32_t limit, int16_t* a,
               float* scale);

// y[r, c] = (accumulate ? y[r, c] : 0) + float(Σ_i a[r, i] · W[c, i]) · (scale[r] · w.scales()[c])
// for rows [0, m) and every column of w, on the calling thread; a from Int16Rows (or values in
// [0, 1] as round(x · limit), scale 1 / limit: SoftmaxExp2SumInt16Avx512), row stride 2 · k_pairs;
// y row stride ldy.
void Int16Gemm(const int16_t* a, const float* scale, const Int16Weights& w, float* y, int64_t ldy,
               int64_t m, bool accumulate);

}  // namespace quiver::engine::cpu
