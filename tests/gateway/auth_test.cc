// The key check (gateway/api/auth.h) on requests made by hand.
#include "gateway/api/auth.h"

#include <gtest/gtest.h>

#include <string>

namespace quiver::gateway::api {
namespace {

HttpRequest WithAuthorization(const std::string& value) {
  HttpRequest r;
  r.headers["authorization"] = value;
  return r;
}

TEST(AuthTest, TheBearerSchemeInAnyCaseAndTheExactKey) {
  const std::string key = "s3cret-key";
  EXPECT_TRUE(HasKey(WithAuthorization("Bearer s3cret-key"), key));
  EXPECT_TRUE(HasKey(WithAuthorization("bearer s3cret-key"), key));
  EXPECT_TRUE(HasKey(WithAuthorization("BEARER s3cret-key"), key));
  EXPECT_FALSE(HasKey(WithAuthorization("Basic s3cret-key"), key));
  EXPECT_FALSE(HasKey(WithAuthorization("Bearers3cret-key"), key));
  EXPECT_FALSE(HasKey(WithAuthorization("s3cret-key"), key));
  EXPECT_FALSE(HasKey(HttpRequest{}, key));  // no header
}

TEST(AuthTest, AKeyThatDiffersAnywhereOrInLengthIsRefused) {
  const std::string key = "abcdef";
  EXPECT_FALSE(HasKey(WithAuthorization("Bearer xbcdef"), key));   // first character
  EXPECT_FALSE(HasKey(WithAuthorization("Bearer abcdex"), key));   // last
  EXPECT_FALSE(HasKey(WithAuthorization("Bearer abcde"), key));    // a prefix
  EXPECT_FALSE(HasKey(WithAuthorization("Bearer abcdefg"), key));  // longer
  EXPECT_FALSE(HasKey(WithAuthorization("Bearer "), key));
  EXPECT_FALSE(HasKey(WithAuthorization("Bearer ABCDEF"), key));  // the key's case counts
  // A key with a NUL in it is compared byte for byte too.
  const std::string with_nul("ab\0cd", 5);
  EXPECT_TRUE(HasKey(WithAuthorization(std::string("Bearer ab\0cd", 12)), with_nul));
  EXPECT_FALSE(HasKey(WithAuthorization("Bearer ab"), with_nul));
}

}  // namespace
}  // namespace quiver::gateway::api
