#include "common/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/json.h"

namespace quiver {
namespace {

TEST(JsonWriterTest, NestedValuesWithCommas) {
  JsonWriter w;
  w.BeginObject().Key("a").Int(1).Key("b").BeginArray().Bool(true).Null().String("x").EndArray();
  w.Key("c").BeginObject().EndObject().Key("d").BeginArray().EndArray().EndObject();
  EXPECT_EQ(w.str(), R"({"a":1,"b":[true,null,"x"],"c":{},"d":[]})");
}

TEST(JsonWriterTest, EscapesAndRoundTrips) {
  const std::string text = "quote \" backslash \\ newline \n tab \t bell \x07 ünïcode";
  JsonWriter w;
  w.BeginObject().Key("k\"ey").String(text).EndObject();
  absl::StatusOr<JsonValue> back = JsonValue::Parse(w.str());
  ASSERT_TRUE(back.ok()) << w.str();
  EXPECT_EQ(back->Find("k\"ey")->as_string(), text);
}

TEST(JsonWriterTest, FloatsReadBackExactly) {
  const std::vector<float> v = {0.1f, -3.4028235e38f, 1.17549435e-38f, 1e-45f, 123456.789f, 0.0f};
  JsonWriter w;
  w.FloatArray(v);
  absl::StatusOr<JsonValue> back = JsonValue::Parse(w.str());
  ASSERT_TRUE(back.ok()) << w.str();
  ASSERT_EQ(back->items().size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(static_cast<float>(back->items()[i].as_double()), v[i]) << w.str();
  }
  JsonWriter empty;
  empty.BeginArray().FloatArray({}).Int(3).EndArray();
  EXPECT_EQ(empty.str(), "[[],3]");
}

TEST(JsonWriterTest, NonFiniteIsNull) {
  JsonWriter w;
  w.BeginArray().Float(std::numeric_limits<float>::quiet_NaN()).Double(INFINITY).EndArray();
  EXPECT_EQ(w.str(), "[null,null]");
  EXPECT_EQ(JsonQuote("a\"b"), R"("a\"b")");
}

}  // namespace
}  // namespace quiver
