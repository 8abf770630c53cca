#include "engine/kernels/cpu/pair_panels.h"

#include "engine/kernels/cpu/isa_paths.h"

namespace quiver::engine::cpu {

template <typename T>
void PairPanels<T>::TransposeIntoPanel(const T* rows, int64_t cols, int64_t p) {
  // A pair of 16-bit values is one 32-bit word: the words pass through the float transpose as
  // bits (PackRowsAvx512 copies, it does no arithmetic).
  const int64_t pairs = k_pairs();
  PackRowsAvx512(reinterpret_cast<const float*>(rows), pairs, cols, pairs,
                 reinterpret_cast<float*>(data_.get() + p * pairs * 2 * kPanel), kPanel);
}

template class PairPanels<uint16_t>;
template class PairPanels<int16_t>;

}  // namespace quiver::engine::cpu
