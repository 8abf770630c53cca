#include "engine/base/workspace.h"

#include <stdexcept>

#include "common/strings.h"

namespace quiver::engine {

Tensor Workspace::Get(int slot, DType dtype, std::initializer_list<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  const size_t bytes = static_cast<size_t>(elements) * DTypeSizeBytes(dtype);
  if (static_cast<size_t>(slot) >= slots_.size()) slots_.resize(static_cast<size_t>(slot) + 1);
  Buffer& buffer = slots_[static_cast<size_t>(slot)];
  if (buffer.data() == nullptr || buffer.bytes() < bytes) {
    if (frozen_) {
      throw std::logic_error(StrCat("workspace slot ", slot, " needs ", bytes,
                                    " bytes but was sized for ", buffer.bytes(),
                                    " at load (a batch beyond the largest one it was sized for)"));
    }
    buffer = Buffer();  // free first: the old contents are not needed
    buffer = Buffer(*allocator_, bytes);
  }
  return buffer.View(dtype, shape);
}

size_t Workspace::bytes() const {
  size_t total = 0;
  for (const Buffer& b : slots_) total += b.bytes();
  return total;
}

}  // namespace quiver::engine
