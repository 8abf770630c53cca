// The int8 form of a Linear layer (`--quantize int8`): y = x · Wᵀ + bias with W quantized once
// at load, symmetric per output channel (w_c = s_c · q_c, q in [-127, 127], s_c = max|W_c| / 127),
// and x quantized per row when the layer runs (x_r = a_r · p_r, p in [-L, L], a_r = max|x_r| / L:
// dynamic, per token; L = activation_levels(), up to 13 bits). The products are summed in int32
// (exact), then
// y[r, c] = a_r · s_c · Σ p_r q_c + bias[c] in f32. An element's result depends only on its row
// of x and column of W, as in gemm.h: batching never changes it.
//
// Kernel: AVX2 vpmaddwd on int16 pairs (each int8 value widened to int16: exact, no saturation;
// 16 multiply-adds per instruction, twice the f32 FMA's 8). Layout: panels of kPanel (16)
// output columns; per pair of k, the panel's 16 columns hold (q[c][k], q[c][k + 1]) as int8.
// Without AVX2, the same sums in plain loops. The AVX-512, VNNI and AMX paths (isa_paths.h,
// chosen by ActiveCpuPath()) compute the same integers; on a host with AMX the weights are also
// kept in the layout its tile products read (amx_panel): twice the int8 weight memory there.
#pragma once

#include <cstdint>
#include <memory>

namespace quiver::engine::cpu {

class QuantizedWeights {
 public:
  static constexpr int64_t kPanel = 16;
  static constexpr int64_t kAmxDepth = 64;  // k per AMX tile product

  QuantizedWeights() = default;
  // w is [n, k] row-major f32 (a PyTorch Linear weight).
  QuantizedWeights(const float* w, int64_t n, int64_t k);

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  // k rounded up to pairs: the row length of quantized activations (QuantizeRows).
  int64_t k_pairs() const { return (k_ + 1) / 2; }
  // The activations' quantization levels: x_r = a_r · p_r with p in [-levels, levels]. The
  // kernel multiplies int16 by int16, so activations keep more than 8 bits at no cost: as many
  // as the int32 sums allow without overflow over k (2 · k_pairs · levels · 127 < 2^31), at most
  // 8191 (13 bits).
  int32_t activation_levels() const { return levels_; }
  const float* scales() const { return scales_.get(); }  // [n]: s_c
  const int8_t* panel(int64_t p) const { return data_.get() + p * k_pairs() * 2 * kPanel; }
  // The AMX layout, only where the host has the amx path (else null): k padded with zeros to
  // amx_depth() (a multiple of kAmxDepth); panel p holds, for each group g of 4 k, the 16
  // columns' q[c][4g .. 4g + 3], 64 bytes.
  int64_t amx_depth() const { return (k_ + kAmxDepth - 1) / kAmxDepth * kAmxDepth; }
  const int8_t* amx_panel(int64_t p) const {
    return amx_ == nullptr ? nullptr : amx_.get() + p * amx_depth() * kPanel;
  }

 private:
  struct Free {
    void operator()(int8_t* p) const;
  };
  int64_t n_ = 0, k_ = 0;
  int32_t levels_ = 127;
  std::unique_ptr<int8_t, Free> data_;  // 64-byte aligned
  std::unique_ptr<int8_t, Free> amx_;   // 64-byte aligned, or null
  std::unique_ptr<float[]> scales_;
};

// Rows [r0, r1) of x [m, k] (row stride ldx) quantized per row to [-levels, levels]:
// q [m, 2 * k_pairs] int16 (the odd tail zero) and scale [m] (a_r = max|x_r| / levels; 0 for an
// all-zero row).
void QuantizeRows(const float* x, int64_t ldx, int64_t k, int32_t levels, int64_t r0, int64_t r1,
                  int16_t* q, float* scale);

// The amx path's form of the same rows (where w.amx_panel is not null): each p of QuantizeRows
// as 256 · hi + lo, hi [m, depth] signed bytes and lo [m, depth] unsigned ones (depth =
// w.amx_depth(), the rest of each row zero), and the same scales. Rows [r0, r1).
void QuantizeRowsSplit(const float* x, int64_t ldx, int64_t k, int32_t levels, int64_t depth,
                       int64_t r0, int64_t r1, int8_t* hi, uint8_t* lo, float* scale);

// QuantizedGemm over split rows, on the amx path's tiles (the same bits): hi and lo must be
// readable for m rounded up to a multiple of 16 rows (what the rows past m hold does not
// matter).
void QuantizedGemmSplit(const int8_t* hi, const uint8_t* lo, const float* scale,
                        const QuantizedWeights& w, const float* bias, float* y, int64_t ldy,
                        int64_t m, int64_t c0, int64_t c1);

// y[r, c] = scale[r] · s_c · Σ_k q[r, k] · W_q[c, k] + bias[c] (bias may be null) for rows
// [0, m) and columns [c0, c1) on the calling thread; q, scale from QuantizeRows (row stride
// 2 * k_pairs), y row stride ldy; c0 a multiple of kPanel.
void QuantizedGemm(const int16_t* q, const float* scale, const QuantizedWeights& w,
                   const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0, int64_t c1);

}  // namespace quiver::engine::cpu
