// Scratch tensors for forward passes, in numbered slots on one device: a slot's buffer grows when
// a batch needs more and is never shrunk, so a steady stream of batches allocates nothing. A
// slot's contents are undefined when it is handed out. Owned by the engine's compute thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "engine/base/allocator.h"
#include "engine/base/tensor.h"

namespace quiver::engine {

class Workspace {
 public:
  explicit Workspace(Allocator& allocator) : allocator_(&allocator) {}

  // A contiguous tensor of `shape` in slot `slot` (valid until that slot is asked for again).
  Tensor Get(int slot, DType dtype, std::initializer_list<int64_t> shape);
  Tensor F32(int slot, std::initializer_list<int64_t> shape) {
    return Get(slot, DType::kF32, shape);
  }

  // From now on no slot grows (nor is added): a Get that would need more memory throws
  // std::logic_error naming the slot and both sizes. The CUDA runtime freezes its workspaces once
  // they were sized for the largest batch: captured graphs hold their addresses.
  void Freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }
  // Bytes held over all slots.
  size_t bytes() const;

 private:
  Allocator* allocator_;
  std::vector<Buffer> slots_;
  bool frozen_ = false;
};

}  // namespace quiver::engine
