#include "common/json_writer.h"

#include <cassert>
#include <cmath>

#include "common/strings.h"
#include "fmt/format.h"

namespace quiver {
namespace {

void AppendQuoted(std::string& out, std::string_view s) {
  out += '"';
  AppendJsonEscaped(out, s);
  out += '"';
}

}  // namespace

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ += ',';
    has_element_.back() = true;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  assert(!has_element_.empty() && !after_key_);
  has_element_.pop_back();
  out_ += '}';
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  assert(!has_element_.empty() && !after_key_);
  has_element_.pop_back();
  out_ += ']';
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  assert(!has_element_.empty() && !after_key_);
  if (has_element_.back()) out_ += ',';
  has_element_.back() = true;
  AppendQuoted(out_, key);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendQuoted(out_, value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", value);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", value);
  return *this;
}

JsonWriter& JsonWriter::Float(float value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_ += "null";
  } else {
    char buf[32];
    out_.append(buf, fmt::format_to(buf, "{}", value));
  }
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_ += "null";
  } else {
    char buf[40];
    out_.append(buf, fmt::format_to(buf, "{}", value));
  }
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::Raw(std::string_view json) {
  BeforeValue();
  out_ += json;
  return *this;
}

JsonWriter& JsonWriter::FloatArray(std::span<const float> values) {
  BeginArray();
  char buf[32];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out_ += ',';
    if (std::isfinite(values[i])) {
      out_.append(buf, fmt::format_to(buf, "{}", values[i]));
    } else {
      out_ += "null";
    }
  }
  has_element_.back() = !values.empty();
  return EndArray();
}

}  // namespace quiver
