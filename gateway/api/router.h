// The route table: {method, path} to a handler, with the route's dialect (how its errors look),
// whether it needs the API key, and the fixed name its metrics are labelled with. A path segment
// written "{name}" matches any one segment (GET /v1/models/{model}). Requests that match no route
// are answered 404 (405 with Allow when only the method is wrong) and counted under one label.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/api/errors.h"
#include "gateway/http_server.h"

namespace quiver::gateway::api {

// What a handler gets besides the request: the path's {parameter}, if its route has one.
struct RouteMatch {
  std::string parameter;
};

using RouteHandler = std::function<HttpResponse(const HttpRequest&, const RouteMatch&)>;

struct Route {
  std::string method;  // "GET" or "POST"
  std::string path;    // "/v1/embeddings", "/v1/models/{model}"
  Dialect dialect = Dialect::kTei;
  bool needs_key = true;  // false: /health, /ready, /metrics
  RouteHandler handler;
};

// The label of requests that matched no route.
inline constexpr std::string_view kUnmatchedRoute = "unmatched";

class Router {
 public:
  void Add(Route route);

  // The route for (method, path) or nullptr; `path_known` tells whether another method has it.
  const Route* Find(std::string_view method, std::string_view path, RouteMatch& match,
                    bool& path_known) const;
  // The methods that `path` has routes for, e.g. "GET, POST" (for 405's Allow).
  std::string AllowedMethods(std::string_view path) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
};

// Whether `path` matches `pattern` ("{x}" segments match any one non-empty segment); the value of
// the last parameter segment goes to `parameter`.
bool MatchPath(std::string_view pattern, std::string_view path, std::string& parameter);

}  // namespace quiver::gateway::api
