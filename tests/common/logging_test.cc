#include "common/logging.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/json.h"
#include "spdlog/spdlog.h"

namespace quiver {
namespace {

// simdjson parses it (and checks its UTF-8), so a line that passes is what a log collector reads.
JsonValue ParseLine(const std::string& line) {
  absl::StatusOr<JsonValue> json = JsonValue::Parse(line);
  EXPECT_TRUE(json.ok()) << json.status() << "\n" << line;
  return json.ok() ? *std::move(json) : JsonValue();
}

TEST(LoggingTest, JsonLineHoldsTheRecordAndItsTypedFields) {
  // 2026-12-04T19:45:43.171Z
  const std::string line = JsonLogLine(1796413543171, "info", "quiver", 42, "access",
                                       {{"method", std::string_view("POST")},
                                        {"status", int64_t{200}},
                                        {"duration_ms", 1.25},
                                        {"bad", std::numeric_limits<double>::quiet_NaN()}});
  const JsonValue json = ParseLine(line);
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json.Find("timestamp")->as_string(), "2026-12-04T19:45:43.171Z");
  EXPECT_EQ(json.Find("level")->as_string(), "info");
  EXPECT_EQ(json.Find("logger")->as_string(), "quiver");
  EXPECT_EQ(json.Find("thread")->as_int(), 42);
  EXPECT_EQ(json.Find("message")->as_string(), "access");
  EXPECT_EQ(json.Find("method")->as_string(), "POST");
  ASSERT_TRUE(json.Find("status")->is_int());
  EXPECT_EQ(json.Find("status")->as_int(), 200);
  EXPECT_DOUBLE_EQ(json.Find("duration_ms")->as_double(), 1.25);
  EXPECT_TRUE(json.Find("bad")->is_null());  // JSON has no NaN
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(LoggingTest, JsonLineEscapesAndReplacesInvalidUtf8) {
  // Quotes, a backslash, a newline and a control character; valid 2-, 3- and 4-byte sequences
  // kept; then bytes that are not UTF-8: a lone continuation byte, an overlong '/', a surrogate
  // (U+D800), a sequence cut short at the end.
  const std::string message =
      std::string("a\"b\\c\nd\x01 é € 😀 ") + "\x80" + "\xC0\xAF" + "\xED\xA0\x80" + "\xE2\x82";
  const JsonValue json = ParseLine(JsonLogLine(0, "warning", "quiver", 1, message));
  EXPECT_EQ(json.Find("timestamp")->as_string(), "1970-01-01T00:00:00.000Z");
  const std::string replaced = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(json.Find("message")->as_string(), "a\"b\\c\nd\x01 é € 😀 " + replaced + replaced +
                                                   replaced + replaced + replaced + replaced +
                                                   replaced + replaced);
}

TEST(LoggingTest, UnknownFormatIsRefusedNamingTheFlag) {
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  absl::StatusOr<LogFormat> bad = ParseLogFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--log-format"), std::string::npos);
  EXPECT_NE(bad.status().message().find("xml"), std::string::npos);
  EXPECT_FALSE(InitLogging("loud").ok());
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(LoggingTest, JsonFormatWritesOneObjectPerRecordOnStderr) {
  ASSERT_TRUE(InitLogging("info", LogFormat::kJson).ok());
  testing::internal::CaptureStderr();
  spdlog::warn("model {} loaded", "m\"1");
  LogInfoWithFields("access",
                    {{"route", std::string_view("/v1/embeddings")}, {"status", int64_t{413}}});
  spdlog::debug("below the level: not written");
  const std::vector<std::string> lines = Lines(testing::internal::GetCapturedStderr());
  ASSERT_TRUE(InitLogging("info", LogFormat::kText).ok());
  ASSERT_EQ(lines.size(), 2u);
  const JsonValue first = ParseLine(lines[0]);
  EXPECT_EQ(first.Find("level")->as_string(), "warning");
  EXPECT_EQ(first.Find("message")->as_string(), "model m\"1 loaded");
  EXPECT_EQ(first.Find("route"), nullptr);  // fields belong to their own record only
  const JsonValue second = ParseLine(lines[1]);
  EXPECT_EQ(second.Find("message")->as_string(), "access");
  EXPECT_EQ(second.Find("route")->as_string(), "/v1/embeddings");
  EXPECT_EQ(second.Find("status")->as_int(), 413);
}

TEST(LoggingTest, TextFormatWritesFieldsAsKeyValuePairs) {
  ASSERT_TRUE(InitLogging("info", LogFormat::kText).ok());
  testing::internal::CaptureStderr();
  LogInfoWithFields("access", {{"method", std::string_view("POST")},
                               {"note", std::string_view("two words")},
                               {"status", int64_t{200}}});
  const std::vector<std::string> lines = Lines(testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" info [quiver] access method=POST note=\"two words\" status=200"),
            std::string::npos)
      << lines[0];
}

}  // namespace
}  // namespace quiver
