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

}  // namespace
}  // namespace quiver
