// quiver's OpenAPI 3.1 document (gateway/api/openapi.json, compiled in), served at
// GET /openapi.json: every route the gateway serves, its request and response bodies.
#pragma once

#include <string_view>

namespace quiver::gateway::api {

std::string_view OpenApiDocument();

}  // namespace quiver::gateway::api
