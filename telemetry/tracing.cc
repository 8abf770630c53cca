#include "telemetry/tracing.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <random>
#include <utility>  // before Asio, whose awaitable.hpp uses std::exchange

#include "common/host_lookup.h"
#include "common/json_writer.h"
#include "common/strings.h"
#include "common/thread_name.h"
#include "spdlog/spdlog.h"

namespace quiver::telemetry {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kPostTimeout = std::chrono::seconds(2);
// The collector's name is looked up again after this long, or after a post that failed.
constexpr auto kResolveEvery = std::chrono::seconds(30);

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool AllZeros(std::string_view s) { return s.find_first_not_of('0') == std::string_view::npos; }

}  // namespace

std::optional<TraceParent> ParseTraceParent(std::string_view header) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55 characters.
  // Version 00 is exactly that; a later version is read by the same first 55 characters, and
  // may go on after a "-" (W3C Trace Context, "Versioning of traceparent"); ff is invalid.
  if (header.size() < 55 || header[2] != '-' || header[35] != '-' || header[52] != '-') {
    return std::nullopt;
  }
  const std::string_view version = header.substr(0, 2), trace = header.substr(3, 32),
                         parent = header.substr(36, 16), flags = header.substr(53, 2);
  if (!IsLowerHex(version) || version == "ff" ||
      (version == "00" ? header.size() != 55 : header.size() > 55 && header[55] != '-')) {
    return std::nullopt;
  }
  if (!IsLowerHex(trace) || !IsLowerHex(parent) || !IsLowerHex(flags) || AllZeros(trace) ||
      AllZeros(parent)) {
    return std::nullopt;
  }
  TraceParent out;
  out.trace_id = std::string(trace);
  out.parent_span_id = std::string(parent);
  out.flags = std::string(flags);
  out.sampled = (std::stoi(std::string(flags), nullptr, 16) & 1) != 0;
  return out;
}

std::string RandomHexId(size_t bytes) {
  // Seeded with 256 bits, so that two threads anywhere (other processes, other hosts) do not draw
  // the same ids.
  thread_local std::mt19937_64 rng = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(),
                       device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  std::string out;
  while (out.size() < 2 * bytes) out += fmt::format("{:016x}", rng());
  out.resize(2 * bytes);
  if (AllZeros(out)) out.back() = '1';  // an all-zero id is invalid
  return out;
}

std::optional<Span> ChildSpan(std::string_view traceparent, std::string name) {
  std::optional<TraceParent> parent;
  if (!traceparent.empty()) parent = ParseTraceParent(traceparent);
  if (parent && !parent->sampled) return std::nullopt;
  Span span;
  span.trace_id = parent ? parent->trace_id : RandomHexId(16);
  span.span_id = RandomHexId(8);
  if (parent) span.parent_span_id = parent->parent_span_id;
  span.name = std::move(name);
  return span;
}

std::string OtlpTraceJson(const std::vector<Span>& spans, std::string_view service_name) {
  JsonWriter w;
  w.BeginObject().Key("resourceSpans").BeginArray().BeginObject();
  w.Key("resource").BeginObject().Key("attributes").BeginArray();
  w.BeginObject().Key("key").String("service.name").Key("value").BeginObject();
  w.Key("stringValue").String(ValidUtf8(service_name)).EndObject().EndObject();
  w.EndArray().EndObject();
  w.Key("scopeSpans").BeginArray().BeginObject();
  w.Key("scope").BeginObject().Key("name").String("quiver").Key("version").String(QUIVER_VERSION);
  w.EndObject();
  w.Key("spans").BeginArray();
  for (const Span& s : spans) {
    w.BeginObject();
    w.Key("traceId").String(s.trace_id).Key("spanId").String(s.span_id);
    if (!s.parent_span_id.empty()) w.Key("parentSpanId").String(s.parent_span_id);
    // Strings as valid UTF-8 (a model or folder name may not be): a collector refuses a batch
    // that is not.
    w.Key("name").String(ValidUtf8(s.name)).Key("kind").Int(s.kind);
    // 64-bit integers are strings in OTLP/JSON.
    w.Key("startTimeUnixNano").String(StrCat(s.start_unix_ns));
    w.Key("endTimeUnixNano").String(StrCat(s.end_unix_ns));
    w.Key("attributes").BeginArray();
    for (const auto& [key, value] : s.attributes) {
      w.BeginObject().Key("key").String(ValidUtf8(key)).Key("value").BeginObject();
      if (const auto* text = std::get_if<std::string>(&value)) {
        w.Key("stringValue").String(ValidUtf8(*text));
      } else {
        w.Key("intValue").String(StrCat(std::get<int64_t>(value)));
      }
      w.EndObject().EndObject();
    }
    w.EndArray();
    w.Key("status").BeginObject();
    if (s.error) w.Key("code").Int(2);  // STATUS_CODE_ERROR; absent: UNSET
    w.EndObject();
    w.EndObject();
  }
  w.EndArray().EndObject().EndArray().EndObject().EndArray().EndObject();
  return std::move(w).Take();
}

