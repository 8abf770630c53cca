// The packed right operand of the 16-bit products (Bf16Weights, gemm_bf16.h; Int16Weights,
// gemm_int16.h): panels of kPanel (16) output columns; per pair of k, the panel's 16 columns hold
// (W[c][k], W[c][k + 1]) as two 16-bit values in one 32-bit word (64 bytes, one zmm), the odd
// tail of k and the columns past n zero. 64-byte aligned, and reused by a later pack of the same
// size or smaller (attention packs K and V per head or block this way).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace quiver::engine::cpu {

template <typename T>  // uint16_t (bf16) or int16_t
class PairPanels {
 public:
  static constexpr int64_t kPanel = 16;

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t k_pairs() const { return (k_ + 1) / 2; }
  const T* panel(int64_t p) const { return data_.get() + p * k_pairs() * 2 * kPanel; }

 protected:
  // Takes the shape [n, k] and returns the panels, grown if they were smaller; not cleared (a
  // pack writes every word of every panel).
  T* Reserve(int64_t n, int64_t k) {
    n_ = n;
    k_ = k;
    const int64_t elems = (n + kPanel - 1) / kPanel * k_pairs() * 2 * kPanel;
    if (elems > capacity_ || data_ == nullptr) {
      data_.reset(static_cast<T*>(
          std::aligned_alloc(64, (static_cast<size_t>(elems) * sizeof(T) + 63) / 64 * 64)));
      if (data_ == nullptr) throw std::bad_alloc();
      capacity_ = elems;
    }
    return data_.get();
  }

  // Packs [n, k] (after Reserve) from each column's values as a row: row(c, out) writes column
  // c's 2 · k_pairs() values to out, the odd tail zero, called for c = 0, 1, ..., n - 1 in order
  // on the calling thread (Int16Weights::Pack takes a panel's 16 scales at its first column).
  // Each panel's rows are then transposed into its words by a 16 x 16 register transpose of
  // 32-bit words (PackRowsAvx512): no scattered 16-bit stores. AVX-512 only.
  template <typename Row>
  void PackByColumns(const Row& row) {
    const int64_t width = 2 * k_pairs();
    thread_local std::vector<T> rows;
    rows.resize(static_cast<size_t>(kPanel * width));
    for (int64_t c0 = 0; c0 < n_; c0 += kPanel) {
      const int64_t cols = std::min(kPanel, n_ - c0);
      for (int64_t j = 0; j < cols; ++j) row(c0 + j, rows.data() + j * width);
      TransposeIntoPanel(rows.data(), cols, c0 / kPanel);
    }
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  // Panel p from `cols` rows of 2 · k_pairs() values (pair_panels.cc).
  void TransposeIntoPanel(const T* rows, int64_t cols, int64_t p);

  int64_t n_ = 0, k_ = 0, capacity_ = 0;
  std::unique_ptr<T, Free> data_;
};

}  // namespace quiver::engine::cpu
