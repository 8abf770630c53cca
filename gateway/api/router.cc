#include "gateway/api/router.h"

namespace quiver::gateway::api {

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX escapes decoded; a malformed escape is kept as it is.
std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 && HexDigit(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

bool MatchPath(std::string_view pattern, std::string_view path, std::string& parameter) {
  while (true) {
    const size_t p = pattern.find('{');
    if (p == std::string_view::npos) return pattern == path;
    if (path.substr(0, p) != pattern.substr(0, p)) return false;
    const size_t close = pattern.find('}', p);
    if (close == std::string_view::npos) return false;
    if (close + 1 == pattern.size()) {
      // A parameter that ends the pattern takes the rest of the path: model ids have slashes
      // (GET /v1/models/BAAI/bge-small-en-v1.5).
      if (path.size() <= p) return false;
      parameter = PercentDecode(path.substr(p));
      return true;
    }
    const size_t end = path.find('/', p);
    const std::string_view segment =
        path.substr(p, end == std::string_view::npos ? std::string_view::npos : end - p);
    if (segment.empty()) return false;
    parameter = PercentDecode(segment);
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
