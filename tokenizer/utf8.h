// UTF-8 validation for text a client sent. Invalid input is an error naming the byte offset,
// never a crash and never silently replaced.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace quiver::tokenizer {

// OK when `text` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF);
// otherwise INVALID_ARGUMENT "invalid UTF-8 at byte N". Thread-safe.
absl::Status ValidateUtf8(std::string_view text);

// Byte offset of the first invalid sequence, or text.size() when valid.
size_t FindInvalidUtf8(std::string_view text);

}  // namespace quiver::tokenizer
