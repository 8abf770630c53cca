#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "app/commands.h"
#include "spdlog/spdlog.h"

namespace quiver::app {

gateway::HttpServerOptions HttpOptions(const std::string& host, int port, int handler_threads,
                                       size_t max_body_bytes, const HttpTimeouts& t,
                                       gateway::api::Api& api) {
  gateway::HttpServerOptions http;
  http.host = host;
  http.port = port;
  http.handler_threads = handler_threads;
  http.max_body_bytes = max_body_bytes;
  http.check_headers = [&api](const gateway::HttpRequest& r) { return api.CheckHeaders(r); };
  http.render_refusal = [&api](const gateway::HttpRequest& r, int status, std::string_view code,
                               const std::string& message) {
    return api.RenderRefusal(r, status, code, message);
  };
  http.decorate_refusal = [&api](const gateway::HttpRequest& r, gateway::HttpResponse& answer) {
    api.DecorateRefusal(r, answer);
  };
  http.header_timeout_s = t.header_s;
  http.body_timeout_s = t.body_s;
  http.idle_timeout_s = t.idle_s;
  http.max_connections = t.max_connections;
  http.max_body_bytes_in_flight = t.max_body_bytes_in_flight;
  return http;
}

void DrainAndStop(gateway::HttpServer& server, gateway::api::Api& api, int drain_s,
                  std::string_view who) {
  api.set_ready(false);  // load balancers stop sending
  server.BeginDrain();   // answers say Connection: close
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  std::thread timer([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(drain_s), [&] { return stopped; })) {
      spdlog::warn("{}: --drain-timeout ({} s) passed; requests still running get 503", who,
                   drain_s);
      api.StopRequests();
    }
  });
  server.Stop();  // no new connections; waits for the handlers, bounded by the timer
  {
    std::lock_guard<std::mutex> lock(mu);
    stopped = true;
  }
  cv.notify_all();
  timer.join();
}

}  // namespace quiver::app
