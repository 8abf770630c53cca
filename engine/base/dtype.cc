#include "engine/base/dtype.h"

namespace quiver::engine {
namespace {

struct DTypeEntry {
  DType dtype;
  std::string_view name, short_name;
  size_t size_bytes;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::kF64, "F64", "f64", 8}, {DType::kF32, "F32", "f32", 4},
    {DType::kF16, "F16", "f16", 2}, {DType::kBF16, "BF16", "bf16", 2},
    {DType::kI64, "I64", "i64", 8}, {DType::kI32, "I32", "i32", 4},
    {DType::kI16, "I16", "i16", 2}, {DType::kI8, "I8", "i8", 1},
    {DType::kU8, "U8", "u8", 1},    {DType::kBool, "BOOL", "bool", 1},
};

}  // namespace

std::string_view DTypeName(DType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return entry.name;
  }
  return "?";
}

std::string_view DTypeShortName(DType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return entry.short_name;
  }
  return "?";
}

size_t DTypeSizeBytes(DType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return entry.size_bytes;
  }
  return 0;
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

}  // namespace quiver::engine
