#include "gateway/http_status.h"

#include <gtest/gtest.h>

namespace quiver::gateway {
namespace {

TEST(HttpStatusTest, MapsEachDocumentedCase) {
  EXPECT_EQ(HttpStatusFor(absl::OkStatus()), 200);
  EXPECT_EQ(HttpStatusFor(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(HttpStatusFor(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(HttpStatusFor(absl::NotFoundError("x")), 404);
  EXPECT_EQ(HttpStatusFor(absl::OutOfRangeError("x")), 413);
  EXPECT_EQ(HttpStatusFor(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpStatusFor(absl::UnavailableError("x")), 503);
  EXPECT_EQ(HttpStatusFor(absl::DeadlineExceededError("x")), 504);
  EXPECT_EQ(HttpStatusFor(absl::InternalError("x")), 500);
}

}  // namespace
}  // namespace quiver::gateway
