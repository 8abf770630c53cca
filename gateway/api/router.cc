#include "gateway/api/router.h"

namespace quiver::gateway::api {

bool MatchPath(std::string_view pattern, std::string_view path, std::string& parameter) {
  while (true) {
    const size_t p = pattern.find('{');
    if (p == std::string_view::npos) return pattern == path;
    if (path.substr(0, p) != pattern.substr(0, p)) return false;
    const size_t close = pattern.find('}', p);
    if (close == std::string_view::npos) return false;
    const size_t end = path.find('/', p);
    const std::string_view segment =
        path.substr(p, end == std::string_view::npos ? std::string_view::npos : end - p);
    if (segment.empty()) return false;
    parameter = std::string(segment);
    pattern = pattern.substr(close + 1);
    path = end == std::string_view::npos ? std::string_view() : path.substr(end);
  }
}

void Router::Add(Route route) { routes_.push_back(std::move(route)); }

const Route* Router::Find(std::string_view method, std::string_view path, RouteMatch& match,
                          bool& path_known) const {
  path_known = false;
  for (const Route& route : routes_) {
    std::string parameter;
    if (!MatchPath(route.path, path, parameter)) continue;
    path_known = true;
    if (route.method == method) {
      match.parameter = std::move(parameter);
      return &route;
    }
  }
  return nullptr;
}

std::string Router::AllowedMethods(std::string_view path) const {
  std::string out;
  for (const Route& route : routes_) {
    std::string parameter;
    if (!MatchPath(route.path, path, parameter)) continue;
    if (out.find(route.method) != std::string::npos) continue;
    if (!out.empty()) out += ", ";
    out += route.method;
  }
  return out;
}

}  // namespace quiver::gateway::api
