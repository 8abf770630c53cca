#include "gateway/api/cors.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace quiver::gateway::api {
namespace {

HttpRequest Request(std::string method, std::map<std::string, std::string> headers) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = "/v1/embeddings";
  r.headers = std::move(headers);
  return r;
}

CorsPolicy Policy(const std::vector<std::string>& origins) {
  absl::StatusOr<CorsPolicy> policy = CorsPolicy::Create(origins);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return policy.ok() ? *std::move(policy) : CorsPolicy();
}

TEST(CorsTest, OriginsAreCheckedAsBrowsersSerializeThem) {
  for (const char* good :
       {"*", "https://search.example.com", "http://localhost:3000", "http://127.0.0.1:8080",
        "http://[::1]:5173", "null", "chrome-extension://abcdef"}) {
    EXPECT_TRUE(CorsPolicy::Create({good}).ok()) << good;
  }
  // A trailing slash, a path, upper case, no scheme, an empty port, a port too long: none of
  // these ever equals an Origin header, so they are refused rather than never matching.
  for (const char* bad :
       {"https://example.com/", "https://example.com/app", "https://Example.com",
        "HTTPS://example.com", "example.com", "https://example.com:", "https://example.com:123456",
        "https://", "", "https://exa mple.com", "http://[::1", "http://[]"}) {
    absl::StatusOr<CorsPolicy> policy = CorsPolicy::Create({bad});
    ASSERT_FALSE(policy.ok()) << "accepted: " << bad;
    EXPECT_NE(policy.status().message().find("--cors-allow-origin"), std::string::npos);
    EXPECT_NE(policy.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

TEST(CorsTest, DisabledPolicyAddsNothing) {
  const CorsPolicy policy;
  EXPECT_FALSE(policy.enabled());
  HttpResponse response;
  policy.Decorate(Request("POST", {{"origin", "https://a.example"}}), response);
  EXPECT_TRUE(response.headers.empty());
}

TEST(CorsTest, AllowedOriginIsEchoedAndOthersAreNot) {
  const CorsPolicy policy = Policy({"https://a.example", "http://localhost:3000"});
  HttpResponse allowed;
  policy.Decorate(Request("POST", {{"origin", "https://a.example"}}), allowed);
  EXPECT_EQ(allowed.headers["Access-Control-Allow-Origin"], "https://a.example");
  EXPECT_EQ(allowed.headers["Vary"], "Origin");
  EXPECT_EQ(allowed.headers["Access-Control-Expose-Headers"], "Retry-After, X-Request-Id");

  HttpResponse other;
  policy.Decorate(Request("POST", {{"origin", "https://evil.example"}}), other);
  EXPECT_EQ(other.headers.count("Access-Control-Allow-Origin"), 0u);
  EXPECT_EQ(other.headers["Vary"], "Origin");  // the answer still depends on Origin

  HttpResponse none;  // no Origin: not a browser's cross-origin call
  policy.Decorate(Request("POST", {}), none);
  EXPECT_EQ(none.headers.count("Access-Control-Allow-Origin"), 0u);
}

TEST(CorsTest, AnyOriginAnswersStar) {
  const CorsPolicy policy = Policy({"*"});
  HttpResponse response;
  policy.Decorate(Request("GET", {{"origin", "https://whoever.example"}}), response);
  EXPECT_EQ(response.headers["Access-Control-Allow-Origin"], "*");
  EXPECT_EQ(response.headers.count("Vary"), 0u);
}

// The HTTP server's refusals may be written before Origin was read (a connection over
// --max-connections is refused unread): "*" allows any page to read them still, a list cannot.
TEST(CorsTest, RefusalsWithoutOriginCarryStarOnlyWhenAnyOriginIsAllowed) {
  HttpResponse any;
  Policy({"*"}).DecorateRefusal(HttpRequest(), any);
  EXPECT_EQ(any.headers["Access-Control-Allow-Origin"], "*");
  EXPECT_EQ(any.headers["Access-Control-Expose-Headers"], "Retry-After, X-Request-Id");

  const CorsPolicy listed = Policy({"https://a.example"});
  HttpResponse unread;
  listed.DecorateRefusal(HttpRequest(), unread);
  EXPECT_EQ(unread.headers.count("Access-Control-Allow-Origin"), 0u);
  EXPECT_EQ(unread.headers["Vary"], "Origin");
  HttpResponse read;  // Origin was among the fields read: as any answer
  listed.DecorateRefusal(Request("POST", {{"origin", "https://a.example"}}), read);
  EXPECT_EQ(read.headers["Access-Control-Allow-Origin"], "https://a.example");

  HttpResponse off;
  CorsPolicy().DecorateRefusal(HttpRequest(), off);
  EXPECT_TRUE(off.headers.empty());
}

TEST(CorsTest, PreflightListsMethodsAndTheHeadersAskedFor) {
  const CorsPolicy policy = Policy({"https://a.example"});
  const HttpRequest preflight =
      Request("OPTIONS", {{"origin", "https://a.example"},
                          {"access-control-request-method", "POST"},
                          {"access-control-request-headers", "Content-Type, Authorization"}});
  ASSERT_TRUE(CorsPolicy::IsPreflight(preflight));
  EXPECT_FALSE(CorsPolicy::IsPreflight(Request("OPTIONS", {{"origin", "https://a.example"}})));
  EXPECT_FALSE(CorsPolicy::IsPreflight(Request(
      "POST", {{"origin", "https://a.example"}, {"access-control-request-method", "POST"}})));
  HttpResponse r = policy.Preflight(preflight, "POST");
  EXPECT_EQ(r.status, 204);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(r.headers["Access-Control-Allow-Origin"], "https://a.example");
  EXPECT_EQ(r.headers["Access-Control-Allow-Methods"], "POST");
  EXPECT_EQ(r.headers["Access-Control-Allow-Headers"], "content-type, authorization");
  EXPECT_EQ(r.headers["Access-Control-Max-Age"], "600");
  EXPECT_EQ(r.headers.count("Access-Control-Expose-Headers"), 0u);
  EXPECT_NE(r.headers["Vary"].find("Access-Control-Request-Headers"), std::string::npos);

  // A header list that is not header names is not echoed.
  HttpResponse odd = policy.Preflight(
      Request("OPTIONS", {{"origin", "https://a.example"},
                          {"access-control-request-method", "POST"},
                          {"access-control-request-headers", "content-type, x\r\ny"}}),
      "POST");
  EXPECT_EQ(odd.headers.count("Access-Control-Allow-Headers"), 0u);
}

}  // namespace
}  // namespace quiver::gateway::api
