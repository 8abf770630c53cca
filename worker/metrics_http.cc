#include "worker/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/strings.h"
#include "common/thread_name.h"

namespace quiver::worker {

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start(const std::string& host, int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return absl::InternalError(StrCat("metrics socket: ", std::strerror(errno)));
  int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(StrCat("--metrics-host '", host, "' is not an IPv4 address"));
  }
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd_, 16) != 0) {
    return absl::UnavailableError(
        StrCat("metrics port ", host, ":", port, ": ", std::strerror(errno)));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] {
    SetThreadName("quiver-metrics");
    Serve();
  });
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void MetricsHttpServer::Serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    timeval timeout{2, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    char buf[2048];
    const ssize_t n = ::recv(client, buf, sizeof(buf) - 1, 0);
    std::string response;
    const std::string_view request(buf, n > 0 ? static_cast<size_t>(n) : 0);
    // "GET /path" followed by a space or a query.
    const auto is = [&](std::string_view path) {
      const std::string get = StrCat("GET ", path);
      return request.starts_with(get) && request.size() > get.size() &&
             (request[get.size()] == ' ' || request[get.size()] == '?');
    };
    const auto text = [](std::string_view status, std::string_view body) {
      return StrCat("HTTP/1.1 ", status,
                    "\r\nContent-Type: text/plain\r\nContent-Length: ", body.size(),
                    "\r\nConnection: close\r\n\r\n", body);
    };
    if (is("/metrics")) {
      const std::string body = registry_->Render();
      response = StrCat(
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
          "Content-Length: ",
          body.size(), "\r\nConnection: close\r\n\r\n", body);
    } else if (is("/health")) {
      response = text("200 OK", "ok\n");
    } else if (is("/ready")) {
      response = ready_ && ready_() ? text("200 OK", "ready\n")
                                    : text("503 Service Unavailable", "not ready\n");
    } else {
      response = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    }
    for (size_t sent = 0; sent < response.size();) {
      const ssize_t k =
          ::send(client, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (k <= 0) break;
      sent += static_cast<size_t>(k);
    }
    ::close(client);
  }
}

}  // namespace quiver::worker