absl::StatusOr<std::unique_ptr<SpanExporter>> SpanExporter::Create(const std::string& endpoint,
                                                                   std::string service_name,
                                                                   MetricsRegistry* metrics) {
  auto refuse = [&](std::string_view why) {
    return absl::InvalidArgumentError(StrCat("--otlp-endpoint '", endpoint, "': ", why,
                                             " (an OTLP/HTTP base URL such as "
                                             "http://otel-collector:4318)"));
  };
  constexpr std::string_view kScheme = "http://";
  if (endpoint.starts_with("https://")) {
    return refuse("https is not supported; export to a collector beside the server over http");
  }
  if (!endpoint.starts_with(kScheme)) return refuse("not an http:// URL");
  std::string_view rest = std::string_view(endpoint).substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string prefix(slash == std::string_view::npos ? "" : rest.substr(slash));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (authority.empty()) return refuse("no host");
  std::unique_ptr<SpanExporter> e(new SpanExporter());
  e->host_header_ = std::string(authority);  // as written: [::1]:4318 keeps its brackets
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.back() != ']') {
    e->host_ = std::string(authority.substr(0, colon));
    e->port_ = std::string(authority.substr(colon + 1));
    if (e->port_.empty() || e->port_.find_first_not_of("0123456789") != std::string::npos ||
        e->port_.size() > 5 || std::stoi(e->port_) < 1 || std::stoi(e->port_) > 65535) {
      return refuse("the port is not a number from 1 to 65535");
    }
  } else {
    e->host_ = std::string(authority);
    e->port_ = "80";
    e->host_header_ = std::string(authority);
  }
  if (e->host_.size() > 2 && e->host_.front() == '[' && e->host_.back() == ']') {
    e->host_ = e->host_.substr(1, e->host_.size() - 2);  // [::1] -> ::1 for the resolver
  }
  if (e->host_.empty()) return refuse("no host");
  e->path_ = prefix + "/v1/traces";
  e->service_name_ = std::move(service_name);
  const char* help = "Request spans for the OTLP collector, by outcome";
  e->exported_ = &metrics->GetCounter("quiver_otlp_spans_total", help, "outcome=\"exported\"");
  e->dropped_ = &metrics->GetCounter("quiver_otlp_spans_total", help, "outcome=\"dropped\"");
  e->failed_ = &metrics->GetCounter("quiver_otlp_spans_total", help, "outcome=\"failed\"");
  SpanExporter* self = e.get();
  e->thread_ = std::thread([self] {
    SetThreadName("quiver-otlp");
    self->Loop();
  });
  return e;
}

absl::StatusOr<std::shared_ptr<SpanExporter>> SpanExporter::CreateIfAsked(
    const std::string& endpoint, std::string service_name, MetricsRegistry* metrics) {
  if (endpoint.empty()) return std::shared_ptr<SpanExporter>();
  absl::StatusOr<std::unique_ptr<SpanExporter>> made =
      Create(endpoint, std::move(service_name), metrics);
  if (!made.ok()) return made.status();
  return std::shared_ptr<SpanExporter>(*std::move(made));
}

SpanExporter::~SpanExporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SpanExporter::Record(Span span) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      dropped_->Inc();
      return;
    }
    queue_.push_back(std::move(span));
    if (queue_.size() < kBatch) return;
  }
  cv_.notify_one();
}

