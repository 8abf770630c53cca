// HTTP/1.1 keep-alive server on Boost.Beast/Asio, behind a small interface: requests are read on
// I/O threads and handled on a separate handler pool (tokenization and waiting for replicas never
// run on an I/O thread); the handler thread sends the answer itself as far as the socket takes it
// without blocking, and the connection's strand writes any rest and reads the next request.
// Headers are read first and checked before any body byte is: a malformed request is answered
// 400, a header block over max_header_bytes 431, a transfer coding other than chunked 400 (RFC
// 9112: anything else would let a proxy and this server disagree on where a request ends), a
// declared body over max_body_bytes 413, and check_headers may answer (401) — each without
// reading the body, and closing the connection. "Expect: 100-continue" is answered 100 once the
// headers passed. Timeouts: header, body, idle (HttpServerOptions).
//
// Bodies in flight (being read, waiting for a handler, being parsed and handled) are bounded in
// bytes (max_body_bytes_in_flight): a request whose declared body (or, for chunked, the body
// limit) does not fit waits with its body unread — and its 100 Continue unsent — until earlier
// requests are answered. One request is always admitted, so a body over the budget still runs
// alone.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace quiver::gateway {

struct HttpRequest {
  std::string method;
  std::string target;                          // path, without the query string
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  // True once the client closed its connection (or it broke) while the request is handled; set by
  // the server, callable only from the handler while it runs. Absent in requests made by hand.
  std::function<bool()> client_gone;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// The server's defaults, which serve's and gateway's flags start from (app/commands.h).
constexpr size_t kDefaultMaxBodyBytes = 8 << 20;
constexpr int kDefaultMaxConnections = 10000;
constexpr int kDefaultHeaderTimeoutS = 30;
constexpr int kDefaultBodyTimeoutS = 120;
constexpr int kDefaultIdleTimeoutS = 120;

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 8080;  // 0: pick a free port (see HttpServer::port)
  int io_threads = 1;
  int handler_threads = 2;
  size_t max_body_bytes = kDefaultMaxBodyBytes;
  size_t max_header_bytes = 8 << 10;  // the request line and headers; 431 beyond
  // Connections open at once; one more is answered 503 (Retry-After: 1) and closed at once.
  int max_connections = kDefaultMaxConnections;
  // Request-body bytes in flight at once, across connections; 0: 4 x max_body_bytes.
  size_t max_body_bytes_in_flight = 0;
  // Seconds from a connection's first byte to its last header; to read a body once its headers
  // are in; a keep-alive connection waiting for its next request.
  int header_timeout_s = kDefaultHeaderTimeoutS;
  int body_timeout_s = kDefaultBodyTimeoutS;
  int idle_timeout_s = kDefaultIdleTimeoutS;
  // Answers a request from its headers alone, before its body is read (an API key check);
  // nullopt lets the body be read and the request handled. The body of a request answered here
  // is never read: its connection closes after the answer.
  std::function<std::optional<HttpResponse>(const HttpRequest&)> check_headers;
  // The server's own refusals (400, 413, 431) as the API answers errors on the request's route,
  // given the request's fields read so far, the status code, a short code naming the refusal
  // (headers_too_large, body_too_large, malformed_request, unsupported_transfer_encoding) and
  // the message. Unset: {"error": {"message", "type": "invalid_request_error", "code"}}.
  std::function<HttpResponse(const HttpRequest&, int status, std::string_view code,
                             const std::string& message)>
      render_refusal;
  // Adds headers to the server's own refusals (those above, and the 503 over max_connections)
  // before they are sent, given the request's header fields read so far.
  std::function<void(const HttpRequest&, HttpResponse&)> decorate_refusal;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  absl::Status Start();
  int port() const;
  // From now on every answer says "Connection: close" and closes its connection (a draining
  // server's clients then open their next request elsewhere instead of seeing a reset).
  void BeginDrain();
  // Stops accepting, closes connections, joins the threads.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace quiver::gateway
