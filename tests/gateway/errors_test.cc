// The error map (gateway/api/errors.h): each status becomes each dialect's status code and body,
// and the route table matches paths and parameters.
#include "gateway/api/errors.h"

#include <gtest/gtest.h>

#include "common/json.h"
#include "gateway/api/router.h"

namespace quiver::gateway::api {
namespace {

JsonValue Parse(const std::string& text) {
  absl::StatusOr<JsonValue> v = JsonValue::Parse(text);
  EXPECT_TRUE(v.ok()) << text;
  return v.ok() ? *std::move(v) : JsonValue();
}

TEST(ErrorMapTest, BaseCodes) {
  for (Dialect d : {Dialect::kOpenAi, Dialect::kTei, Dialect::kCohere}) {
    EXPECT_EQ(HttpStatusFor(d, absl::InvalidArgumentError("x")), 400);
    EXPECT_EQ(HttpStatusFor(d, absl::FailedPreconditionError("x")), 422);
    EXPECT_EQ(HttpStatusFor(d, absl::OutOfRangeError("x")), 413);
    EXPECT_EQ(HttpStatusFor(d, absl::UnauthenticatedError("x")), 401);
    EXPECT_EQ(HttpStatusFor(d, absl::PermissionDeniedError("x")), 403);
    EXPECT_EQ(HttpStatusFor(d, absl::NotFoundError("x")), 404);
    EXPECT_EQ(HttpStatusFor(d, absl::ResourceExhaustedError("x")), 429);
    EXPECT_EQ(HttpStatusFor(d, absl::UnavailableError("x")), 503);
    EXPECT_EQ(HttpStatusFor(d, absl::DeadlineExceededError("x")), 504);
    EXPECT_EQ(HttpStatusFor(d, absl::CancelledError("x")), 499);
    EXPECT_EQ(HttpStatusFor(d, absl::InternalError("x")), 500);
  }
}

TEST(ErrorMapTest, ReasonsPerDialect) {
  const absl::Status too_long = FieldError(absl::StatusCode::kInvalidArgument, "input",
                                           "input 0 has 600 tokens", Reason::kInputTooLong);
  EXPECT_EQ(HttpStatusFor(Dialect::kOpenAi, too_long), 400);  // OpenAI: BadRequestError
  EXPECT_EQ(HttpStatusFor(Dialect::kCohere, too_long), 400);
  EXPECT_EQ(HttpStatusFor(Dialect::kTei, too_long), 413);  // TEI: Validation
  EXPECT_EQ(TeiErrorType(too_long), "Validation");
  const absl::Status many =
      FieldError(absl::StatusCode::kOutOfRange, "input", "too many", Reason::kTooManyInputs);
  EXPECT_EQ(HttpStatusFor(Dialect::kOpenAi, many), 400);
  EXPECT_EQ(HttpStatusFor(Dialect::kTei, many), 413);
  const absl::Status empty =
      FieldError(absl::StatusCode::kInvalidArgument, "inputs", "empty", Reason::kEmpty);
  EXPECT_EQ(HttpStatusFor(Dialect::kTei, empty), 400);
  EXPECT_EQ(TeiErrorType(empty), "Empty");
  const absl::Status tok =
      FieldError(absl::StatusCode::kInvalidArgument, "inputs", "bad UTF-8", Reason::kTokenizer);
  EXPECT_EQ(HttpStatusFor(Dialect::kTei, tok), 422);
  EXPECT_EQ(TeiErrorType(tok), "Tokenizer");
}

TEST(ErrorMapTest, TeiErrorTypesAreTeisEnum) {
  EXPECT_EQ(TeiErrorType(absl::ResourceExhaustedError("x")), "Overloaded");
  EXPECT_EQ(TeiErrorType(absl::UnavailableError("x")), "Unhealthy");
  EXPECT_EQ(TeiErrorType(absl::InternalError("x")), "Backend");
  EXPECT_EQ(TeiErrorType(absl::DeadlineExceededError("x")), "Backend");
  EXPECT_EQ(TeiErrorType(absl::FailedPreconditionError("x")), "Validation");
  EXPECT_EQ(TeiErrorType(absl::UnauthenticatedError("x")), "Validation");
  EXPECT_EQ(TeiErrorType(absl::NotFoundError("x")), "Validation");
}

TEST(ErrorMapTest, Bodies) {
  const absl::Status s = FieldError(absl::StatusCode::kFailedPrecondition, "dimensions",
                                    "'dimensions' must be \"positive\"");
  const JsonValue openai = Parse(ErrorResponse(Dialect::kOpenAi, s).body);
  const JsonValue* e = openai.Find("error");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->Find("message")->as_string(), "'dimensions' must be \"positive\"");
  EXPECT_EQ(e->Find("type")->as_string(), "invalid_request_error");
  EXPECT_EQ(e->Find("param")->as_string(), "dimensions");
  EXPECT_TRUE(e->Find("code")->is_null());
  const JsonValue tei = Parse(ErrorResponse(Dialect::kTei, s).body);
  EXPECT_EQ(tei.Find("error")->as_string(), "'dimensions' must be \"positive\"");
  EXPECT_EQ(tei.Find("error_type")->as_string(), "Validation");
  const JsonValue cohere = Parse(ErrorResponse(Dialect::kCohere, s).body);
  EXPECT_EQ(cohere.Find("message")->as_string(), "'dimensions' must be \"positive\"");

