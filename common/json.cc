#include "common/json.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include "common/strings.h"
#include "simdjson.h"

namespace quiver {

class JsonBuilder {
 public:
  // Recursion depth is bounded by simdjson's own limit (1024 by default).
  static JsonValue Build(simdjson::dom::element element) {
    JsonValue out;
    switch (element.type()) {
      case simdjson::dom::element_type::NULL_VALUE:
        out.type_ = JsonValue::Type::kNull;
        break;
      case simdjson::dom::element_type::BOOL:
        out.type_ = JsonValue::Type::kBool;
        out.bool_ = element.get_bool().value_unsafe();
        break;
      case simdjson::dom::element_type::INT64:
        out.type_ = JsonValue::Type::kInt;
        out.int_ = element.get_int64().value_unsafe();
        break;
      case simdjson::dom::element_type::UINT64: {
        uint64_t value = element.get_uint64().value_unsafe();
        if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          out.type_ = JsonValue::Type::kInt;
          out.int_ = static_cast<int64_t>(value);
        } else {
          out.type_ = JsonValue::Type::kDouble;
          out.double_ = static_cast<double>(value);
        }
        break;
      }
      case simdjson::dom::element_type::DOUBLE:
        out.type_ = JsonValue::Type::kDouble;
        out.double_ = element.get_double().value_unsafe();
        break;
      case simdjson::dom::element_type::STRING:
        out.type_ = JsonValue::Type::kString;
        out.string_ = std::string(element.get_string().value_unsafe());
        break;
      case simdjson::dom::element_type::ARRAY: {
        out.type_ = JsonValue::Type::kArray;
        simdjson::dom::array array = element.get_array().value_unsafe();
        out.items_.reserve(array.size());
        for (simdjson::dom::element child : array) out.items_.push_back(Build(child));
        break;
      }
      case simdjson::dom::element_type::OBJECT: {
        out.type_ = JsonValue::Type::kObject;
        simdjson::dom::object object = element.get_object().value_unsafe();
        out.members_.reserve(object.size());
        for (simdjson::dom::key_value_pair field : object) {
          out.members_.emplace_back(std::string(field.key), Build(field.value));
        }
        break;
      }
    }
    return out;
  }
};

namespace {

// `text` with every integer literal too large for 64 bits written as a decimal fraction
// ("123...890" -> "123...890.0"), so that it parses as the double it is closest to: JSON puts no
// bound on a number's size, and simdjson 3.0 refuses such integers (NUMBER_ERROR).
std::string WidenBigIntegers(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[i + 1];
        i += 2;
        continue;
      }
      if (c == '"') in_string = false;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      ++i;
      continue;
    }
    if ((c >= '0' && c <= '9') || c == '-') {
      // One whole number: -?digits(.digits)?([eE][+-]?digits)?
      const auto digits = [&] {
        while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
      };
      const size_t start = i;
      if (c == '-') ++i;
      digits();
      const size_t integer_end = i;
      bool plain = true;
      if (i < text.size() && text[i] == '.') {
        plain = false;
        ++i;
        digits();
      }
      if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        plain = false;
        ++i;
        if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
        digits();
      }
      out.append(text.substr(start, i - start));
      if (plain && integer_end - start >= 19) out += ".0";
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

}  // namespace

absl::StatusOr<JsonValue> JsonValue::Parse(std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  simdjson::error_code error = parser.parse(padded).get(root);
  std::string widened;
  if (error == simdjson::NUMBER_ERROR) {
    widened = WidenBigIntegers(text);
    if (widened.size() != text.size()) {
      simdjson::padded_string retry(widened);
      padded.swap(retry);
      error = parser.parse(padded).get(root);
    }
  }
  if (error != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(StrCat("invalid JSON: ", simdjson::error_message(error)));
  }
  return JsonBuilder::Build(root);
}

