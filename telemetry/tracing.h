// Traces of the requests the HTTP API serves, for an OpenTelemetry collector (`--otlp-endpoint`):
// one SERVER span per request (method and route, status code, request id, model), in the trace a
// W3C `traceparent` header names (its span the parent) or in a new one, exported over OTLP/HTTP
// with the JSON encoding (POST {endpoint}/v1/traces; collectors listen on 4318 for it).
//
// Export never holds a request up: Record queues the span (at most kMaxQueued; beyond, it is
// dropped and counted) and one thread posts batches every second or every kBatch spans, each POST
// bounded by a 2 s timeout; a collector that is down costs failed posts on that thread only
// (logged at most once a minute, counted). A request whose traceparent says "not sampled" is not
// recorded. At shutdown one more batch is posted, within the same timeout (what does not fit in
// it is dropped and counted): stopping takes at most two posts' timeouts, a collector named by
// host name included (its lookup is inside the timeout, common/host_lookup.h; its addresses are
// kept 30 s, or until a post fails).
//
// Counted in quiver_otlp_spans_total{outcome="exported"|"dropped"|"failed"}.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics.h"

namespace quiver::telemetry {

// A W3C Trace Context `traceparent`: a version (00, or a later one read by its first 55
// characters; never ff), 32 and 16 lower-case hex digits (neither all zeros), the flags; nullopt
// for anything else (the request then starts a new trace).
struct TraceParent {
  std::string trace_id;        // 32 hex digits
  std::string parent_span_id;  // 16 hex digits
  std::string flags;           // 2 hex digits, passed on as they came
  bool sampled = true;
};
std::optional<TraceParent> ParseTraceParent(std::string_view header);

// `bytes` random bytes as lower-case hex (a new trace id: 16, a span id: 8).
std::string RandomHexId(size_t bytes);

struct Span {
  std::string trace_id, span_id, parent_span_id;  // hex; parent empty for a root span
  std::string name;                               // "POST /v1/embeddings"
  int kind = 2;  // OTLP SpanKind: 2 SERVER (a request or an RPC served), 1 INTERNAL
  int64_t start_unix_ns = 0, end_unix_ns = 0;
  bool error = false;  // status ERROR (a 5xx); otherwise unset, as for a server's 4xx
  std::vector<std::pair<std::string, std::variant<std::string, int64_t>>> attributes;
};

// `t` in nanoseconds since the Unix epoch, as spans give their times.
inline int64_t UnixNanos(
    std::chrono::system_clock::time_point t = std::chrono::system_clock::now()) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// A span named `name` in the trace `traceparent` names, its span the parent (a new trace where
// `traceparent` is empty or malformed); nullopt where it says "not sampled". Times and
// attributes are the caller's to fill.
std::optional<Span> ChildSpan(std::string_view traceparent, std::string name);

// The OTLP/JSON ExportTraceServiceRequest for `spans` from service `service_name` (pure).
std::string OtlpTraceJson(const std::vector<Span>& spans, std::string_view service_name);

class SpanExporter {
 public:
  static constexpr size_t kMaxQueued = 4096;
  static constexpr size_t kBatch = 512;

  // `endpoint`: http://HOST[:PORT][/PREFIX] (the OTLP/HTTP base URL; spans go to
  // PREFIX/v1/traces). INVALID_ARGUMENT naming --otlp-endpoint for anything else (https is not
  // supported: put a collector or a TLS proxy beside the server).
  static absl::StatusOr<std::unique_ptr<SpanExporter>> Create(const std::string& endpoint,
                                                              std::string service_name,
                                                              MetricsRegistry* metrics);
  // Create where `endpoint` is given (--otlp-endpoint); null where it is empty (no tracing).
  static absl::StatusOr<std::shared_ptr<SpanExporter>> CreateIfAsked(const std::string& endpoint,
                                                                     std::string service_name,
                                                                     MetricsRegistry* metrics);
  ~SpanExporter();  // posts what is queued, then stops
  SpanExporter(const SpanExporter&) = delete;
  SpanExporter& operator=(const SpanExporter&) = delete;

  void Record(Span span);  // never blocks on the network

 private:
  SpanExporter() = default;
  void Loop();
  absl::Status Post(const std::string& body);
  // The collector's numeric addresses: those found less than kResolveEvery ago, or a new lookup
  // within `timeout` (on failure, those found before, and `error` says why).
  std::vector<std::string> Addresses(std::chrono::milliseconds timeout, std::string& error);

  std::string host_, port_, host_header_, path_, service_name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Span> queue_;
  bool stopping_ = false;
  std::thread thread_;
  Counter* exported_ = nullptr;
  Counter* dropped_ = nullptr;
  Counter* failed_ = nullptr;
  std::chrono::steady_clock::time_point last_warning_{};
  std::vector<std::string> addresses_;  // touched by the exporter's thread only
  std::chrono::steady_clock::time_point resolved_at_{};
};

}  // namespace quiver::telemetry