  const HttpResponse overloaded =
      ErrorResponse(Dialect::kTei, absl::ResourceExhaustedError("queue full (max_queued_tokens)"));
  EXPECT_EQ(overloaded.status, 429);
  EXPECT_EQ(overloaded.headers.at("Retry-After"), "1");
  EXPECT_EQ(Parse(overloaded.body).Find("error_type")->as_string(), "Overloaded");

  const JsonValue too_long =
      Parse(ErrorResponse(Dialect::kOpenAi, FieldError(absl::StatusCode::kInvalidArgument, "input",
                                                       "long", Reason::kInputTooLong))
                .body);
  EXPECT_EQ(too_long.Find("error")->Find("code")->as_string(), "context_length_exceeded");
  const JsonValue no_model =
      Parse(ErrorResponse(Dialect::kOpenAi, FieldError(absl::StatusCode::kNotFound, "model", "nope",
                                                       Reason::kModelNotFound))
                .body);
  EXPECT_EQ(no_model.Find("error")->Find("code")->as_string(), "model_not_found");
  EXPECT_EQ(no_model.Find("error")->Find("type")->as_string(), "invalid_request_error");
}

TEST(RouterTest, MatchesPathsAndParameters) {
  std::string p;
  EXPECT_TRUE(MatchPath("/v1/embeddings", "/v1/embeddings", p));
  EXPECT_FALSE(MatchPath("/v1/embeddings", "/v1/embeddings/x", p));
  EXPECT_TRUE(MatchPath("/v1/models/{model}", "/v1/models/all-MiniLM-L6-v2", p));
  EXPECT_EQ(p, "all-MiniLM-L6-v2");
  EXPECT_FALSE(MatchPath("/v1/models/{model}", "/v1/models/", p));
  EXPECT_TRUE(MatchPath("/v1/models/{model}", "/v1/models/BAAI/bge-small-en-v1.5", p));
  EXPECT_EQ(p, "BAAI/bge-small-en-v1.5");  // a last parameter takes the rest of the path
  EXPECT_TRUE(MatchPath("/v1/models/{model}", "/v1/models/BAAI%2Fbge%20x", p));
  EXPECT_EQ(p, "BAAI/bge x");
  EXPECT_TRUE(MatchPath("/v1/models/{model}", "/v1/models/a%2", p));
  EXPECT_EQ(p, "a%2");  // a malformed escape stays as it is
  EXPECT_FALSE(MatchPath("/v1/models/{model}", "/v1/model/a", p));

  Router router;
  const RouteHandler h = [](const HttpRequest&, const RouteMatch&) { return HttpResponse(); };
  router.Add({"POST", "/embed", Dialect::kTei, true, h});
  router.Add({"GET", "/info", Dialect::kTei, true, h});
  router.Add({"GET", "/v1/models/{model}", Dialect::kOpenAi, true, h});
  RouteMatch m;
  bool known = false;
  EXPECT_NE(router.Find("POST", "/embed", m, known), nullptr);
  EXPECT_EQ(router.Find("GET", "/embed", m, known), nullptr);
  EXPECT_TRUE(known);  // 405, not 404
  EXPECT_EQ(router.AllowedMethods("/embed"), "POST");
  EXPECT_EQ(router.Find("GET", "/nowhere", m, known), nullptr);
  EXPECT_FALSE(known);
  const Route* r = router.Find("GET", "/v1/models/x", m, known);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->path, "/v1/models/{model}");
  EXPECT_EQ(m.parameter, "x");
}

}  // namespace
}  // namespace quiver::gateway::api
