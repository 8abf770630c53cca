// The one place where absl status codes (from replicas, the tokenizer and request validation)
// become HTTP status codes.
#pragma once

#include "absl/status/status.h"

namespace quiver::gateway {

// 400 bad input, 401 unauthenticated, 404 not found, 413 a size limit, 429 overload,
// 503 no replica, 504 deadline, 500 anything else.
int HttpStatusFor(const absl::Status& status);

}  // namespace quiver::gateway