void SpanExporter::Loop() {
  while (true) {
    std::vector<Span> batch;
    bool last;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(1),
                   [&] { return stopping_ || queue_.size() >= kBatch; });
      while (!queue_.empty() && batch.size() < kBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      last = stopping_;
      if (last) {  // one post at shutdown, bounded: what does not fit in it is dropped
        dropped_->Inc(static_cast<int64_t>(queue_.size()));
        queue_.clear();
      }
    }
    if (!batch.empty()) {
      const absl::Status posted = Post(OtlpTraceJson(batch, service_name_));
      if (posted.ok()) {
        exported_->Inc(static_cast<int64_t>(batch.size()));
      } else {
        failed_->Inc(static_cast<int64_t>(batch.size()));
        const auto now = std::chrono::steady_clock::now();
        if (now - last_warning_ > std::chrono::minutes(1)) {
          last_warning_ = now;
          spdlog::warn(
              "otlp: {} spans not exported to http://{}:{}{}: {} (said at most once a "
              "minute; quiver_otlp_spans_total counts them)",
              batch.size(), host_, port_, path_, posted.message());
        }
      }
    }
    if (last) return;
  }
}

std::vector<std::string> SpanExporter::Addresses(std::chrono::milliseconds timeout,
                                                 std::string& error) {
  const auto now = std::chrono::steady_clock::now();
  if (!addresses_.empty() && now - resolved_at_ < kResolveEvery) return addresses_;
  HostLookup found = LookupHostWithin(host_, port_, timeout);
  if (found.outcome != HostLookup::Outcome::kFound) {
    error = StrCat("resolving ", host_, ": ", found.error);
    // No answer from DNS: the addresses found before, if any (a name that no longer exists
    // has none).
    if (found.outcome == HostLookup::Outcome::kNoSuchName) addresses_.clear();
    return addresses_;
  }
  addresses_ = std::move(found.addresses);
  resolved_at_ = now;
  return addresses_;
}

absl::Status SpanExporter::Post(const std::string& body) {
  // The whole post, the name lookup included, within kPostTimeout: a collector that accepts and
  // never answers, or a DNS server that does not answer, cannot hold this thread (nor, at
  // shutdown, the process). The lookup has half of it, so that a DNS server that stopped
  // answering leaves the addresses found before the time to be used.
  const auto deadline = std::chrono::steady_clock::now() + kPostTimeout;
  std::string lookup_error;
  std::vector<tcp::endpoint> endpoints;
  for (const std::string& address : Addresses(
           std::chrono::duration_cast<std::chrono::milliseconds>(kPostTimeout) / 2, lookup_error)) {
    beast::error_code ec;
    const asio::ip::address ip = asio::ip::make_address(address, ec);
    if (!ec) endpoints.emplace_back(ip, static_cast<uint16_t>(std::stoi(port_)));
  }
  if (endpoints.empty()) return absl::UnavailableError(lookup_error);
  asio::io_context io;
  beast::tcp_stream stream(io);
  http::request<http::string_body> request{http::verb::post, path_, 11};
  request.set(http::field::host, host_header_);
  request.set(http::field::content_type, "application/json");
  request.set(http::field::user_agent, StrCat("quiver/", QUIVER_VERSION));
  request.body() = body;
  request.prepare_payload();
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  beast::error_code result = asio::error::timed_out;
  stream.async_connect(endpoints, [&](beast::error_code ec, const tcp::endpoint&) {
    if (ec) {
      result = ec;
      return;
    }
    http::async_write(stream, request, [&](beast::error_code ec, size_t) {
      if (ec) {
        result = ec;
        return;
      }
      http::async_read(stream, buffer, response,
                       [&](beast::error_code ec, size_t) { result = ec; });
    });
  });
  io.run_until(deadline);
  if (!io.stopped()) {  // timed out: cancel, and let the handlers finish before they go
    beast::error_code ignored;
    stream.socket().close(ignored);
    io.run();
  }
  if (result) {
    resolved_at_ = {};  // look the name up again before the next post: the collector may move
    return absl::UnavailableError(result.message());
  }
  const int status = static_cast<int>(response.result_int());
  if (status < 200 || status >= 300) {
    return absl::UnavailableError(StrCat("the collector answered ", status));
  }
  return absl::OkStatus();
}

}  // namespace quiver::telemetry
