// A small streaming JSON writer for responses: values are appended to one string, commas and
// escapes handled here, floats in their shortest form that reads back as the same float. Misuse
// (a value where a key is due, an unclosed container) is a programming error and asserts in
// debug builds; the writer never allocates per value beyond the output string.
//
//   JsonWriter w;
//   w.BeginObject().Key("object").String("list").Key("data").BeginArray();
//   ... w.EndArray().EndObject();
//   std::string body = std::move(w).Take();
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace quiver {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // The next member's name (inside an object only).
  JsonWriter& Key(std::string_view key);

  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Float(float value);    // shortest round-trip form; NaN and infinities as null
  JsonWriter& Double(double value);  // the same for doubles
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // An already-serialized JSON value, written as it is.
  JsonWriter& Raw(std::string_view json);

  // A list of floats as one array.
  JsonWriter& FloatArray(std::span<const float> values);

  const std::string& str() const { return out_; }
  std::string Take() && { return std::move(out_); }

 private:
  void BeforeValue();

  std::string out_;
  // Per open container: whether it already has an element (for the comma).
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace quiver
