// Base64 (RFC 4648, section 4: the standard alphabet, padded with '='), as OpenAI's
// encoding_format "base64" and its peers send embeddings.
#pragma once

#include <string>
#include <string_view>

namespace quiver {

std::string Base64(std::string_view bytes);

}  // namespace quiver
