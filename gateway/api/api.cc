#include "gateway/api/api.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>

#include "common/json.h"
#include "common/json_writer.h"
#include "common/logging.h"
#include "common/strings.h"
#include "gateway/api/answers.h"
#include "gateway/api/auth.h"
#include "gateway/api/openapi.h"

namespace quiver::gateway::api {
namespace {

// The request being handled on this thread (Api::Handle), for the routes' calls: its chunks
// carry the trace on to the replicas.
thread_local const Api::RequestTrace* current_trace = nullptr;

// A client's X-Request-Id when it is one that is safe to echo and log (1-128 characters of
// letters, digits and ._:/+=-), else a new one: 32 random hex digits.
std::string RequestId(const HttpRequest& request) {
  if (auto it = request.headers.find("x-request-id"); it != request.headers.end()) {
    const std::string& id = it->second;
    bool ok = !id.empty() && id.size() <= 128;
    for (char c : id) {
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) ||
                  std::string_view("._:/+=-").find(c) != std::string_view::npos);
    }
    if (ok) return id;
  }
  return telemetry::RandomHexId(16);
}

using Clock = std::chrono::steady_clock;

}  // namespace

Api::Api(ModelDescription model, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
         std::shared_ptr<Dispatcher> dispatcher, ApiLimits limits, MetricsRegistry* metrics,
         bool access_log)
    : service_(std::move(model), std::move(tokenizer), std::move(dispatcher), std::move(limits),
               metrics),
      metrics_(metrics),
      access_log_(access_log) {
  AddRoutes();
  MakeRouteMetrics();
}

void Api::AddJson(std::string path, Dialect dialect,
                  HttpResponse (Api::*handler)(const JsonView&, Call&)) {
  router_.Add({"POST", std::move(path), dialect, true,
               [this, dialect, handler](const HttpRequest& request, const RouteMatch&) {
                 absl::StatusOr<JsonDocument> body = JsonDocument::Parse(request.body);
                 if (!body.ok()) {
                   return ErrorResponse(dialect, FieldError(absl::StatusCode::kInvalidArgument, "",
                                                            StrCat("malformed JSON body: ",
                                                                   body.status().message())));
                 }
                 Call call;
                 call.dialect = dialect;
                 call.context.client_gone = request.client_gone;
                 call.context.stopping = &stopping_;
                 if (current_trace != nullptr) {
                   call.context.traceparent = current_trace->downstream;
                 }
                 call.context.deadline = std::chrono::system_clock::now() +
                                         std::chrono::milliseconds(static_cast<int64_t>(
                                             service_.limits().request_timeout_s * 1000));
                 return (this->*handler)(body->root(), call);
               }});
}

