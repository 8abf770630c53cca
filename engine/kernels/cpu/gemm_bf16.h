// The bf16 form of a Linear layer (`--quantize bf16`, on hosts with AVX512_BF16): y = x · Wᵀ +
// bias with W rounded to bf16 once at load and each row of x rounded to bf16 as the layer runs
// (round to nearest even, vcvtneps2bf16), the products summed in f32 by vdpbf16ps (pairs of k:
// 32 multiply-adds per instruction, twice the f32 FMA's 16). No scales: bf16 keeps f32's range,
// so nothing is calibrated and no row can overflow; what is lost is mantissa (8 bits), which
// costs far less fidelity than int8 (docs/benchmarks.md). An element's result depends only on
// its row of x and column of W: batching never changes it.
//
// Layout: panels of kPanel (16) output columns; per pair of k, the panel's 16 columns hold
// (W[c][k], W[c][k + 1]) as bf16 (64 bytes, one zmm). Activations: rows of 2 · k_pairs bf16, the
// odd tail zero. Only where Bf16Supported(): there is no other path (the f32 and int8 ones are
// the alternatives), and Engine::Load refuses `--quantize bf16` elsewhere.
#pragma once

#include <cstdint>

#include "engine/kernels/cpu/pair_panels.h"

namespace quiver::engine::cpu {

// AVX512_BF16 on this host, and the active path at least avx512 (QUIVER_CPU_ISA=avx2 turns it
// off with the rest of AVX-512).
bool Bf16Supported();

// Whether the bf16 products run on AMX-BF16 tiles (tdpbf16ps): the amx path on a host with
// AMX-BF16, after the tiles' self-check (gemm_bf16_amx.cc). Elsewhere vdpbf16ps. The two differ
// by f32 rounding (within 1e-5 of the pairs' magnitude), not in what they compute.
bool Bf16InTiles();

// Whether bf16 products outrun f32 ones on this host, so that a model with int8 or bf16 weights
// takes attention's products in bf16 (AttentionPlan::bf16_products): on AMX-BF16 tiles
// (Bf16InTiles), or by vdpbf16ps on AMD's cores (Zen 4 and later). Intel's vdpbf16ps without the
// tiles issued at a quarter of the f32 FMA's rate on the Xeon of docs/benchmarks.md (half its
// multiply-adds per cycle: a host made to look like one without AMX, Xeon run 12), and int8
// batches there ran 10% slower with attention in bf16 than in f32; so there they stay f32.
bool Bf16ProductsFast();

class Bf16Weights : public PairPanels<uint16_t> {
 public:
  Bf16Weights() = default;
  // w is [n, k] row-major f32 (a PyTorch Linear weight). Needs Bf16Supported().
  Bf16Weights(const float* w, int64_t n, int64_t k) { Pack(w, n, k, k); }

  // Repacks in place, reusing the allocation when it is large enough (attention packs K and V
  // per head this way, as PackedWeights does). Pack: W = w[n, k] with row stride ldw.
  // PackTransposed: W = vᵀ for v [k, n] with row stride ldv, i.e. W[c, kk] = v[kk, c].
  void Pack(const float* w, int64_t n, int64_t k, int64_t ldw);
  void PackTransposed(const float* v, int64_t k, int64_t n, int64_t ldv);
};

// Rows [r0, r1) of x [m, k] (row stride ldx) rounded to bf16: a [m, 2 · k_pairs] (the odd tail
// zero).
void Bf16Rows(const float* x, int64_t ldx, int64_t k, int64_t r0, int64_t r1, uint16_t* a);

// y[r, c] = Σ_k a[r, k] · W[c, k] + bias[c] (bias may be null), f32 sums from the bias in pairs
// of k, for rows [0, m) and columns [c0, c1) on the calling thread; a from Bf16Rows (row stride
// 2 · k_pairs), y row stride ldy; c0 a multiple of kPanel. With accumulate, the sums start from
// y instead (bias then ignored).
void Bf16Gemm(const uint16_t* a, const Bf16Weights& w, const float* bias, float* y, int64_t ldy,
              int64_t m, int64_t c0, int64_t c1, bool accumulate = false);

}  // namespace quiver::engine::cpu
