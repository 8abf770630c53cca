// HTTP/1.1 keep-alive server on Boost.Beast/Asio, behind a small interface: requests are read on
// I/O threads and handled on a separate handler pool (tokenization and waiting for replicas never
// run on an I/O thread); the handler thread sends the answer itself as far as the socket takes it
// without blocking, and the connection's strand writes any rest and reads the next request.
// Bodies larger than max_body_bytes are answered 413 without being read.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace quiver::gateway {

struct HttpRequest {
  std::string method;
  std::string target;  // path, without the query string
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 8080;  // 0: pick a free port (see HttpServer::port)
  int io_threads = 1;
  int handler_threads = 2;
  size_t max_body_bytes = 8 << 20;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  absl::Status Start();
  int port() const;
  // Stops accepting, closes connections, joins the threads.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace quiver::gateway
