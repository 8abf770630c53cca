#include "gateway/api/api.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/base64.h"
#include "common/half.h"
#include "common/json.h"
#include "common/json_writer.h"
#include "common/logging.h"
#include "common/strings.h"
#include "gateway/api/auth.h"
#include "gateway/api/openapi.h"
#include "gateway/api/scores.h"

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

// Row `i` of a result's packed rows.
std::string_view Row(const ReplicaResult& r, int64_t i) {
  const size_t row_bytes = r.data.size() / static_cast<size_t>(std::max<int64_t>(1, r.num_seqs));
  return std::string_view(r.data).substr(static_cast<size_t>(i) * row_bytes, row_bytes);
}

std::vector<float> Floats(std::string_view row) {
  std::vector<float> v(row.size() / sizeof(float));
  std::memcpy(v.data(), row.data(), v.size() * sizeof(float));
  return v;
}

quiver::v1::OutputType EngineType(EmbeddingFormat format) {
  switch (format) {
    case EmbeddingFormat::kFloatList:
    case EmbeddingFormat::kBase64F32:
      return quiver::v1::OUTPUT_F32;
    case EmbeddingFormat::kBase64Int8:
      return quiver::v1::OUTPUT_INT8;
    case EmbeddingFormat::kBase64Binary:
      return quiver::v1::OUTPUT_BINARY;
  }
  return quiver::v1::OUTPUT_F32;
}

// A row of little-endian f32 values in vLLM's embed_dtype and endianness.
std::string Reencoded(std::string_view row, const Base64Layout& layout) {
  const std::vector<float> values = Floats(row);
  const size_t width = layout.values == Base64Values::kF32 ? 4 : 2;
  std::string out(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    if (layout.values == Base64Values::kF32) {
      std::memcpy(&bits, &values[i], sizeof(bits));
    } else {
      bits = layout.values == Base64Values::kF16 ? FloatToHalf(values[i]) : FloatToBf16(values[i]);
    }
    for (size_t b = 0; b < width; ++b) {  // least significant byte first, then reversed if big
      const size_t at = layout.big_endian ? width - 1 - b : b;
      out[i * width + at] = static_cast<char>((bits >> (8 * b)) & 0xffu);
    }
  }
  return out;
}

// One embedding in OpenAI's forms: floats, or base64 of the row's bytes (for "base64", in the
// request's embed_dtype and endianness).
void WriteEmbedding(JsonWriter& w, std::string_view row, EmbeddingFormat format,
                    const Base64Layout& layout = {}) {
  if (format == EmbeddingFormat::kFloatList) {
    w.FloatArray(Floats(row));
  } else if (format == EmbeddingFormat::kBase64F32 &&
             (layout.values != Base64Values::kF32 || layout.big_endian)) {
    w.String(Base64(Reencoded(row, layout)));
  } else {
    w.String(Base64(row));
  }
}

HttpResponse Json(std::string body, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Indices of `scores` from highest to lowest (ties in input order), cut to top_n.
std::vector<size_t> Ranked(const std::vector<float>& scores, std::optional<int64_t> top_n) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (top_n && *top_n < static_cast<int64_t>(order.size())) {
    order.resize(static_cast<size_t>(*top_n));
  }
  return order;
}

void WriteUsage(JsonWriter& w, int64_t tokens) {
  w.Key("usage").BeginObject();
  w.Key("prompt_tokens").Int(tokens).Key("total_tokens").Int(tokens);
  w.EndObject();
}

}  // namespace

struct Api::Call {
  Dialect dialect = Dialect::kTei;
  CallContext context;  // the deadline, and whether the client is still connected
};

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

// ---- Embeddings ---------------------------------------------------------------------------------

