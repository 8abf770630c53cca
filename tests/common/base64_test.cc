#include "common/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace quiver {
namespace {

// RFC 4648, section 10's test vectors: every length modulo 3, so each padding case.
TEST(Base64Test, TheRfcsVectors) {
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
}

// Bytes above 127 and zeros (a float's bytes are any of the 256): the last two letters of the
// alphabet and the first, and no sign extension.
TEST(Base64Test, HighBytesAndZeros) {
  EXPECT_EQ(Base64(std::string("\xff\xff\xff", 3)), "////");
  EXPECT_EQ(Base64(std::string("\xfb\xef\xbe", 3)), "++++");
  EXPECT_EQ(Base64(std::string("\0\0\0", 3)), "AAAA");
  EXPECT_EQ(Base64(std::string("\x80", 1)), "gA==");
  // 1.0f little-endian (00 00 80 3f), as OpenAI's base64 embeddings carry it.
  EXPECT_EQ(Base64(std::string("\x00\x00\x80\x3f", 4)), "AACAPw==");
}

}  // namespace
}  // namespace quiver