void Api::AddRoutes() {
  const auto get = [this](std::string path, Dialect dialect, bool needs_key, RouteHandler h) {
    router_.Add({"GET", std::move(path), dialect, needs_key, std::move(h)});
  };
  get("/health", Dialect::kTei, false, [this](const HttpRequest&, const RouteMatch&) {
    if (service_.dispatcher().any_healthy()) return Json("{\"status\":\"ok\"}");
    return ErrorResponse(Dialect::kTei, absl::UnavailableError("no healthy replica"));
  });
  get("/ready", Dialect::kTei, false, [this](const HttpRequest&, const RouteMatch&) {
    const bool ready = ready_ && service_.dispatcher().any_healthy();
    return Json(StrCat("{\"ready\":", ready ? "true" : "false", "}"), ready ? 200 : 503);
  });
  get("/metrics", Dialect::kTei, false, [this](const HttpRequest&, const RouteMatch&) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = metrics_->Render();
    return r;
  });
  // The document names the served model where requests may name one.
  std::string document(OpenApiDocument());
  const std::string placeholder = "{{served_model}}", name = JsonEscape(service_.model().name);
  for (size_t at = document.find(placeholder); at != std::string::npos;
       at = document.find(placeholder, at + name.size())) {
    document.replace(at, placeholder.size(), name);
  }
  get("/openapi.json", Dialect::kTei, false,
      [document = std::move(document)](const HttpRequest&, const RouteMatch&) {
        return Json(document);
      });
  get("/info", Dialect::kTei, true,
      [this](const HttpRequest&, const RouteMatch&) { return Info(); });
  get("/v1/models", Dialect::kOpenAi, true,
      [this](const HttpRequest&, const RouteMatch&) { return Models(""); });
  // Infinity's (and OpenAI-compatible servers' without the /v1 prefix).
  get("/models", Dialect::kOpenAi, true,
      [this](const HttpRequest&, const RouteMatch&) { return Models(""); });
  get("/v1/models/{model}", Dialect::kOpenAi, true,
      [this](const HttpRequest&, const RouteMatch& m) { return Models(m.parameter); });

  AddJson("/v1/embeddings", Dialect::kOpenAi, &Api::OpenAiEmbeddings);
  AddJson("/embeddings", Dialect::kOpenAi, &Api::OpenAiEmbeddings);
  AddJson("/v1/contextualizedembeddings", Dialect::kOpenAi, &Api::Contextualized);
  AddJson("/embed", Dialect::kTei, &Api::TeiEmbed);
  AddJson("/embed_all", Dialect::kTei, &Api::TeiEmbedAll);
  AddJson("/", Dialect::kTei, &Api::TeiRoot);
  AddJson("/similarity", Dialect::kTei, &Api::TeiSimilarity);
  AddJson("/rerank", Dialect::kTei, &Api::TeiRerank);
  AddJson("/tokenize", Dialect::kTei, &Api::Tokenize);
  AddJson("/decode", Dialect::kTei, &Api::Decode);
  AddJson("/detokenize", Dialect::kOpenAi, &Api::Detokenize);
  AddJson("/predict", Dialect::kTei, &Api::Predict);
  AddJson("/classify", Dialect::kOpenAi, &Api::Classify);
  AddJson("/v1/classify", Dialect::kOpenAi, &Api::Classify);
  AddJson("/embed_sparse", Dialect::kTei, &Api::EmbedSparse);
  AddJson("/v1/rerank", Dialect::kOpenAi, &Api::VllmRerank);
  AddJson("/v2/rerank", Dialect::kCohere, &Api::CohereRerank);
  AddJson("/v1/embed", Dialect::kCohere, &Api::CohereEmbedV1);
  AddJson("/v2/embed", Dialect::kCohere, &Api::CohereEmbedV2);
  AddJson("/v1/score", Dialect::kOpenAi, &Api::Score);
  AddJson("/score", Dialect::kOpenAi, &Api::Score);
}

HttpResponse Api::Unauthorized(Dialect dialect) const {
  HttpResponse response = ErrorResponse(
      dialect, absl::UnauthenticatedError(
                   "missing or wrong API key (send the header Authorization: Bearer <key>)"));
  response.headers["WWW-Authenticate"] = "Bearer realm=\"quiver\"";  // RFC 9110 11.6.1
  return response;
}

namespace {

Histogram& RequestSeconds(MetricsRegistry& metrics, const std::string& endpoint) {
  return metrics.GetHistogram("quiver_http_request_seconds", "Request latency by route",
                              MetricsRegistry::ExponentialBuckets(0.0001, 2, 18),
                              MetricLabel("endpoint", endpoint));
}

Counter& RequestCount(MetricsRegistry& metrics, const std::string& endpoint, int status) {
  return metrics.GetCounter(
      "quiver_http_requests_total", "HTTP requests by route and status",
      StrCat(MetricLabel("endpoint", endpoint), ",", MetricLabel("status", StrCat(status))));
}

}  // namespace

void Api::MakeRouteMetrics() {
  std::vector<std::string> endpoints = {std::string(kUnmatchedRoute)};
  for (const Route& route : router_.routes()) endpoints.push_back(route.path);
  for (const std::string& endpoint : endpoints) {
    auto& metrics = route_metrics_[endpoint];
    if (metrics != nullptr) continue;  // a path with several methods
    metrics = std::make_unique<RouteMetrics>();
    metrics->seconds = &RequestSeconds(*metrics_, endpoint);
  }
}

