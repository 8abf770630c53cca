// quiver's own single-threaded GEMM for the model's Linear layers, y = x · Wᵀ + bias, with W
// packed once at load.
//
// Why not BLAS for these: a BLAS call repacks the weight matrix on every call, once per tile
// and thread, which costs 10-30% of a short batch's products (batch-1 latency) and a few percent
// of a long one's; a layer's weights never change, so they are packed here once. Measured
// against OpenBLAS and the peers in docs/benchmarks.md.
//
// Layout: panels of kPanel (16) output columns; panel p holds, for each k, the 16 weights
// W[16p + j][k] (zeros past n). The micro-kernel keeps a 6 x 16 block of y in registers (AVX2:
// 12 accumulators), streams k in blocks of kDepth, and adds each element's products in k order
// starting from its bias: an element's result depends only on its row of x and column of W,
// never on the batch around it or on how the product was cut into tiles.
#pragma once

#include <cstdint>
#include <memory>

namespace quiver::engine::cpu {

class PackedWeights {
 public:
  static constexpr int64_t kPanel = 16;

  PackedWeights() = default;
  // w is [n, k] row-major (a PyTorch Linear weight): a model's layer, packed once at load and
  // streamed (below).
  PackedWeights(const float* w, int64_t n, int64_t k) {
    Pack(w, n, k, k);
    streamed_ = true;
  }

  // Repacks in place, reusing the allocation when it is large enough (attention packs K and V
  // per head this way; such panels are not streamed). Pack: W = w[n, k] with row stride ldw.
  // PackTransposed: W = vᵀ for v [k, n] with row stride ldv, i.e. W[c, kk] = v[kk, c].
  void Pack(const float* w, int64_t n, int64_t k, int64_t ldw);
  void PackTransposed(const float* v, int64_t k, int64_t n, int64_t ldv);

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  bool empty() const { return data_ == nullptr; }
  // Whether the products read these panels from beyond the core's L2 on every call: a model's
  // layers (all-MiniLM-L6-v2's six take 42 MB), each read once per layer and call. The f32
  // kernels then prefetch the next panels into L2 while they work on the current ones (in calls
  // of StreamedPrefetchMinRows() rows or more, cpu_features.h); otherwise a panel's first strip
  // of rows waits on L3 (batch-1 at 128 tokens 1-12.5% faster on the
  // AVX-512 path, 8-18% with avx2 forced, on the Xeon of docs/benchmarks.md). Not so for panels
  // just packed (attention's K and V), which are in L1 or L2 already.
  bool streamed() const { return streamed_; }
  const float* panel(int64_t p) const { return data_.get() + p * k_ * kPanel; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  float* Reserve(int64_t n, int64_t k);

  int64_t n_ = 0, k_ = 0, capacity_ = 0;
  bool streamed_ = false;
  std::unique_ptr<float, Free> data_;  // 64-byte aligned
};

// y[r, c] = sum_k x[r, k] · W[c, k] + bias[c] (bias may be null) for rows [0, m) and columns
// [c0, c1), on the calling thread; with `accumulate`, y[r, c] += the sum instead (bias unused).
// c0 is a multiple of kPanel; x has row stride ldx, y ldy.
void PackedGemm(const float* x, int64_t ldx, const PackedWeights& w, const float* bias, float* y,
                int64_t ldy, int64_t m, int64_t c0, int64_t c1, bool accumulate = false);

// The same over W's depth [k_begin, k_end) only: x[r, kk - k_begin] multiplies W[c, kk] (x points
// at the slice's first column). Each element's products still come in k order after its bias
// (or after y with `accumulate`), so that slices taken in order, the first without `accumulate`
// and the rest with it, give the bits of one PackedGemm over the whole depth: a caller can make
// x's columns slice by slice (the feed-forward's intermediate, FeedForwardAddLayerNorm).
void PackedGemmSlice(const float* x, int64_t ldx, const PackedWeights& w, int64_t k_begin,
                     int64_t k_end, const float* bias, float* y, int64_t ldy, int64_t m, int64_t c0,
                     int64_t c1, bool accumulate = false);

}  // namespace quiver::engine::cpu
