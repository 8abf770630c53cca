// The HTTP APIs' key check (--api-key).
#pragma once

#include <string>

#include "gateway/http_server.h"

namespace quiver::gateway::api {

// Whether `request` carries "Authorization: Bearer <key>" (the scheme in any case, as RFC 9110
// says). The key is compared in time independent of where it differs.
bool HasKey(const HttpRequest& request, const std::string& key);

}  // namespace quiver::gateway::api
