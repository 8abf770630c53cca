// libFuzzer target: arbitrary bytes sent as one client's whole conversation to a real HttpServer
// on loopback (gateway/http_server.h): request lines, headers, chunked and sized bodies,
// pipelining, Expect: 100-continue, a key check from the headers, small limits. The client then
// half-closes and reads until the server closes. The server must answer or close every time
// (never hang: a 5 s read bound traps), every answer must start with an HTTP/1.x status line,
// and nothing may crash or leak.
//
//   scripts/fuzz.sh [seconds] http_request_fuzz
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "gateway/http_server.h"

namespace {

using quiver::gateway::HttpRequest;
using quiver::gateway::HttpResponse;
using quiver::gateway::HttpServer;
using quiver::gateway::HttpServerOptions;

int Port() {
  static const int port = [] {
    HttpServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.handler_threads = 2;
    o.max_body_bytes = 4096;
    o.max_header_bytes = 1024;
    o.max_body_bytes_in_flight = 8192;
    o.header_timeout_s = 2;
    o.body_timeout_s = 2;
    o.idle_timeout_s = 2;
    o.check_headers = [](const HttpRequest& r) -> std::optional<HttpResponse> {
      if (r.target == "/private" && r.headers.count("authorization") == 0) {
        HttpResponse denied;
        denied.status = 401;
        denied.body = "{}";
        return denied;
      }
      return std::nullopt;
    };
    auto* server = new HttpServer(o, [](const HttpRequest& r) {
      HttpResponse out;
      out.body = r.method + " " + r.target + " " + std::to_string(r.body.size());
      if (r.client_gone) (void)r.client_gone();
      return out;
    });
    if (!server->Start().ok()) __builtin_trap();
    return server->port();
  }();
  return port;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int port = Port();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return 0;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early (an error answer)
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string answer;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) __builtin_trap();  // the server hung
      break;                                                          // reset: fine
    }
    answer.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  // Answers are HTTP/1.1, or 1.0 to a 1.0 request.
  if (!answer.empty() && answer.compare(0, 9, "HTTP/1.1 ") != 0 &&
      answer.compare(0, 9, "HTTP/1.0 ") != 0) {
    __builtin_trap();
  }
  return 0;
}