namespace {

// JsonView keeps simdjson's types as bytes; these put them back.
static_assert(sizeof(simdjson::dom::element) == 16 &&
              std::is_trivially_copyable_v<simdjson::dom::element>);
static_assert(sizeof(simdjson::dom::array) == 16 &&
              std::is_trivially_copyable_v<simdjson::dom::array>);
static_assert(sizeof(simdjson::dom::array::iterator) == 16 &&
              std::is_trivially_copyable_v<simdjson::dom::array::iterator>);

template <typename T>
T FromBytes(const std::array<std::byte, 16>& bytes) {
  T out;
  std::memcpy(static_cast<void*>(&out), bytes.data(), sizeof(T));
  return out;
}

template <typename T>
std::array<std::byte, 16> ToBytes(const T& value) {
  std::array<std::byte, 16> out;
  std::memcpy(out.data(), static_cast<const void*>(&value), sizeof(T));
  return out;
}

simdjson::dom::element Element(const std::array<std::byte, 16>& bytes) {
  return FromBytes<simdjson::dom::element>(bytes);
}

}  // namespace

struct JsonDocument::Parser {
  simdjson::dom::parser parser;
};

JsonDocument::JsonDocument() = default;
JsonDocument::JsonDocument(JsonDocument&&) noexcept = default;
JsonDocument& JsonDocument::operator=(JsonDocument&&) noexcept = default;
JsonDocument::~JsonDocument() = default;

absl::StatusOr<JsonDocument> JsonDocument::Parse(std::string_view text) {
  JsonDocument doc;
  doc.parser_ = std::make_unique<Parser>();
  simdjson::dom::element root;
  simdjson::error_code error;
  {
    // The padded copy lives only while parsing: strings are copied into the document.
    simdjson::padded_string padded(text);
    error = doc.parser_->parser.parse(padded).get(root);
  }
  if (error == simdjson::NUMBER_ERROR) {
    const std::string widened = WidenBigIntegers(text);
    if (widened.size() != text.size()) {
      simdjson::padded_string padded(widened);
      error = doc.parser_->parser.parse(padded).get(root);
    }
  }
  if (error != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(StrCat("invalid JSON: ", simdjson::error_message(error)));
  }
  doc.root_.element_ = ToBytes(root);
  return doc;
}

JsonView::Type JsonView::type() const {
  const simdjson::dom::element e = Element(element_);
  switch (e.type()) {
    case simdjson::dom::element_type::NULL_VALUE:
      return Type::kNull;
    case simdjson::dom::element_type::BOOL:
      return Type::kBool;
    case simdjson::dom::element_type::INT64:
      return Type::kInt;
    // UINT64 only beyond int64: simdjson reads the rest as INT64.
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      return Type::kDouble;
    case simdjson::dom::element_type::STRING:
      return Type::kString;
    case simdjson::dom::element_type::ARRAY:
      return Type::kArray;
    case simdjson::dom::element_type::OBJECT:
      return Type::kObject;
  }
  return Type::kNull;
}

bool JsonView::as_bool() const { return Element(element_).get_bool().value_unsafe(); }

int64_t JsonView::as_int() const { return Element(element_).get_int64().value_unsafe(); }

double JsonView::as_double() const {
  const simdjson::dom::element e = Element(element_);
  switch (e.type()) {
    case simdjson::dom::element_type::INT64:
      return static_cast<double>(e.get_int64().value_unsafe());
    case simdjson::dom::element_type::UINT64:
      return static_cast<double>(e.get_uint64().value_unsafe());
    default:
      return e.get_double().value_unsafe();
  }
}

std::string_view JsonView::as_string() const {
  return Element(element_).get_string().value_unsafe();
}

std::optional<JsonView> JsonView::Find(std::string_view key) const {
  const simdjson::dom::element e = Element(element_);
  if (e.type() != simdjson::dom::element_type::OBJECT) return std::nullopt;
  const simdjson::dom::object object = e.get_object().value_unsafe();
  for (simdjson::dom::key_value_pair field : object) {
    if (field.key == key) {
      JsonView out;
      out.element_ = ToBytes(field.value);
      return out;
    }
  }
  return std::nullopt;
}

JsonView::Items JsonView::items() const {
  Items out;
  const simdjson::dom::element e = Element(element_);
  if (e.type() == simdjson::dom::element_type::ARRAY) {
    out.array_ = ToBytes(e.get_array().value_unsafe());
  }
  return out;
}

JsonView::Items::iterator JsonView::Items::begin() const {
  iterator it;
  if (array_ != std::array<std::byte, 16>{}) {
    it.state_ = ToBytes(FromBytes<simdjson::dom::array>(array_).begin());
  }
  return it;
}

