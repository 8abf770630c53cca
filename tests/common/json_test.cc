#include "common/json.h"

#include <gtest/gtest.h>

namespace quiver {
namespace {

TEST(JsonTest, ParsesNestedDocumentInOrder) {
  absl::StatusOr<JsonValue> json =
      JsonValue::Parse(R"({"b": [1, -2, 3.5, "x", null, true], "a": {"k": 9007199254740993}})");
  ASSERT_TRUE(json.ok()) << json.status();
  ASSERT_EQ(json->members().size(), 2u);
  EXPECT_EQ(json->members()[0].first, "b");  // document order kept
  const JsonValue* b = json->Find("b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->items().size(), 6u);
  EXPECT_EQ(b->items()[1].as_int(), -2);
  EXPECT_DOUBLE_EQ(b->items()[2].as_double(), 3.5);
  EXPECT_EQ(b->items()[3].as_string(), "x");
  EXPECT_TRUE(b->items()[4].is_null());
  EXPECT_TRUE(b->items()[5].as_bool());
  // 2^53 + 1 does not survive a double; integers are kept exact.
  EXPECT_EQ(json->Find("a")->Find("k")->as_int(), 9007199254740993);
}

TEST(JsonTest, MalformedDocumentIsAnError) {
  for (const char* bad : {"", "{", R"({"a": })", "[1, 2", R"({"a": 1} trailing)", "nul"}) {
    absl::StatusOr<JsonValue> json = JsonValue::Parse(bad);
    EXPECT_FALSE(json.ok()) << "accepted: " << bad;
    if (!json.ok()) {
      EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(JsonTest, TypedFieldErrorsNameTheField) {
  JsonValue json = *JsonValue::Parse(R"({"hidden_size": "384", "eps": 1e-12, "n": 3})");
  absl::StatusOr<int64_t> hidden = JsonInt(json, "hidden_size");
  ASSERT_FALSE(hidden.ok());
  EXPECT_NE(hidden.status().message().find("'hidden_size'"), std::string::npos);
  EXPECT_NE(hidden.status().message().find("found string"), std::string::npos);
  absl::StatusOr<int64_t> missing = JsonInt(json, "vocab_size");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing field 'vocab_size'"), std::string::npos);
  EXPECT_EQ(*JsonInt(json, "absent", 7), 7);
  EXPECT_DOUBLE_EQ(*JsonDouble(json, "eps"), 1e-12);
  EXPECT_DOUBLE_EQ(*JsonDouble(json, "n"), 3.0);  // an integer is a number too
}

// JsonDocument (the request bodies' parse) reads every document as JsonValue does.
void ExpectSame(const JsonValue& value, const JsonView& view, const std::string& where) {
  ASSERT_EQ(value.type(), view.type()) << where;
  switch (value.type()) {
    case JsonValue::Type::kNull:
      break;
    case JsonValue::Type::kBool:
      EXPECT_EQ(value.as_bool(), view.as_bool()) << where;
      break;
    case JsonValue::Type::kInt:
      EXPECT_EQ(value.as_int(), view.as_int()) << where;
      break;
    case JsonValue::Type::kDouble:
      EXPECT_EQ(value.as_double(), view.as_double()) << where;
      break;
    case JsonValue::Type::kString:
      EXPECT_EQ(value.as_string(), view.as_string()) << where;
      break;
    case JsonValue::Type::kArray: {
      ASSERT_EQ(value.items().size(), view.items().size()) << where;
      size_t i = 0;
      for (const JsonView item : view.items()) {
        ExpectSame(value.items()[i], item, where + "[" + std::to_string(i) + "]");
        ++i;
      }
      EXPECT_EQ(i, value.items().size()) << where;
      break;
    }
    case JsonValue::Type::kObject:
      for (const auto& [key, member] : value.members()) {
        // Find gives the first member of a name, as JsonValue::Find does.
        const std::optional<JsonView> found = view.Find(key);
        ASSERT_TRUE(found.has_value()) << where << "." << key;
        ExpectSame(*value.Find(key), *found, where + "." + key);
      }
      break;
  }
}

TEST(JsonDocumentTest, ReadsEveryDocumentAsJsonValueDoes) {
  for (const char* text :
       {R"({"a": [1, -2, 3.5, 1e300, true, false, null, "x\u00e9\n"], "b": {"c": {}}, "d": []})",
        R"([[], [[]], {"k": [1, {"k": 2}]}])", R"("just a string")", "42", "-0.0", "null",
        R"({"big": 123456789012345678901234567890, "u64": 18446744073709551615,
            "max": 9223372036854775807, "min": -9223372036854775808})",
        R"({"dup": 1, "dup": 2})", R"({"ids": [101, 7592, 102], "empty": ""})"}) {
    absl::StatusOr<JsonValue> value = JsonValue::Parse(text);
    absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(text);
    ASSERT_TRUE(value.ok()) << text;
    ASSERT_TRUE(doc.ok()) << text << ": " << doc.status();
    ExpectSame(*value, doc->root(), text);
  }
}

TEST(JsonDocumentTest, ViewsOutliveAMoveOfTheirDocument) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(R"({"input": ["a", "b"]})");
  ASSERT_TRUE(doc.ok());
  const JsonView input = *doc->root().Find("input");
  JsonDocument moved = *std::move(doc);
  ASSERT_TRUE(input.is_array());
  EXPECT_EQ(input.items().size(), 2u);
  EXPECT_EQ((*input.items().begin()).as_string(), "a");
  EXPECT_FALSE(moved.root().Find("absent").has_value());
  EXPECT_FALSE(input.Find("input").has_value());          // not an object
  EXPECT_TRUE((*input.items().begin()).items().empty());  // not an array
}

TEST(JsonDocumentTest, MalformedDocumentIsAnError) {
  for (const char* bad : {"", "{", R"({"a": })", "[1, 2", R"({"a": 1} trailing)", "nul", "[1, 2,]",
                          "\"\\x\"", "{\"a\" 1}", "[\"\xff\"]"}) {
    absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(bad);
    EXPECT_FALSE(doc.ok()) << "accepted: " << bad;
    if (!doc.ok()) {
      EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(JsonDocumentTest, LargeArraysCountEveryElement) {
  // simdjson's own element count saturates at 2^24 - 1.
  std::string text = "[";
  const size_t n = (1u << 24) + 5;
  text.reserve(2 * n + 2);
  for (size_t i = 0; i < n; ++i) text += i ? ",0" : "0";
  text += "]";
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(text);
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc->root().items().size(), n);
}

}  // namespace
}  // namespace quiver
