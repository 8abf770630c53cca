#include "engine/base/workspace.h"

namespace quiver::engine {

Tensor Workspace::Get(int slot, DType dtype, std::initializer_list<int64_t> shape) {
  if (static_cast<size_t>(slot) >= slots_.size()) slots_.resize(static_cast<size_t>(slot) + 1);
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  const size_t bytes = static_cast<size_t>(elements) * DTypeSizeBytes(dtype);
  Buffer& buffer = slots_[static_cast<size_t>(slot)];
  if (buffer.data() == nullptr || buffer.bytes() < bytes) {
    buffer = Buffer();  // free first: the old contents are not needed
    buffer = Buffer(*allocator_, bytes);
  }
  return buffer.View(dtype, shape);
}

}  // namespace quiver::engine
