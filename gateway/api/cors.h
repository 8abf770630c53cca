// Cross-origin calls from browsers (the Fetch standard's CORS protocol), for web pages on other
// origins that call the API directly (`--cors-allow-origin`). Off by default: without origins,
// answers carry no CORS headers and browsers keep other origins' scripts from reading them;
// servers, curl and SDKs are not affected either way.
//
// With origins: an answer to a request whose Origin is allowed says so
// (Access-Control-Allow-Origin, the origin itself or "*"; Vary: Origin unless any origin is
// allowed; Retry-After and X-Request-Id exposed), errors included (the HTTP server's own refusals
// through Api::DecorateRefusal; one written before the Origin field was read carries "*" when any
// origin is allowed, and nothing a page can read otherwise). A preflight (OPTIONS with Origin and
// Access-Control-Request-Method) is answered 204 without the API key (browsers never send it
// there): the path's methods, the request headers asked for (Authorization and Content-Type
// among them), cached 600 s by the browser; the API answers 403 (naming the flag) to one from an
// origin not allowed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gateway/http_server.h"

namespace quiver::gateway::api {

class CorsPolicy {
 public:
  CorsPolicy() = default;
  // Each origin is "*" (any) or scheme://host[:port], as browsers send it in Origin: lower-case
  // scheme and host, no path, no trailing slash. Anything else is INVALID_ARGUMENT naming
  // --cors-allow-origin and the value (a trailing slash would never match, silently).
  static absl::StatusOr<CorsPolicy> Create(const std::vector<std::string>& origins);

  bool enabled() const { return any_ || !origins_.empty(); }
  bool Allows(std::string_view origin) const;
  // OPTIONS with Origin and Access-Control-Request-Method: a browser asking before its request.
  static bool IsPreflight(const HttpRequest& request);
  // Adds the answer's CORS headers for the request's Origin (none without one, or when it is not
  // allowed).
  void Decorate(const HttpRequest& request, HttpResponse& response) const;
  // The same for the HTTP server's own refusals, which may be written before the Origin field
  // was read (a connection over --max-connections is refused unread, a 431 stops mid-headers):
  // without an Origin, "*" still allows any origin, and a list of origins can allow none.
  void DecorateRefusal(const HttpRequest& request, HttpResponse& response) const;
  // The answer to an allowed origin's preflight for a path whose methods are `allowed_methods`
  // ("GET, POST"): 204 and the allowances.
  HttpResponse Preflight(const HttpRequest& request, std::string_view allowed_methods) const;

 private:
  bool any_ = false;
  std::vector<std::string> origins_;
};

}  // namespace quiver::gateway::api
