// How a refused or failed request is answered, in one place: handlers, parsers, the tokenizer and
// the replicas speak absl::Status (with the field and the reason attached here), and each API
// dialect turns a status into its own status code and error body:
//
//   OpenAI (/v1/embeddings, /v1/models, vLLM's /v1/score, /v1/rerank, Perplexity):
//       {"error": {"message", "type", "param", "code"}}
//   TEI (/embed, /rerank, /tokenize, ...): {"error": message, "error_type": one of TEI's
//       ErrorType values: Unhealthy, Backend, Overloaded, Validation, Tokenizer, Empty}
//   Cohere (/v1/embed, /v2/embed, /v2/rerank): {"message": message}
//
// The status codes, before a dialect adjusts them for a reason:
//   INVALID_ARGUMENT 400 (a value the server cannot use), FAILED_PRECONDITION 422 (a field of the
//   wrong type or shape), OUT_OF_RANGE 413 (a size limit), UNAUTHENTICATED 401, PERMISSION_DENIED
//   403, NOT_FOUND 404, RESOURCE_EXHAUSTED 429 (with Retry-After), UNAVAILABLE 503,
//   DEADLINE_EXCEEDED 504, CANCELLED 499, anything else 500.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "gateway/http_server.h"

namespace quiver::gateway::api {

enum class Dialect { kOpenAi, kTei, kCohere };

// Why a request was refused, where the status code alone does not say it. Each dialect may
// answer a reason with its own code: an input longer than the model accepts is 400 for OpenAI and
// Cohere clients (their SDKs raise BadRequestError) and 413 Validation for TEI's.
enum class Reason {
  kNone,
  kEmpty,          // an empty batch or input (TEI: Empty)
  kTokenizer,      // the tokenizer refused the text (TEI: Tokenizer)
  kInputTooLong,   // more tokens than the model accepts, truncation not asked for
  kTooManyInputs,  // more inputs than --max-inputs
  kModelNotFound,  // "model" names another model
  kNoRoute,        // no such path, or not with this method
};

// A status naming the request field it is about (OpenAI's "param") and why.
absl::Status FieldError(absl::StatusCode code, std::string_view field, std::string_view message,
                        Reason reason = Reason::kNone);
std::string ErrorField(const absl::Status& status);  // "" when none was attached
Reason ErrorReason(const absl::Status& status);

// The HTTP status code for `status` on a route of `dialect`.
int HttpStatusFor(Dialect dialect, const absl::Status& status);
// TEI's error_type for `status`.
std::string_view TeiErrorType(const absl::Status& status);
// OpenAI's error "type" for `status`.
std::string_view OpenAiErrorType(const absl::Status& status);

// The whole answer: status code, the dialect's body, Retry-After on 429.
HttpResponse ErrorResponse(Dialect dialect, const absl::Status& status);

}  // namespace quiver::gateway::api