HttpResponse Api::OpenAiEmbeddings(const JsonView& body, Call& call) {
  absl::StatusOr<EmbedRequest> request = ParseOpenAiEmbed(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Embeddings> out;
  if (request->late_chunking) {  // Jina's: the inputs as the chunks of one document
    ContextualizedRequest document{request->model, {{}}, request->dimensions, request->format};
    for (const Input& in : request->inputs) document.documents[0].push_back(in.text);
    out = service_.EmbedContextualized(document, EngineType(request->format), call.context);
  } else {
    out = service_.Embed(*request, EngineType(request->format), call.context);
  }
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  JsonWriter w;
  w.BeginObject().Key("object").String("list").Key("data").BeginArray();
  for (int64_t i = 0; i < out->result.num_seqs; ++i) {
    w.BeginObject().Key("object").String("embedding").Key("index").Int(i).Key("embedding");
    WriteEmbedding(w, Row(out->result, i), request->format, request->base64);
    w.EndObject();
  }
  w.EndArray().Key("model").String(service_.model().name);
  WriteUsage(w, out->tokens);
  w.EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::Contextualized(const JsonView& body, Call& call) {
  absl::StatusOr<ContextualizedRequest> request = ParseContextualized(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Embeddings> out =
      service_.EmbedContextualized(*request, EngineType(request->format), call.context);
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  JsonWriter w;
  w.BeginObject().Key("object").String("list").Key("data").BeginArray();
  int64_t row = 0;
  for (size_t d = 0; d < request->documents.size(); ++d) {
    w.BeginObject().Key("object").String("list").Key("index").Int(static_cast<int64_t>(d));
    w.Key("data").BeginArray();
    for (size_t j = 0; j < request->documents[d].size(); ++j, ++row) {
      w.BeginObject().Key("object").String("embedding").Key("index").Int(static_cast<int64_t>(j));
      w.Key("embedding");
      WriteEmbedding(w, Row(out->result, row), request->format);
      w.EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray().Key("model").String(service_.model().name);
  WriteUsage(w, out->tokens);
  w.EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::TeiEmbed(const JsonView& body, Call& call) {
  absl::StatusOr<EmbedRequest> request = ParseTeiEmbed(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Embeddings> out = service_.Embed(*request, quiver::v1::OUTPUT_F32, call.context);
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  JsonWriter w;
  w.BeginArray();
  for (int64_t i = 0; i < out->result.num_seqs; ++i) w.FloatArray(Floats(Row(out->result, i)));
  w.EndArray();
  return Json(std::move(w).Take());
}

// TEI's /embed_all: per input, every token's embedding (the encoder's last hidden state, no
// pooling, no Dense modules, not normalized), the special tokens' and a prompt's included.
HttpResponse Api::TeiEmbedAll(const JsonView& body, Call& call) {
  for (const char* field : {"normalize", "dimensions"}) {
    if (const std::optional<JsonView> v = body.Find(field); v.has_value() && !v->is_null()) {
      return ErrorResponse(call.dialect,
                           FieldError(absl::StatusCode::kInvalidArgument, field,
                                      StrCat("'", field,
                                             "' does not apply to /embed_all, which answers each "
                                             "token's hidden state as the model computes it")));
    }
  }
  absl::StatusOr<EmbedRequest> request = ParseTeiEmbed(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<TokenEmbeddings> out = service_.EmbedAll(*request, call.context);
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  JsonWriter w;
  w.BeginArray();
  int64_t row = 0;
  for (const int64_t rows : out->rows) {
    w.BeginArray();
    for (int64_t i = 0; i < rows; ++i) w.FloatArray(Floats(Row(out->result, row++)));
    w.EndArray();
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

// TEI's POST /: a reranker's /rerank, an embedding model's /embed; as huggingface_hub's
// InferenceClient also posts sentence_similarity's {"inputs": {"source_sentence", ...}} there,
// that body shape goes to /similarity.
HttpResponse Api::TeiRoot(const JsonView& body, Call& call) {
  if (service_.model().can_score) return TeiRerank(body, call);
  if (service_.model().sparse_width > 0) return EmbedSparse(body, call);
  if (const std::optional<JsonView> inputs = body.Find("inputs"); inputs && inputs->is_object()) {
    return TeiSimilarity(body, call);
  }
  return TeiEmbed(body, call);
}

HttpResponse Api::TeiSimilarity(const JsonView& body, Call& call) {
  absl::StatusOr<SimilarityRequest> request = ParseSimilarity(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (!service_.model().can_embed) {
    return ErrorResponse(call.dialect,
                         FieldError(absl::StatusCode::kInvalidArgument, "",
                                    "/similarity needs an embedding model; this one scores "
                                    "(use /rerank)"));
  }
  EmbedRequest embed;
  embed.inputs.push_back({request->source_sentence, {}, false});
  for (const std::string& s : request->sentences) embed.inputs.push_back({s, {}, false});
  embed.truncation = request->truncation;
  embed.prompt_name = request->prompt_name;
  embed.normalize = true;  // cosine similarity
  absl::StatusOr<Embeddings> out = service_.Embed(embed, quiver::v1::OUTPUT_F32, call.context);
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  const std::vector<float> source = Floats(Row(out->result, 0));
  JsonWriter w;
  w.BeginArray();
  for (int64_t i = 1; i < out->result.num_seqs; ++i) {
    const std::vector<float> v = Floats(Row(out->result, i));
    w.Float(Dot(source.data(), v.data(), v.size()));
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

// ---- Reranking and scoring ----------------------------------------------------------------------

HttpResponse Api::TeiRerank(const JsonView& body, Call& call) {
  // /rerank is TEI's (texts) and vLLM's / Jina's (documents): the body says which.
  if (!body.Find("texts") && body.Find("documents")) {
    call.dialect = Dialect::kOpenAi;
    return VllmRerank(body, call);
  }
  absl::StatusOr<RerankRequest> request = ParseRerank(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Scores> scores =
      service_.Score({request->query}, request->documents, request->raw_scores, request->truncation,
                     "texts", call.context);
  if (!scores.ok()) return ErrorResponse(call.dialect, scores.status());
  JsonWriter w;
  w.BeginArray();
  for (size_t i : Ranked(scores->scores, request->top_n)) {
    w.BeginObject().Key("index").Int(static_cast<int64_t>(i));
    if (request->return_documents) w.Key("text").String(request->documents[i]);
    w.Key("score").Float(scores->scores[i]).EndObject();
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

namespace {

// Cohere's and vLLM's rerank answer, in one shape both clients read: results sorted by
// relevance_score with the document where asked, id, model, usage and Cohere's meta.
std::string RenderRerank(const RerankRequest& request, const Scores& scores, const std::string& id,
                         const std::string& model) {
  JsonWriter w;
  w.BeginObject().Key("id").String(id).Key("object").String("rerank");
  w.Key("created").Int(UnixSeconds()).Key("model").String(model);
  w.Key("results").BeginArray();
  for (size_t i : Ranked(scores.scores, request.top_n)) {
    w.BeginObject().Key("index").Int(static_cast<int64_t>(i));
    w.Key("relevance_score").Float(scores.scores[i]);
    if (request.return_documents) {
      w.Key("document").BeginObject().Key("text").String(request.documents[i]).EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("usage").BeginObject();
  w.Key("prompt_tokens").Int(scores.tokens).Key("total_tokens").Int(scores.tokens).EndObject();
  w.Key("meta").BeginObject();
  w.Key("api_version").BeginObject().Key("version").String("2").EndObject();
  w.Key("billed_units").BeginObject().Key("search_units").Int(1).EndObject();
  w.EndObject();
  w.EndObject();
  return std::move(w).Take();
}

}  // namespace

HttpResponse Api::VllmRerank(const JsonView& body, Call& call) {
  absl::StatusOr<RerankRequest> request = ParseRerank(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  return Rerank(*request, call);
}

HttpResponse Api::CohereRerank(const JsonView& body, Call& call) {
  absl::StatusOr<RerankRequest> request = ParseRerank(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  // Cohere cuts long documents (max_tokens_per_doc) rather than refusing them.
  if (!request->truncation.enabled) request->truncation.enabled = true;
  return Rerank(*request, call);
}

HttpResponse Api::Rerank(const RerankRequest& request, Call& call) {
  if (absl::Status s = service_.CheckModel(request.model); !s.ok()) {
    return ErrorResponse(call.dialect, s);
  }
  std::vector<std::string> cut;
  if (request.max_tokens_per_doc > 0) {
    absl::StatusOr<std::vector<std::string>> kept = service_.KeepFirstTokens(
        request.documents, request.max_tokens_per_doc, "documents", call.context);
    if (!kept.ok()) return ErrorResponse(call.dialect, kept.status());
    cut = *std::move(kept);
  }
  absl::StatusOr<Scores> scores =
      service_.Score({request.query}, request.max_tokens_per_doc > 0 ? cut : request.documents,
                     request.raw_scores, request.truncation, "documents", call.context);
  if (!scores.ok()) return ErrorResponse(call.dialect, scores.status());
  return Json(RenderRerank(request, *scores, StrCat("rerank-", next_id_++), service_.model().name));
}

HttpResponse Api::Score(const JsonView& body, Call& call) {
  absl::StatusOr<ScoreRequest> request = ParseScore(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (absl::Status s = service_.CheckModel(request->model); !s.ok()) {
    return ErrorResponse(call.dialect, s);
  }
  absl::StatusOr<Scores> s = service_.Score(request->text_1, request->text_2, !request->activation,
                                            request->truncation, "text_2", call.context);
  if (!s.ok()) return ErrorResponse(call.dialect, s.status());
  const std::vector<float>& all = s->scores;
  const int64_t tokens = s->tokens;
  JsonWriter w;
  w.BeginObject().Key("id").String(StrCat("score-", next_id_++)).Key("object").String("list");
  w.Key("created").Int(UnixSeconds()).Key("model").String(service_.model().name);
  w.Key("data").BeginArray();
  for (size_t i = 0; i < all.size(); ++i) {
    w.BeginObject().Key("index").Int(static_cast<int64_t>(i)).Key("object").String("score");
    w.Key("score").Float(all[i]).EndObject();
  }
  w.EndArray();
  w.Key("usage").BeginObject();
  w.Key("prompt_tokens").Int(tokens).Key("total_tokens").Int(tokens);
  w.Key("completion_tokens").Int(0).EndObject();
  w.EndObject();
  return Json(std::move(w).Take());
}

// ---- Cohere embed ------------------------------------------------------------------------------

namespace {

// The prompt Cohere's input_type asks for, where the model has one of that purpose: "query" for
// search_query, "document" or else "passage" for search_document; "" otherwise.
std::string CoherePromptName(const std::string& input_type,
                             const std::map<std::string, std::string>& prompts) {
  if (input_type == "search_query" && prompts.contains("query")) return "query";
  if (input_type == "search_document") {
    for (const char* name : {"document", "passage"}) {
      if (prompts.contains(name)) return name;
    }
  }
  return "";
}

// e's rows as arrays of integers: each byte (signed or not) plus `offset`.
void WriteByteRows(JsonWriter& w, const Embeddings& e, int offset, bool is_signed) {
  w.BeginArray();
  for (int64_t i = 0; i < e.result.num_seqs; ++i) {
    w.BeginArray();
    for (char c : Row(e.result, i)) {
      const int v = is_signed ? static_cast<int>(static_cast<int8_t>(c))
                              : static_cast<int>(static_cast<uint8_t>(c));
      w.Int(v + offset);
    }
    w.EndArray();
  }
  w.EndArray();
}

// Cohere's embeddings_by_type object: one key per type asked for, from the engine's encoding
// that carries it (floats; int8 for int8 and uint8; bits for binary and ubinary).
void WriteCohereEmbeddingsByType(JsonWriter& w, const std::vector<CohereEmbeddingType>& types,
                                 const std::optional<Embeddings>& f32,
                                 const std::optional<Embeddings>& int8,
                                 const std::optional<Embeddings>& bits) {
  w.BeginObject();
  for (CohereEmbeddingType t : types) {
    switch (t) {
      case CohereEmbeddingType::kFloat:
        w.Key("float").BeginArray();
        for (int64_t i = 0; i < f32->result.num_seqs; ++i) {
          w.FloatArray(Floats(Row(f32->result, i)));
        }
        w.EndArray();
        break;
      case CohereEmbeddingType::kInt8:
        w.Key("int8");
        WriteByteRows(w, *int8, 0, true);
        break;
      case CohereEmbeddingType::kUint8:
        w.Key("uint8");
        WriteByteRows(w, *int8, 128, true);
        break;
      case CohereEmbeddingType::kBinary:
        w.Key("binary");
        WriteByteRows(w, *bits, -128, false);
        break;
      case CohereEmbeddingType::kUbinary:
        w.Key("ubinary");
        WriteByteRows(w, *bits, 0, false);
        break;
    }
  }
  w.EndObject();
}

}  // namespace

HttpResponse Api::CohereEmbedV1(const JsonView& body, Call& call) {
  return CohereEmbed(body, call, 1);
}
HttpResponse Api::CohereEmbedV2(const JsonView& body, Call& call) {
  return CohereEmbed(body, call, 2);
}

HttpResponse Api::CohereEmbed(const JsonView& body, Call& call, int version) {
  absl::StatusOr<EmbedRequest> request = ParseCohereEmbed(body, service_.limits(), version);
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  request->truncation.max_tokens =
      std::min(request->truncation.max_tokens, service_.model().max_input_tokens);
  // input_type picks the model's own prompt of that purpose where it has one.
  if (std::string name = CoherePromptName(request->input_type, service_.model().prompts);
      !name.empty()) {
    request->prompt_name = std::move(name);
  }
  // One pass per engine encoding the types need: floats, int8 (int8 and uint8), bits (binary and
  // ubinary).
  std::optional<Embeddings> f32, int8, bits;
  const auto run = [&](std::optional<Embeddings>& slot, quiver::v1::OutputType type) {
    absl::StatusOr<Embeddings> out = service_.Embed(*request, type, call.context);
    if (!out.ok()) return out.status();
    slot = *std::move(out);
    return absl::OkStatus();
  };
  const std::vector<CohereEmbeddingType> types = request->embedding_types.empty()
                                                     ? std::vector{CohereEmbeddingType::kFloat}
                                                     : request->embedding_types;
  for (CohereEmbeddingType t : types) {
    absl::Status s;
    if (t == CohereEmbeddingType::kFloat && !f32) s = run(f32, quiver::v1::OUTPUT_F32);
    if ((t == CohereEmbeddingType::kInt8 || t == CohereEmbeddingType::kUint8) && !int8) {
      s = run(int8, quiver::v1::OUTPUT_INT8);
    }
    if ((t == CohereEmbeddingType::kBinary || t == CohereEmbeddingType::kUbinary) && !bits) {
      s = run(bits, quiver::v1::OUTPUT_BINARY);
    }
    if (!s.ok()) return ErrorResponse(call.dialect, s);
  }
  const Embeddings& any = f32 ? *f32 : int8 ? *int8 : *bits;
  JsonWriter w;
  w.BeginObject().Key("id").String(StrCat("embed-", next_id_++));
  const bool by_type = version >= 2 || !request->embedding_types.empty();
  w.Key("response_type").String(by_type ? "embeddings_by_type" : "embeddings_floats");
  w.Key("embeddings");
  if (!by_type) {
    w.BeginArray();
    for (int64_t i = 0; i < f32->result.num_seqs; ++i) w.FloatArray(Floats(Row(f32->result, i)));
    w.EndArray();
  } else {
    WriteCohereEmbeddingsByType(w, types, f32, int8, bits);
  }
  w.Key("texts").BeginArray();
  for (const Input& input : request->inputs) w.String(input.text);
  w.EndArray();
  w.Key("meta").BeginObject();
  w.Key("api_version").BeginObject().Key("version").String(StrCat(version)).EndObject();
  w.Key("billed_units").BeginObject().Key("input_tokens").Int(any.tokens).EndObject();
  w.EndObject();
  w.EndObject();
  return Json(std::move(w).Take());
}

// ---- Tokenizer ---------------------------------------------------------------------------------

HttpResponse Api::Tokenize(const JsonView& body, Call& call) {
  // /tokenize is TEI's (inputs) and vLLM's (prompt, or its chat form's messages): the body says.
  if (!body.Find("inputs") && (body.Find("prompt") || body.Find("messages"))) {
    call.dialect = Dialect::kOpenAi;
    return VllmTokenize(body, call);
  }
  absl::StatusOr<TokenizeRequest> request = ParseTokenize(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<std::vector<std::vector<TokenPiece>>> pieces =
      service_.TokenizeForDisplay(*request);
  if (!pieces.ok()) return ErrorResponse(call.dialect, pieces.status());
  JsonWriter w;
  w.BeginArray();
  for (const std::vector<TokenPiece>& text : *pieces) {
    w.BeginArray();
    for (const TokenPiece& p : text) {
      // start and stop: byte offsets into the text tokenized, null for special tokens (and for
      // tokenizers whose pipeline quiver does not trace back to the input yet).
      w.BeginObject().Key("id").Int(p.id).Key("text").String(p.text);
      w.Key("special").Bool(p.special).Key("start");
      p.start ? w.Uint(*p.start) : w.Null();
      w.Key("stop");
      p.stop ? w.Uint(*p.stop) : w.Null();
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

// TEI's /embed_sparse: per input, its nonzero terms as {"index", "value"} in index order.
HttpResponse Api::EmbedSparse(const JsonView& body, Call& call) {
  absl::StatusOr<EmbedRequest> request = ParseTeiEmbed(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<std::vector<std::vector<float>>> rows =
      service_.EmbedSparse(*request, call.context);
  if (!rows.ok()) return ErrorResponse(call.dialect, rows.status());
  JsonWriter w;
  w.BeginArray();
  for (const std::vector<float>& row : *rows) {
    w.BeginArray();
    for (size_t j = 0; j < row.size(); ++j) {
      if (!(row[j] > 0.0f)) continue;
      w.BeginObject();
      w.Key("index");
      w.Int(static_cast<int64_t>(j));
      w.Key("value");
      w.Float(row[j]);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

namespace {

// A classifier's logits as probabilities, as transformers' pipelines and vLLM make them: the
// sigmoid for one label, the softmax over several.
void Activate(std::vector<float>& scores) {
  if (scores.size() == 1) {
    scores[0] = Sigmoid(scores[0]);
    return;
  }
  const float top = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (float& v : scores) sum += (v = std::exp(v - top));
  for (float& v : scores) v = static_cast<float>(v / sum);
}

}  // namespace

// TEI's /predict: for each input its labels with scores, highest first (softmax over the labels,
// sigmoid for one, unless raw_scores); one list for one input, a list of lists for a batch.
HttpResponse Api::Predict(const JsonView& body, Call& call) {
  absl::StatusOr<PredictRequest> request = ParsePredict(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Classified> classified =
      service_.Classify(request->inputs, request->truncation, true, "inputs", call.context);
  if (!classified.ok()) return ErrorResponse(call.dialect, classified.status());
  const std::vector<std::string>& names = service_.model().labels;
  JsonWriter w;
  if (request->batch) w.BeginArray();
  for (std::vector<float>& scores : classified->logits) {
    if (!request->raw_scores) Activate(scores);
    std::vector<size_t> order(scores.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    w.BeginArray();
    for (size_t i : order) {
      w.BeginObject().Key("score").Float(scores[i]);
      w.Key("label").String(i < names.size() ? names[i] : StrCat("LABEL_", i)).EndObject();
    }
    w.EndArray();
  }
  if (request->batch) w.EndArray();
  return Json(std::move(w).Take());
}

HttpResponse Api::Classify(const JsonView& body, Call& call) {
  absl::StatusOr<ClassifyRequest> request = ParseClassify(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (absl::Status s = service_.CheckModel(request->model); !s.ok()) {
    return ErrorResponse(call.dialect, s);
  }
  absl::StatusOr<Classified> classified = service_.Classify(
      request->inputs, request->truncation, request->add_special_tokens, "input", call.context);
  if (!classified.ok()) return ErrorResponse(call.dialect, classified.status());
  const std::vector<std::string>& names = service_.model().labels;
  JsonWriter w;
  w.BeginObject().Key("id").String(StrCat("classify-", next_id_++)).Key("object").String("list");
  w.Key("created").Int(UnixSeconds()).Key("model").String(service_.model().name);
  w.Key("data").BeginArray();
  for (size_t i = 0; i < classified->logits.size(); ++i) {
    std::vector<float>& probs = classified->logits[i];
    // vLLM's choice by the config's problem_type: a regression's values as they are, a
    // multi-label classifier's a sigmoid per label, any other the softmax (a sigmoid for one).
    const std::string& problem = service_.model().problem_type;
    if (!request->activation || problem == "regression") {
    } else if (problem == "multi_label_classification") {
      for (float& v : probs) v = Sigmoid(v);
    } else {
      Activate(probs);
    }
    // The label of the highest value (the first of equals, as numpy's argmax).
    const size_t top =
        static_cast<size_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
    w.BeginObject().Key("index").Int(static_cast<int64_t>(i));
    w.Key("label").String(top < names.size() ? names[top] : StrCat("LABEL_", top));
    w.Key("probs").BeginArray();
    for (float v : probs) w.Float(v);
    w.EndArray();
    w.Key("num_classes").Int(static_cast<int64_t>(probs.size())).EndObject();
  }
  w.EndArray();
  w.Key("usage").BeginObject();
  w.Key("prompt_tokens").Int(classified->tokens).Key("total_tokens").Int(classified->tokens);
  w.Key("completion_tokens").Int(0).Key("prompt_tokens_details").Null().EndObject();
  w.EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::VllmTokenize(const JsonView& body, Call& call) {
  absl::StatusOr<VllmTokenizeRequest> request = ParseVllmTokenize(body);
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (absl::Status s = service_.CheckModel(request->model); !s.ok()) {
    return ErrorResponse(call.dialect, s);
  }
  absl::StatusOr<std::vector<uint32_t>> ids =
      service_.TokenIds(request->prompt, request->add_special_tokens, "prompt");
  if (!ids.ok()) return ErrorResponse(call.dialect, ids.status());
  JsonWriter w;
  w.BeginObject().Key("count").Int(static_cast<int64_t>(ids->size()));
  w.Key("max_model_len").Int(service_.model().max_input_tokens);
  w.Key("tokens").BeginArray();
  for (uint32_t id : *ids) w.Uint(id);
  w.EndArray().Key("token_strs");
  if (request->return_token_strs) {
    w.BeginArray();
    for (uint32_t id : *ids) w.String(service_.TokenString(id));
    w.EndArray();
  } else {
    w.Null();
  }
  w.EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::Detokenize(const JsonView& body, Call& call) {
  std::string model;
  absl::StatusOr<DecodeRequest> request = ParseVllmDetokenize(body, &model);
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (absl::Status s = service_.CheckModel(model); !s.ok()) return ErrorResponse(call.dialect, s);
  absl::StatusOr<std::vector<std::string>> texts = service_.Decode(*request);
  if (!texts.ok()) return ErrorResponse(call.dialect, texts.status());
  JsonWriter w;
  w.BeginObject().Key("prompt").String(texts->front()).EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::Decode(const JsonView& body, Call& call) {
  absl::StatusOr<DecodeRequest> request = ParseDecode(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<std::vector<std::string>> texts = service_.Decode(*request);
  if (!texts.ok()) return ErrorResponse(call.dialect, texts.status());
  JsonWriter w;
  w.BeginArray();
  for (const std::string& text : *texts) w.String(text);
  w.EndArray();
  return Json(std::move(w).Take());
}

}  // namespace quiver::gateway::api
