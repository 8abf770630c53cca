// The int8 form of a Linear layer (`--quantize int8`): y = x · Wᵀ + bias with W quantized once
// at load, symmetric per output channel (w_c = s_c · q_c, q in [-127, 127], s_c = max|W_c| / 127),
// and x quantized per row when the layer runs (dynamic, per token), asymmetric on 256 levels:
// the row's range [lo, hi] (lo = min(0, min x_r), hi = max(0, max x_r)) in steps of
// a_r = (hi - lo) / 255, x_r = a_r · p_r with p integer in [-z_r, 255 - z_r], z_r =
// round(-lo / a_r) the row's zero point: unsigned bytes u = p + z as the VNNI and AMX products
// read them. The products are summed in int32 (exact: |Σ p q| <= 255 · 127 · k, k <= kMaxDepth),
// then y[r, c] = a_r · s_c · Σ p_r q_c + bias[c] in f32. An element's result depends only on its
// row of x and column of W, as in gemm.h: batching never changes it. (On all-MiniLM-L6-v2 the
// asymmetric bytes cost 0.99724 -> 0.99618 in worst cosine against keeping 13-bit activations,
// at twice the products per instruction; symmetric ones [-127, 127] fell to 0.98777.)
//
// Kernels, each computing the same integers (so every path gives the same bits):
// - rows as int16 p (QuantizeRows) times the weights' pair layout (panel): AVX2 vpmaddwd on int16
//   pairs (16 multiply-adds per instruction), AVX-512 vpmaddwd / vpdpwssd (32; the amx path's
//   too); without AVX2, plain loops. Layout: panels of kPanel (16) output columns;
//   per pair of k, the panel's 16 columns hold (q[c][k], q[c][k + 1]) as int8.
// - rows as bytes u = p + z (QuantizeRowsU8) times the quad layout (quad_panel: per group of 4 k,
//   each column's 4 values, as vpdpbusd and AMX's tdpbusd read them): AVX-512 VNNI vpdpbusd (64
//   multiply-adds per instruction), AMX tdpbusd (16 x 16 x 64 per instruction, where its
//   self-check agrees), Σ p q = Σ u q - z · Σ q with the columns' sums kept at load.
// - the same bytes on AVX-VNNI's 256-bit vpdpbusd (32 multiply-adds per instruction), on the
//   avx2_vnni path of hosts with AVX-VNNI but no AVX-512.
// A QuantizedWeights holds one layout, the one the path active at its construction reads (quads
// where that path multiplies bytes, Int8BytesActive(); else pairs): int8 weights take one byte per
// weight (plus a scale and a sum per column), a quarter of f32. The other layout is built from it
// on first use, which only a path switched after loading asks for (SetActiveCpuPath: the tests
// that run every path); the quad layout only where the host has the avx2_vnni or avx512_vnni
// path.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace quiver::engine::cpu {

class QuantizedWeights {
 public:
  static constexpr int64_t kPanel = 16;
  static constexpr int64_t kQuadDepth = 64;  // the quad layout's k is a multiple (an AMX tile's)
  // The largest k whose int32 sums cannot overflow (255 · 127 · k < 2^31).
  static constexpr int64_t kMaxDepth = 65536;

