#include "gateway/api/errors.h"

#include <optional>

#include "absl/strings/cord.h"
#include "common/json_writer.h"
#include "common/strings.h"

namespace quiver::gateway::api {
namespace {

constexpr absl::string_view kFieldKey = "quiver/field";
constexpr absl::string_view kReasonKey = "quiver/reason";

std::string_view ReasonName(Reason reason) {
  switch (reason) {
    case Reason::kNone:
      return "";
    case Reason::kEmpty:
      return "empty";
    case Reason::kTokenizer:
      return "tokenizer";
    case Reason::kInputTooLong:
      return "input_too_long";
    case Reason::kTooManyInputs:
      return "too_many_inputs";
    case Reason::kModelNotFound:
      return "model_not_found";
    case Reason::kNoRoute:
      return "no_route";
  }
  return "";
}

int BaseStatusCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kFailedPrecondition:
      return 422;
    case absl::StatusCode::kOutOfRange:
      return 413;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    default:
      return 500;
  }
}

}  // namespace

absl::Status FieldError(absl::StatusCode code, std::string_view field, std::string_view message,
                        Reason reason) {
  absl::Status status(code, absl::string_view(message.data(), message.size()));
  const std::string_view reason_name = ReasonName(reason);
  if (!field.empty()) {
    status.SetPayload(kFieldKey, absl::Cord(absl::string_view(field.data(), field.size())));
  }
  if (reason != Reason::kNone) {
    status.SetPayload(kReasonKey,
                      absl::Cord(absl::string_view(reason_name.data(), reason_name.size())));
  }
  return status;
}

std::string ErrorField(const absl::Status& status) {
  const auto field = status.GetPayload(kFieldKey);
  return field ? std::string(*field) : std::string();
}

Reason ErrorReason(const absl::Status& status) {
  const auto name = status.GetPayload(kReasonKey);
  if (!name) return Reason::kNone;
  for (Reason r : {Reason::kEmpty, Reason::kTokenizer, Reason::kInputTooLong,
                   Reason::kTooManyInputs, Reason::kModelNotFound, Reason::kNoRoute}) {
    const std::string_view n = ReasonName(r);
    if (*name == absl::string_view(n.data(), n.size())) return r;
  }
  return Reason::kNone;
}

int HttpStatusFor(Dialect dialect, const absl::Status& status) {
  const Reason reason = ErrorReason(status);
  switch (dialect) {
    case Dialect::kOpenAi:
    case Dialect::kCohere:
      // OpenAI answers an over-long input, too many inputs and an empty input 400
      // invalid_request_error (its SDK raises BadRequestError); Cohere does the same.
      if (reason == Reason::kInputTooLong || reason == Reason::kTooManyInputs ||
          reason == Reason::kEmpty || reason == Reason::kTokenizer) {
        return 400;
      }
      break;
    case Dialect::kTei:
      // TEI: Validation is 413 (input too long, batch too large), Tokenizer 422, Empty 400.
      if (reason == Reason::kInputTooLong || reason == Reason::kTooManyInputs) return 413;
      if (reason == Reason::kTokenizer) return 422;
      if (reason == Reason::kEmpty) return 400;
      break;
  }
  return BaseStatusCode(status.code());
}

std::string_view TeiErrorType(const absl::Status& status) {
  switch (ErrorReason(status)) {
    case Reason::kEmpty:
      return "Empty";
    case Reason::kTokenizer:
      return "Tokenizer";
    default:
      break;
  }
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      return "Overloaded";
    case absl::StatusCode::kUnavailable:
      return "Unhealthy";
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kCancelled:
      return "Validation";
    default:
      return "Backend";
  }
}

std::string_view OpenAiErrorType(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnauthenticated:
      return "authentication_error";
    case absl::StatusCode::kPermissionDenied:
      return "permission_error";
    case absl::StatusCode::kNotFound:
      return ErrorReason(status) == Reason::kModelNotFound ? "invalid_request_error"
                                                           : "not_found_error";
    case absl::StatusCode::kResourceExhausted:
      return "rate_limit_error";
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return "service_unavailable_error";
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kCancelled:
      return "invalid_request_error";
    default:
      return "server_error";
  }
}

namespace {

// OpenAI's "code": a short machine-readable name where one is known.
std::string_view OpenAiCode(const absl::Status& status) {
  switch (ErrorReason(status)) {
    case Reason::kInputTooLong:
      return "context_length_exceeded";
    case Reason::kModelNotFound:
      return "model_not_found";
    case Reason::kTooManyInputs:
      return "too_many_inputs";
    case Reason::kEmpty:
      return "empty_input";
    default:
      break;
  }
  if (status.code() == absl::StatusCode::kUnauthenticated) return "invalid_api_key";
  if (status.code() == absl::StatusCode::kResourceExhausted) return "overloaded";
  return "";
}

}  // namespace

HttpResponse ErrorResponse(Dialect dialect, const absl::Status& status) {
  HttpResponse r;
  r.status = HttpStatusFor(dialect, status);
  const std::string field = ErrorField(status);
  JsonWriter w;
  switch (dialect) {
    case Dialect::kOpenAi: {
      const std::string_view code = OpenAiCode(status);
      w.BeginObject().Key("error").BeginObject();
      w.Key("message").String(ToStd(status.message()));
      w.Key("type").String(OpenAiErrorType(status));
      w.Key("param");
      field.empty() ? w.Null() : w.String(field);
      w.Key("code");
      code.empty() ? w.Null() : w.String(code);
      w.EndObject().EndObject();
      break;
    }
    case Dialect::kTei:
      w.BeginObject().Key("error").String(ToStd(status.message()));
      w.Key("error_type").String(TeiErrorType(status)).EndObject();
      break;
    case Dialect::kCohere:
      w.BeginObject().Key("message").String(ToStd(status.message())).EndObject();
      break;
  }
  r.body = std::move(w).Take();
  if (status.code() == absl::StatusCode::kResourceExhausted) r.headers["Retry-After"] = "1";
  return r;
}

}  // namespace quiver::gateway::api
