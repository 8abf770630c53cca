#include "gateway/api/cors.h"

#include <algorithm>
#include <cctype>

#include "common/strings.h"

namespace quiver::gateway::api {
namespace {

std::string_view Header(const HttpRequest& request, const std::string& name) {
  auto it = request.headers.find(name);
  return it == request.headers.end() ? std::string_view() : std::string_view(it->second);
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// scheme://host[:port] as a browser serializes an origin (RFC 6454 section 6.1): a lower-case
// scheme and host (a name, an IPv4 address or a bracketed IPv6 one), nothing after the port.
bool IsSerializedOrigin(std::string_view origin) {
  if (origin == "null") return true;  // what opaque origins (file:, sandboxed frames) send
  const size_t sep = origin.find("://");
  if (sep == std::string_view::npos || sep == 0) return false;
  const std::string_view scheme = origin.substr(0, sep);
  if (!(scheme[0] >= 'a' && scheme[0] <= 'z')) return false;
  for (char c : scheme) {
    if (!IsLowerAlnum(c) && c != '+' && c != '-' && c != '.') return false;
  }
  std::string_view rest = origin.substr(sep + 3);
  std::string_view host = rest;
  std::string_view port;
  if (rest.starts_with('[')) {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (char c : rest.substr(1, close - 1)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
      if (c >= 'A' && c <= 'F') return false;
    }
    host = rest.substr(0, close + 1);
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return false;
      port = rest.substr(1);
      if (port.empty()) return false;
    }
  } else {
    const size_t colon = rest.find(':');
    host = rest.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) return false;
    }
    if (host.empty() || host.front() == '.' || host.back() == '.') return false;
    for (char c : host) {
      if (!IsLowerAlnum(c) && c != '-' && c != '.') return false;
    }
  }
  if (port.size() > 5) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A header name (RFC 9110 token).
bool IsToken(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

// Access-Control-Request-Headers, lower-cased, or "" where an entry is not a header name.
std::string RequestedHeaders(std::string_view list) {
  std::string out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    if (name.empty()) continue;
    if (!IsToken(name)) return "";
    if (!out.empty()) out += ", ";
    for (char c : name) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

absl::StatusOr<CorsPolicy> CorsPolicy::Create(const std::vector<std::string>& origins) {
  CorsPolicy policy;
  for (const std::string& origin : origins) {
    if (origin == "*") {
      policy.any_ = true;
      continue;
    }
    if (!IsSerializedOrigin(origin)) {
      return absl::InvalidArgumentError(StrCat(
          "--cors-allow-origin: '", origin,
          "' is not an origin as browsers send it: scheme://host[:port] in lower case, without "
          "a path or a trailing slash (e.g. https://search.example.com), or * for any"));
    }
    if (std::find(policy.origins_.begin(), policy.origins_.end(), origin) ==
        policy.origins_.end()) {
      policy.origins_.push_back(origin);
    }
  }
  return policy;
}

bool CorsPolicy::Allows(std::string_view origin) const {
  if (origin.empty()) return false;
  return any_ || std::find(origins_.begin(), origins_.end(), origin) != origins_.end();
}

bool CorsPolicy::IsPreflight(const HttpRequest& request) {
  return request.method == "OPTIONS" && !Header(request, "origin").empty() &&
         !Header(request, "access-control-request-method").empty();
}

void CorsPolicy::Decorate(const HttpRequest& request, HttpResponse& response) const {
  if (!enabled()) return;
  // An answer that depends on Origin must say so to caches, whether or not this one allowed it.
  if (!any_) response.headers["Vary"] = "Origin";
  const std::string_view origin = Header(request, "origin");
  if (!Allows(origin)) return;
  response.headers["Access-Control-Allow-Origin"] = any_ ? "*" : std::string(origin);
  response.headers["Access-Control-Expose-Headers"] = "Retry-After, X-Request-Id";
}

void CorsPolicy::DecorateRefusal(const HttpRequest& request, HttpResponse& response) const {
  Decorate(request, response);
  if (any_ && Header(request, "origin").empty()) {
    response.headers["Access-Control-Allow-Origin"] = "*";
    response.headers["Access-Control-Expose-Headers"] = "Retry-After, X-Request-Id";
  }
}

HttpResponse CorsPolicy::Preflight(const HttpRequest& request,
                                   std::string_view allowed_methods) const {
  HttpResponse response;
  response.status = 204;
  response.content_type = "text/plain";
  Decorate(request, response);
  response.headers["Vary"] = any_ ? "Access-Control-Request-Method, Access-Control-Request-Headers"
                                  : "Origin, Access-Control-Request-Method, "
                                    "Access-Control-Request-Headers";
  response.headers["Access-Control-Allow-Methods"] = std::string(allowed_methods);
  const std::string headers = RequestedHeaders(Header(request, "access-control-request-headers"));
  if (!headers.empty()) response.headers["Access-Control-Allow-Headers"] = headers;
  response.headers["Access-Control-Max-Age"] = "600";
  response.headers.erase("Access-Control-Expose-Headers");  // for actual answers only
  return response;
}

}  // namespace quiver::gateway::api
