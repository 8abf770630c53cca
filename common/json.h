// A small read-only JSON document for configuration files (config.json, modules.json,
// safetensors headers, tokenizer.json, fixtures). Parsing goes through simdjson inside json.cc;
// no simdjson header leaks out, so the engine can read configs without a JSON dependency.
//
// Values are immutable after Parse and safe to read from many threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace quiver {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  // INVALID_ARGUMENT with simdjson's reason when `text` is not one JSON document.
  static absl::StatusOr<JsonValue> Parse(std::string_view text);

  JsonValue() = default;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kDouble; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // Unchecked accessors: call only after the matching is_*() test.
  bool as_bool() const { return bool_; }
  int64_t as_int() const { return int_; }
  double as_double() const { return type_ == Type::kInt ? static_cast<double>(int_) : double_; }
  const std::string& as_string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }     // array elements
  const std::vector<Member>& members() const { return members_; }  // object members, in order

  // The member named `key` of an object, or nullptr (also when this is not an object).
  const JsonValue* Find(std::string_view key) const;

  // "string", "array", ... for error messages.
  static std::string_view TypeName(Type type);

 private:
  friend class JsonBuilder;

  Type type_ = Type::kNull;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_ = 0.0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<Member> members_;
};

// Typed field access for objects read from files. Errors are INVALID_ARGUMENT and name the
// field and what was found, e.g. "field 'hidden_size': expected an integer, found string".
absl::StatusOr<int64_t> JsonInt(const JsonValue& object, std::string_view key);
absl::StatusOr<int64_t> JsonInt(const JsonValue& object, std::string_view key, int64_t fallback);
absl::StatusOr<double> JsonDouble(const JsonValue& object, std::string_view key);
absl::StatusOr<double> JsonDouble(const JsonValue& object, std::string_view key, double fallback);
absl::StatusOr<bool> JsonBool(const JsonValue& object, std::string_view key, bool fallback);
absl::StatusOr<std::string> JsonString(const JsonValue& object, std::string_view key);
absl::StatusOr<std::string> JsonString(const JsonValue& object, std::string_view key,
                                       std::string fallback);
absl::StatusOr<std::vector<int64_t>> JsonIntArray(const JsonValue& value, std::string_view what);
// OK when `value` (read from field `field`) is positive; else INVALID_ARGUMENT naming the field.
absl::Status RequirePositive(std::string_view field, int64_t value);

}  // namespace quiver
