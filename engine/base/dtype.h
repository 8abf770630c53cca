// Element types: of checkpoint tensors (as safetensors names them) and of the engine's tensors.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace quiver::engine {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// "F32", "BF16", ... as safetensors spells them.
std::string_view DTypeName(DType dtype);
size_t DTypeSizeBytes(DType dtype);
// "f32", "bf16", ... as shapes are written in messages and comments.
std::string_view DTypeShortName(DType dtype);
// The inverse of DTypeName; nullopt for a name safetensors does not use.
std::optional<DType> DTypeFromName(std::string_view name);

}  // namespace quiver::engine