void Api::CountRequest(const std::string& endpoint, int status, std::optional<double> seconds) {
  const auto it = route_metrics_.find(endpoint);
  RouteMetrics* route = it == route_metrics_.end() ? nullptr : it->second.get();
  if (seconds) (route ? *route->seconds : RequestSeconds(*metrics_, endpoint)).Observe(*seconds);
  if (route == nullptr || status < 0 || status >= static_cast<int>(route->by_status.size())) {
    RequestCount(*metrics_, endpoint, status).Inc();  // not expected: every label is a route's
    return;
  }
  std::atomic<Counter*>& slot = route->by_status[static_cast<size_t>(status)];
  Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {  // the registry gives every thread the same counter
    counter = &RequestCount(*metrics_, endpoint, status);
    slot.store(counter, std::memory_order_release);
  }
  counter->Inc();
}

std::optional<HttpResponse> Api::CheckHeaders(const HttpRequest& request) {
  if (service_.limits().api_key.empty()) return std::nullopt;
  RouteMatch match;
  bool path_known = false;
  const Route* route = router_.Find(request.method, request.target, match, path_known);
  if (route == nullptr || !route->needs_key || HasKey(request, service_.limits().api_key)) {
    return std::nullopt;  // the handler answers (404 / 405 need no key either)
  }
  HttpResponse response = Unauthorized(route->dialect);
  response.headers["X-Request-Id"] = RequestId(request);
  cors_.Decorate(request, response);  // a page's script may read why
  CountRequest(route->path, response.status);
  return response;
}

void Api::Trace(const HttpRequest& request, const HttpResponse& response,
                const std::string& endpoint, const std::string& request_id,
                const RequestTrace& trace, std::chrono::system_clock::time_point start) const {
  telemetry::Span span;
  span.trace_id = trace.trace_id;
  span.span_id = trace.span_id;
  span.parent_span_id = trace.parent_span_id;
  span.name = StrCat(request.method, " ", endpoint);
  span.start_unix_ns = telemetry::UnixNanos(start);
  span.end_unix_ns = telemetry::UnixNanos();
  span.error = response.status >= 500;
  span.attributes = {{"http.request.method", request.method},
                     {"http.route", endpoint},
                     {"http.response.status_code", int64_t{response.status}},
                     {"quiver.request_id", request_id},
                     {"quiver.model", service_.model().name},
                     {"http.response.body.size", static_cast<int64_t>(response.body.size())}};
  tracer_->Record(std::move(span));
}

Api::RequestTrace Api::StartTrace(const HttpRequest& request) const {
  RequestTrace trace;
  std::optional<telemetry::TraceParent> parent;
  auto header = request.headers.find("traceparent");
  if (header != request.headers.end()) parent = telemetry::ParseTraceParent(header->second);
  if (tracer_ != nullptr && (!parent || parent->sampled)) {
    trace.record = true;
    trace.trace_id = parent ? parent->trace_id : telemetry::RandomHexId(16);
    trace.span_id = telemetry::RandomHexId(8);
    if (parent) trace.parent_span_id = parent->parent_span_id;
    trace.downstream =
        StrCat("00-", trace.trace_id, "-", trace.span_id, "-", parent ? parent->flags : "01");
  } else if (parent) {
    trace.downstream = header->second;  // passed on as it came (a "not sampled" one included)
  }
  return trace;
}

Dialect Api::DialectOf(const HttpRequest& request, const Route* route) const {
  if (route != nullptr) return route->dialect;
  if (request.target.starts_with("/v1/")) return Dialect::kOpenAi;
  if (request.target.starts_with("/v2/")) return Dialect::kCohere;
  return Dialect::kTei;
}

