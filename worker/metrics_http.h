// A minimal HTTP/1.1 responder for Prometheus scrapes and Kubernetes probes: GET /metrics returns
// the registry's text, GET /health 200 while the process serves, GET /ready 200 once the worker
// takes work (after its model loaded and its fidelity gate passed; 503 again while it drains),
// anything else 404. One thread, one connection at a time (scrapes and probes are rare and small).
#pragma once

#include <atomic>
#include <functional>
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
  // What GET /ready answers (200 when true); unset: 503. Call before Start.
  void SetReadiness(std::function<bool()> ready) { ready_ = std::move(ready); }
  int port() const { return port_; }
  void Stop();

 private:
  void Serve();
  const MetricsRegistry* registry_;
  std::function<bool()> ready_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace quiver::worker
