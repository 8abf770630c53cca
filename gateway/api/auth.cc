#include "gateway/api/auth.h"

#include <cctype>
#include <string_view>

namespace quiver::gateway::api {

bool HasKey(const HttpRequest& request, const std::string& key) {
  auto it = request.headers.find("authorization");
  if (it == request.headers.end()) return false;
  std::string_view value = it->second;
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return false;
  }
  value.remove_prefix(kScheme.size());
  unsigned char diff = value.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i) {
    diff |= static_cast<unsigned char>(key[i] ^ (i < value.size() ? value[i] : 0));
  }
  return diff == 0;
}

}  // namespace quiver::gateway::api