HttpResponse Api::RenderRefusal(const HttpRequest& request, int status, std::string_view code,
                                const std::string& message) const {
  RouteMatch match;
  bool path_known = false;
  const Route* route = router_.Find(request.method, request.target, match, path_known);
  // A size limit is OUT_OF_RANGE (TEI: Validation, as its own 413s), the rest INVALID_ARGUMENT;
  // the server's status code stays (431 has no status of its own here).
  const absl::StatusCode kind = status == 413 || status == 431 ? absl::StatusCode::kOutOfRange
                                                               : absl::StatusCode::kInvalidArgument;
  HttpResponse response = ErrorResponse(DialectOf(request, route),
                                        absl::Status(kind, StrCat(message, " (", code, ")")));
  response.status = status;
  return response;
}

void Api::DecorateRefusal(const HttpRequest& request, HttpResponse& response) const {
  response.headers["X-Request-Id"] = RequestId(request);
  cors_.DecorateRefusal(request, response);
}

std::string Api::PathPattern(std::string_view path) const {
  std::string parameter;
  for (const Route& route : router_.routes()) {
    if (MatchPath(route.path, path, parameter)) return route.path;
  }
  return std::string(kUnmatchedRoute);
}

HttpResponse Api::Preflight(const HttpRequest& request, Dialect dialect) const {
  const std::string methods = router_.AllowedMethods(request.target);
  if (methods.empty()) {
    return ErrorResponse(dialect,
                         FieldError(absl::StatusCode::kNotFound, "",
                                    StrCat("no route for ", request.target), Reason::kNoRoute));
  }
  const auto origin = request.headers.find("origin");
  if (!cors_.Allows(origin->second)) {
    return ErrorResponse(
        dialect,
        absl::PermissionDeniedError(StrCat(
            "origin '", origin->second,
            "' may not call this server from a browser (allowed with --cors-allow-origin)")));
  }
  return cors_.Preflight(request, methods);
}

HttpResponse Api::Handle(const HttpRequest& request) {
  const Clock::time_point start = Clock::now();
  const auto wall_start = std::chrono::system_clock::now();
  RouteMatch match;
  bool path_known = false;
  const Route* route = router_.Find(request.method, request.target, match, path_known);
  const Dialect dialect = DialectOf(request, route);
  HttpResponse response;
  const RequestTrace trace = StartTrace(request);
  const bool preflight = cors_.enabled() && CorsPolicy::IsPreflight(request);
  if (preflight) {
    response = Preflight(request, dialect);
  } else if (route == nullptr && path_known) {
    response = ErrorResponse(
        dialect, FieldError(absl::StatusCode::kNotFound, "",
                            StrCat(request.method, " is not allowed on ", request.target,
                                   " (allowed: ", router_.AllowedMethods(request.target), ")"),
                            Reason::kNoRoute));
    response.status = 405;
    response.headers["Allow"] = router_.AllowedMethods(request.target);
  } else if (route == nullptr) {
    response = ErrorResponse(
        dialect,
        FieldError(absl::StatusCode::kNotFound, "",
                   StrCat("no route for ", request.method, " ", request.target), Reason::kNoRoute));
  } else if (route->needs_key && !service_.limits().api_key.empty() &&
             !HasKey(request, service_.limits().api_key)) {
    response = Unauthorized(dialect);
  } else {
    current_trace = &trace;
    response = route->handler(request, match);
    current_trace = nullptr;
  }
  const std::string request_id = RequestId(request);
  response.headers["X-Request-Id"] = request_id;
  if (!preflight) cors_.Decorate(request, response);
  // A preflight or a method the path does not take (405) is counted under the path's route.
  const std::string endpoint = route                     ? route->path
                               : preflight || path_known ? PathPattern(request.target)
                                                         : std::string(kUnmatchedRoute);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  CountRequest(endpoint, response.status, seconds);
  if (trace.record) Trace(request, response, endpoint, request_id, trace, wall_start);
  if (access_log_) {
    LogInfoWithFields("access", {{"method", std::string_view(request.method)},
                                 {"route", std::string_view(endpoint)},
                                 {"status", int64_t{response.status}},
                                 {"bytes", static_cast<int64_t>(response.body.size())},
                                 {"duration_ms", std::round(seconds * 1e6) / 1e3},
                                 {"request_id", std::string_view(request_id)}});
  }
  return response;
}

