#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "app/commands.h"
#include "spdlog/spdlog.h"

namespace quiver::app {

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