  QuantizedWeights() = default;
  // w is [n, k] row-major f32 (a PyTorch Linear weight).
  QuantizedWeights(const float* w, int64_t n, int64_t k);

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  // k rounded up to pairs: the row length of quantized activations (QuantizeRows).
  int64_t k_pairs() const { return (k_ + 1) / 2; }
  const float* scales() const { return scales_.get(); }       // [n]: s_c
  const int32_t* column_sums() const { return sums_.get(); }  // [n]: Σ_k q[c][k]
  // The pair layout: panel p holds, per pair of k, its 16 columns' (q[c][k], q[c][k + 1]).
  const int8_t* panel(int64_t p) const { return Held(kPairs) + p * k_pairs() * 2 * kPanel; }
  // The quad layout, only where the host has the avx2_vnni or avx512_vnni path (else null): k
  // padded with zeros to quad_depth() (a multiple of kQuadDepth); panel p holds, for each group
  // g of 4 k, the 16 columns' q[c][4g .. 4g + 3], 64 bytes.
  int64_t quad_depth() const { return (k_ + kQuadDepth - 1) / kQuadDepth * kQuadDepth; }
  const int8_t* quad_panel(int64_t p) const {
    return quads_possible_ ? Held(kQuads) + p * quad_depth() * kPanel : nullptr;
  }
  // The bytes of the layouts built so far (one after construction).
  int64_t layout_bytes() const;

 private:
  enum Layout { kPairs = 0, kQuads = 1 };
  struct Free {
    void operator()(int8_t* p) const;
  };
  int64_t LayoutBytes(Layout layout) const;
  // The layout's zeroed, 64-byte aligned bytes.
  void Allocate(Layout layout) const;
  // The layout's bytes, built from the other on first use (under build_).
  const int8_t* Held(Layout layout) const {
    const int8_t* held = held_[layout].load(std::memory_order_acquire);
    return held != nullptr ? held : Build(layout);
  }
  const int8_t* Build(Layout layout) const;
  // q[c][k] read back from the layout `from`.
  int8_t Weight(Layout from, int64_t c, int64_t k) const;
  // Stores q[c][0 .. k) into the layout `to`.
  void Place(Layout to, int64_t c, const int8_t* q) const;

  int64_t n_ = 0, k_ = 0;
  bool quads_possible_ = false;
  mutable std::mutex build_;
  mutable std::unique_ptr<int8_t, Free> layouts_[2];  // 64-byte aligned, or null
  mutable std::atomic<const int8_t*> held_[2] = {nullptr, nullptr};
  std::unique_ptr<float[]> scales_;
  std::unique_ptr<int32_t[]> sums_;
};

// Rows [r0, r1) of x [m, k] (row stride ldx) quantized per row as above: q [m, 2 * k_pairs]
// int16 p (the odd tail zero) and scale [m] (a_r; 0, and p all zero, for a row whose range is 0
// or not finite).
void QuantizeRows(const float* x, int64_t ldx, int64_t k, int64_t r0, int64_t r1, int16_t* q,
                  float* scale);

// Whether the active path multiplies byte activations (QuantizeRowsU8, QuantizedGemmU8): the
// avx2_vnni, avx512_vnni and amx paths. Elsewhere the rows are int16 (QuantizeRows).
bool Int8BytesActive();

// The same rows as bytes u = p + z (u [m, depth], depth = w.quad_depth(), the rest of each row
// zero) and zero points z [m], with the same scales. Only where Int8BytesActive().
void QuantizeRowsU8(const float* x, int64_t ldx, int64_t k, int64_t depth, int64_t r0, int64_t r1,
                    uint8_t* u, int32_t* zero, float* scale);

// QuantizedGemm over rows from QuantizeRowsU8 (row stride w.quad_depth()), on vpdpbusd: the
// same bits. Only where Int8BytesActive() (w.quad_panel not null).
void QuantizedGemmU8(const uint8_t* u, const int32_t* zero, const float* scale,
                     const QuantizedWeights& w, const float* bias, float* y, int64_t ldy, int64_t m,
                     int64_t c0, int64_t c1);

// y[r, c] = scale[r] · s_c · Σ_k q[r, k] · W_q[c, k] + bias[c] (bias may be null) for rows
// [0, m) and columns [c0, c1) on the calling thread; q, scale from QuantizeRows (row stride
// 2 * k_pairs), y row stride ldy; c0 a multiple of kPanel.
void QuantizedGemm(const int16_t* q, const float* scale, const QuantizedWeights& w,
                   const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1);

}  // namespace quiver::engine::cpu
