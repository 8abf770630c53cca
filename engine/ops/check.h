// Shape, dtype and device checks for the ops' .cc files (private to engine/ops). A failed check
// is a bug in the calling model file, not bad input (requests are validated before they reach a
// forward pass): it throws std::invalid_argument naming the op, the operand and both shapes,
// which the engine's compute thread turns into an INTERNAL answer for that batch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "engine/base/exec_context.h"
#include "engine/base/tensor.h"

namespace quiver::engine::ops::internal {

[[noreturn]] void Fail(std::string_view op, const std::string& message);

// `t` has element type `dtype`, lives on ctx.device, and has exactly `dims` (-1: any size).
void Check(std::string_view op, std::string_view operand, const ExecContext& ctx, const Tensor& t,
           DType dtype, std::initializer_list<int64_t> dims);
// The same, and its rows are contiguous.
void CheckContiguous(std::string_view op, std::string_view operand, const ExecContext& ctx,
                     const Tensor& t, DType dtype, std::initializer_list<int64_t> dims);
// The element type `t` must have to be an activation operand on ctx.device, which is returned:
// f32 on the CPU; f32 or bf16 on CUDA (where the models run bf16). Fails naming the operand.
DType ActDType(std::string_view op, std::string_view operand, const ExecContext& ctx,
               const Tensor& t);

// `t` is empty or passes Check.
void CheckOptional(std::string_view op, std::string_view operand, const ExecContext& ctx,
                   const Tensor& t, DType dtype, std::initializer_list<int64_t> dims);

// Fails naming both operands when the memory of `a` and `b` overlaps (an op that reads one while
// writing the other would read its own output).
void CheckDisjoint(std::string_view op, std::string_view a_name, const Tensor& a,
                   std::string_view b_name, const Tensor& b);

// The op has no kernel for ctx.device in this build.
[[noreturn]] void NoKernel(std::string_view op, const ExecContext& ctx);

}  // namespace quiver::engine::ops::internal
