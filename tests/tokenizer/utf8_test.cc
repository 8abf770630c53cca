#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace quiver::tokenizer {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  for (const char* ok :
       {"", "plain ascii", "Grüße", "日本語のテキスト", "emoji 👩‍👩‍👧 zwj",
        "\xF4\x8F\xBF\xBF" /* U+10FFFF */, "\xED\x9F\xBF" /* U+D7FF */}) {
    EXPECT_TRUE(ValidateUtf8(ok).ok()) << ok;
  }
}

TEST(Utf8Test, NamesTheByteOffsetOfTheFirstBadSequence) {
  struct Case {
    std::string text;
    size_t offset;
  };
  const Case cases[] = {
      {std::string("ab\x80", 3), 2},            // lone continuation byte
      {std::string("abc\xC3", 4), 3},           // truncated 2-byte sequence
      {std::string("\xC0\xAF", 2), 0},          // overlong '/'
      {std::string("x\xE0\x80\xAF", 4), 1},     // overlong 3-byte
      {std::string("ok\xED\xA0\x80", 5), 2},    // UTF-16 surrogate D800
      {std::string("\xF4\x90\x80\x80", 4), 0},  // above U+10FFFF
      {std::string("\xF5\x80\x80\x80", 4), 0},  // invalid lead byte
      {std::string("é\xE2\x82", 4), 2},         // truncated 3-byte after valid 2-byte
      {std::string("a\xE2\x28\xA1", 4), 1},     // bad second byte
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FindInvalidUtf8(c.text), c.offset);
    absl::Status status = ValidateUtf8(c.text);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "invalid UTF-8 at byte " + std::to_string(c.offset));
  }
}

}  // namespace
}  // namespace quiver::tokenizer