JsonView::Items::iterator JsonView::Items::end() const {
  iterator it;
  if (array_ != std::array<std::byte, 16>{}) {
    it.state_ = ToBytes(FromBytes<simdjson::dom::array>(array_).end());
  }
  return it;
}

size_t JsonView::Items::size() const {
  if (array_ == std::array<std::byte, 16>{}) return 0;
  const auto array = FromBytes<simdjson::dom::array>(array_);
  const size_t size = array.size();
  if (size < 0xFFFFFF) return size;
  // simdjson's count saturates at 2^24 - 1: count the rest.
  size_t count = 0;
  for (auto it = array.begin(); it != array.end(); ++it) ++count;
  return count;
}

JsonView JsonView::Items::iterator::operator*() const {
  JsonView out;
  out.element_ = ToBytes(*FromBytes<simdjson::dom::array::iterator>(state_));
  return out;
}

JsonView::Items::iterator& JsonView::Items::iterator::operator++() {
  auto it = FromBytes<simdjson::dom::array::iterator>(state_);
  ++it;
  state_ = ToBytes(it);
  return *this;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (const Member& member : members_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

std::string_view JsonValue::TypeName(Type type) {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "boolean";
    case Type::kInt:
      return "integer";
    case Type::kDouble:
      return "number";
    case Type::kString:
      return "string";
    case Type::kArray:
      return "array";
    case Type::kObject:
      return "object";
  }
  return "unknown";
}

namespace {

absl::Status WrongType(std::string_view key, std::string_view expected, const JsonValue& found) {
  return absl::InvalidArgumentError(StrCat("field '", key, "': expected ", expected, ", found ",
                                           JsonValue::TypeName(found.type())));
}

absl::Status Missing(std::string_view key) {
  return absl::InvalidArgumentError(StrCat("missing field '", key, "'"));
}

const JsonValue* Present(const JsonValue& object, std::string_view key) {
  const JsonValue* value = object.Find(key);
  return (value == nullptr || value->is_null()) ? nullptr : value;
}

}  // namespace

absl::StatusOr<int64_t> JsonInt(const JsonValue& object, std::string_view key) {
  const JsonValue* value = Present(object, key);
  if (value == nullptr) return Missing(key);
  if (!value->is_int()) return WrongType(key, "an integer", *value);
  return value->as_int();
}

absl::StatusOr<int64_t> JsonInt(const JsonValue& object, std::string_view key, int64_t fallback) {
  if (Present(object, key) == nullptr) return fallback;
  return JsonInt(object, key);
}

absl::Status RequirePositive(std::string_view field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat("field '", field, "' must be positive, got ", value));
}

absl::StatusOr<double> JsonDouble(const JsonValue& object, std::string_view key) {
  const JsonValue* value = Present(object, key);
  if (value == nullptr) return Missing(key);
  if (!value->is_number()) return WrongType(key, "a number", *value);
  return value->as_double();
}

absl::StatusOr<double> JsonDouble(const JsonValue& object, std::string_view key, double fallback) {
  if (Present(object, key) == nullptr) return fallback;
  return JsonDouble(object, key);
}

absl::StatusOr<bool> JsonBool(const JsonValue& object, std::string_view key, bool fallback) {
  const JsonValue* value = Present(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_bool()) return WrongType(key, "a boolean", *value);
  return value->as_bool();
}

absl::StatusOr<std::string> JsonString(const JsonValue& object, std::string_view key) {
  const JsonValue* value = Present(object, key);
  if (value == nullptr) return Missing(key);
  if (!value->is_string()) return WrongType(key, "a string", *value);
  return value->as_string();
}

absl::StatusOr<std::string> JsonString(const JsonValue& object, std::string_view key,
                                       std::string fallback) {
  if (Present(object, key) == nullptr) return fallback;
  return JsonString(object, key);
}

absl::StatusOr<std::vector<int64_t>> JsonIntArray(const JsonValue& value, std::string_view what) {
  if (!value.is_array()) return WrongType(what, "an array of integers", value);
  std::vector<int64_t> out;
  out.reserve(value.items().size());
  for (const JsonValue& item : value.items()) {
    if (!item.is_int()) return WrongType(what, "an array of integers", item);
    out.push_back(item.as_int());
  }
  return out;
}

}  // namespace quiver
