// A minimal HTTP/1.1 responder for Prometheus scrapes: GET /metrics returns the registry's text,
// anything else 404. One thread, one connection at a time (scrapes are rare and small).
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/metrics.h"

namespace quiver::worker {

class MetricsHttpServer {
 public:
  explicit MetricsHttpServer(const MetricsRegistry* registry) : registry_(registry) {}
  ~MetricsHttpServer();
  // Binds host:port (port 0 picks one; see port()) and starts serving.
  absl::Status Start(const std::string& host, int port);
  int port() const { return port_; }
  void Stop();

 private:
  void Serve();
  const MetricsRegistry* registry_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace quiver::worker
