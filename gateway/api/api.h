// The HTTP APIs users call, as one route table (gateway/api/router.h):
//   OpenAI:     POST /v1/embeddings (/embeddings), GET /v1/models, GET /v1/models/{model}
//   TEI:        POST /embed, POST / (by model kind, as TEI routes it), /similarity, /rerank,
//               /tokenize, /decode, GET /info
//   Cohere:     POST /v1/embed, /v2/embed, /v1/rerank, /v2/rerank
//   vLLM:       POST /v1/score (/score), /v1/rerank, /rerank (with documents)
//   Perplexity: POST /v1/contextualizedembeddings
//   quiver:     GET /health, /ready, /metrics, /openapi.json
// Each route parses its body into a typed request (requests.h), serves it (service.h) and renders
// its dialect's answer; errors go through the dialect's error map (errors.h). The table, the
// request's path through it (key, CORS, metrics, trace, access log) and the information routes are
// in api.cc; the routes' bodies in embed_routes.cc, score_routes.cc and token_routes.cc.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/metrics.h"
#include "gateway/api/cors.h"
#include "gateway/api/router.h"
#include "gateway/api/service.h"
#include "gateway/http_server.h"
#include "telemetry/tracing.h"

namespace quiver::gateway::api {

class Api {
 public:
  Api(ModelDescription model, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
      std::shared_ptr<Dispatcher> dispatcher, ApiLimits limits, MetricsRegistry* metrics,
      bool access_log = false);

  HttpResponse Handle(const HttpRequest& request);
  // From the headers alone, before the body is read (HttpServerOptions::check_headers): 401 for
  // a route that needs the API key when the request does not carry it; nullopt otherwise.
  std::optional<HttpResponse> CheckHeaders(const HttpRequest& request);
  // What the HTTP server's own refusals (HttpServerOptions::decorate_refusal) carry as the API's
  // answers do: X-Request-Id and, for an allowed origin, CORS.
  void DecorateRefusal(const HttpRequest& request, HttpResponse& response) const;
  // The HTTP server's own refusals (HttpServerOptions::render_refusal: a malformed request 400, a
  // body over the limit 413, headers over theirs 431) with that status code, in the error shape
  // of the request's route (its dialect), as the API's own answers are.
  HttpResponse RenderRefusal(const HttpRequest& request, int status, std::string_view code,
                             const std::string& message) const;
  void set_ready(bool ready) { ready_ = ready; }
  // Browsers on other origins (--cors-allow-origin); set before the server starts.
  void set_cors(CorsPolicy cors) { cors_ = std::move(cors); }
  // One span per request to an OpenTelemetry collector (--otlp-endpoint); set before the server
  // starts. Null: no tracing.
  void set_tracer(std::shared_ptr<telemetry::SpanExporter> tracer) { tracer_ = std::move(tracer); }

  // The trace a request is in: recorded here (a span) when this server traces and the caller's
  // traceparent, if any, is sampled; `downstream` is the traceparent its chunks carry to the
  // replicas (this span's, else the caller's as it came, else none).
  struct RequestTrace {
    bool record = false;
    std::string trace_id, span_id, parent_span_id;
    std::string downstream;
  };
  // Requests still running give up (503) at their next check: a stopping server's drain ends.
  void StopRequests() { stopping_ = true; }
  const Router& router() const { return router_; }

 private:
  // How errors look on the request's route: the route's dialect, else by the path's prefix
  // (/v1/ OpenAI, /v2/ Cohere, TEI otherwise).
  Dialect DialectOf(const HttpRequest& request, const Route* route) const;
  struct Call;  // one request in progress: its deadline and what it counted
  void AddRoutes();
  // Adds a POST route whose body is parsed as JSON before `handler` runs.
  void AddJson(std::string path, Dialect dialect,
               HttpResponse (Api::*handler)(const JsonView&, Call&));

  HttpResponse OpenAiEmbeddings(const JsonView& body, Call& call);
  HttpResponse Contextualized(const JsonView& body, Call& call);
  HttpResponse TeiEmbed(const JsonView& body, Call& call);
  HttpResponse TeiEmbedAll(const JsonView& body, Call& call);
  HttpResponse TeiRoot(const JsonView& body, Call& call);
  HttpResponse TeiSimilarity(const JsonView& body, Call& call);
  HttpResponse TeiRerank(const JsonView& body, Call& call);
  HttpResponse VllmRerank(const JsonView& body, Call& call);
  HttpResponse CohereRerank(const JsonView& body, Call& call);
  HttpResponse Rerank(const RerankRequest& request, Call& call);
  HttpResponse CohereEmbedV1(const JsonView& body, Call& call);
  HttpResponse CohereEmbedV2(const JsonView& body, Call& call);
  HttpResponse CohereEmbed(const JsonView& body, Call& call, int version);
  HttpResponse Score(const JsonView& body, Call& call);
  HttpResponse Tokenize(const JsonView& body, Call& call);
  HttpResponse Decode(const JsonView& body, Call& call);
  HttpResponse Predict(const JsonView& body, Call& call);
  HttpResponse Classify(const JsonView& body, Call& call);
  HttpResponse VllmTokenize(const JsonView& body, Call& call);
  HttpResponse Detokenize(const JsonView& body, Call& call);
  HttpResponse EmbedSparse(const JsonView& body, Call& call);
  HttpResponse Info() const;
  HttpResponse Unauthorized(Dialect dialect) const;  // 401 with WWW-Authenticate
  // A browser's preflight (cors.h): 204 with the allowances, 403 for an origin not allowed, 404
  // for a path with no route.
  HttpResponse Preflight(const HttpRequest& request, Dialect dialect) const;
  RequestTrace StartTrace(const HttpRequest& request) const;
  // Queues this request's span (trace.record).
  void Trace(const HttpRequest& request, const HttpResponse& response, const std::string& endpoint,
             const std::string& request_id, const RequestTrace& trace,
             std::chrono::system_clock::time_point start) const;
  // The pattern of the first route whose path matches `path` (any method), for metric labels.
  std::string PathPattern(std::string_view path) const;
  // One request's metrics: quiver_http_requests_total{endpoint (the route's pattern, never the
  // raw path), status} and, where `seconds` is set, quiver_http_request_seconds{endpoint}.
  void CountRequest(const std::string& endpoint, int status,
                    std::optional<double> seconds = std::nullopt);
  // Each endpoint label's metrics, made once when the routes are (MakeRouteMetrics) and read
  // without the registry's lock by every request: its latency histogram and its counters by
  // status, each counter made on its status's first use.
  struct RouteMetrics {
    Histogram* seconds = nullptr;
    std::array<std::atomic<Counter*>, 600> by_status{};
  };
  void MakeRouteMetrics();
  HttpResponse Models(const std::string& id) const;

  Service service_;
  Router router_;
  MetricsRegistry* metrics_;
  std::map<std::string, std::unique_ptr<RouteMetrics>, std::less<>> route_metrics_;
  bool access_log_;
  CorsPolicy cors_;
  std::shared_ptr<telemetry::SpanExporter> tracer_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace quiver::gateway::api