// ---- Model and server information --------------------------------------------------------------

HttpResponse Api::Info() const {
  const ModelDescription& m = service_.model();
  JsonWriter w;
  w.BeginObject();
  w.Key("model_id").String(m.name);
  w.Key("model_sha").Null();
  w.Key("model_dtype").String(m.dtype);
  w.Key("model_type").BeginObject();
  if (m.can_score) {
    // TEI: a sequence classifier with one label is a reranker, with more a classifier.
    w.Key(m.num_labels > 1 ? "classifier" : "reranker").BeginObject();
    // The names config.json's id2label gives (LABEL_i where it gives none).
    const auto label = [&m](int64_t i) {
      return i < static_cast<int64_t>(m.labels.size()) ? m.labels[static_cast<size_t>(i)]
                                                       : StrCat("LABEL_", i);
    };
    w.Key("id2label").BeginObject();
    for (int64_t i = 0; i < std::max<int64_t>(1, m.num_labels); ++i) {
      w.Key(StrCat(i)).String(label(i));
    }
    w.EndObject();
    w.Key("label2id").BeginObject();
    for (int64_t i = 0; i < std::max<int64_t>(1, m.num_labels); ++i) {
      w.Key(label(i)).Int(i);
    }
    w.EndObject().EndObject();
  } else {
    w.Key("embedding").BeginObject().Key("pooling").String(m.pooling).EndObject();
  }
  w.EndObject();
  if (!m.prompts.empty()) {
    w.Key("prompts").BeginObject();
    for (const auto& [name, text] : m.prompts) w.Key(name).String(text);
    w.EndObject();
  }
  w.Key("max_concurrent_requests").Int(m.max_concurrent_requests);
  w.Key("max_input_length").Int(m.max_input_tokens);
  w.Key("max_batch_tokens").Int(m.max_batch_tokens);
  w.Key("max_batch_requests").Int(service_.limits().max_inputs);
  w.Key("max_client_batch_size").Int(service_.limits().max_inputs);
  w.Key("auto_truncate").Bool(service_.limits().auto_truncate);
  w.Key("tokenization_workers").Int(m.max_concurrent_requests);
  w.Key("version").String(QUIVER_VERSION);
  w.Key("sha").String("");
  w.Key("docker_label").String("");
  // quiver's own.
  w.Key("architecture").String(m.architecture);
  w.Key("hidden_size").Int(m.hidden_size);
  w.EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::Models(const std::string& id) const {
  const ModelDescription& m = service_.model();
  const auto write_model = [&](JsonWriter& w) {
    w.BeginObject().Key("id").String(m.name).Key("object").String("model");
    w.Key("created").Int(0).Key("owned_by").String("quiver");
    // vLLM's model card field its clients read for the length limit.
    w.Key("max_model_len").Int(m.max_input_tokens);
    // Infinity's ModelInfo fields, for its clients: a one-label scorer reranks (and classifies),
    // a classifier of several labels classifies.
    w.Key("backend").String("quiver").Key("stats").BeginObject().EndObject();
    w.Key("capabilities").BeginArray();
    if (!m.can_score) {
      w.String("embed");
    } else {
      if (m.num_labels <= 1) w.String("rerank");
      if (m.score_prompt.empty()) w.String("classify");
    }
    w.EndArray();
    w.EndObject();
  };
  JsonWriter w;
  if (!id.empty()) {
    if (id != m.name) {
      return ErrorResponse(Dialect::kOpenAi,
                           FieldError(absl::StatusCode::kNotFound, "model",
                                      StrCat("The model '", id,
                                             "' does not exist; this server serves '", m.name, "'"),
                                      Reason::kModelNotFound));
    }
    write_model(w);
  } else {
    w.BeginObject().Key("object").String("list").Key("data").BeginArray();
    write_model(w);
    w.EndArray().EndObject();
  }
  return Json(std::move(w).Take());
}

}  // namespace quiver::gateway::api
