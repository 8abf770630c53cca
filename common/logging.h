// Process-wide logging set-up (spdlog). One line per start, stop and configuration at info
// level; nothing per request above debug.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace quiver {

// Level is one of trace, debug, info, warn, error, off; INVALID_ARGUMENT names it otherwise.
absl::Status InitLogging(std::string_view level);

}  // namespace quiver
