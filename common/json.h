// A small read-only JSON document for configuration files (config.json, modules.json,
// safetensors headers, tokenizer.json, fixtures). Parsing goes through simdjson inside json.cc;
// no simdjson header leaks out, so the engine can read configs without a JSON dependency.
//
// Values are immutable after Parse and safe to read from many threads.
//
// Request bodies take JsonDocument / JsonView instead: a view into simdjson's parsed tape, with no
// second tree built from it. A JsonValue costs about a hundred bytes per element (one token id
// "1," of an 8 MB body cost 60 times its text); a document costs its tape (8 to 16 bytes per
// element) and the strings once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
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
  const std::vector<JsonValue>& items() const { return items_; }   // array elements
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

class JsonDocument;

// One value of a JsonDocument; valid while the document lives. Cheap to copy (16 bytes).
class JsonView {
 public:
  using Type = JsonValue::Type;

  Type type() const;
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_number() const { return type() == Type::kInt || type() == Type::kDouble; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  // Unchecked accessors: call only after the matching is_*() test.
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // any number (an integer beyond int64 as the nearest double)
  std::string_view as_string() const;

  // The first member named `key` of an object; nullopt when absent or when this is no object.
  std::optional<JsonView> Find(std::string_view key) const;

  // An array's elements, in order (forward iteration; size() is constant time).
  class Items {
   public:
    class iterator {
     public:
      using iterator_category = std::forward_iterator_tag;
      using value_type = JsonView;
      using difference_type = std::ptrdiff_t;
      using pointer = void;
      using reference = JsonView;
      JsonView operator*() const;
      iterator& operator++();
      bool operator==(const iterator& other) const { return state_ == other.state_; }
      bool operator!=(const iterator& other) const { return !(*this == other); }

     private:
      friend class Items;
      std::array<std::byte, 16> state_{};
    };
    iterator begin() const;
    iterator end() const;
    size_t size() const;
    bool empty() const { return size() == 0; }

   private:
    friend class JsonView;
    std::array<std::byte, 16> array_{};
  };
  // Empty when this is not an array.
  Items items() const;

 private:
  friend class JsonDocument;
  // simdjson's dom::element, kept opaque so that no simdjson header leaks out of json.cc.
  std::array<std::byte, 16> element_{};
};

// A parsed request body. Movable; the views it hands out stay valid across a move.
class JsonDocument {
 public:
  // INVALID_ARGUMENT with simdjson's reason when `text` is not one JSON document. Integers too
  // large for 64 bits are read as the nearest double, as JsonValue::Parse does.
  static absl::StatusOr<JsonDocument> Parse(std::string_view text);

  JsonDocument(JsonDocument&&) noexcept;
  JsonDocument& operator=(JsonDocument&&) noexcept;
  ~JsonDocument();

  JsonView root() const { return root_; }

 private:
  JsonDocument();
  struct Parser;
  std::unique_ptr<Parser> parser_;
  JsonView root_;
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
