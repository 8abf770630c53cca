#include "common/host_lookup.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "common/strings.h"
#include "common/thread_name.h"

namespace quiver {
namespace {

std::atomic<int> pending_lookups{0};

// What a lookup's thread and its caller share; the thread may outlive the caller's wait.
struct Pending {
  std::mutex mu;
  std::condition_variable_any cv;
  bool done = false;
  HostLookup result;
};

}  // namespace

HostLookup LookupHost(const std::string& host, const std::string& port) {
  HostLookup out;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    const bool no_such_name = rc == EAI_NONAME
#ifdef EAI_NODATA
                              || rc == EAI_NODATA
#endif
        ;
    out.outcome = no_such_name ? HostLookup::Outcome::kNoSuchName : HostLookup::Outcome::kFailed;
    out.error = gai_strerror(rc);
    return out;
  }
  for (const addrinfo* p = res; p != nullptr; p = p->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (p->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(p->ai_addr)->sin_addr, buf,
                sizeof(buf));
    } else if (p->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(p->ai_addr)->sin6_addr, buf,
                sizeof(buf));
    } else {
      continue;
    }
    if (std::find(out.addresses.begin(), out.addresses.end(), buf) == out.addresses.end()) {
      out.addresses.emplace_back(buf);
    }
  }
  freeaddrinfo(res);
  out.outcome =
      out.addresses.empty() ? HostLookup::Outcome::kNoSuchName : HostLookup::Outcome::kFound;
  if (out.addresses.empty()) out.error = "no IPv4 or IPv6 address";
  return out;
}

HostLookup LookupHostWithin(const std::string& host, const std::string& port,
                            std::chrono::milliseconds timeout, const std::stop_token& stop,
                            HostLookupFn lookup) {
  HostLookup failed;
  if (pending_lookups.fetch_add(1) >= kMaxPendingLookups) {
    pending_lookups.fetch_sub(1);
    failed.error = StrCat(kMaxPendingLookups, " lookups still waiting on the DNS server");
    return failed;
  }
  auto pending = std::make_shared<Pending>();
  try {
    std::thread([pending, host, port, lookup = std::move(lookup)] {
      SetThreadName("quiver-lookup");
      HostLookup result = lookup(host, port);
      {
        std::lock_guard<std::mutex> lock(pending->mu);
        pending->result = std::move(result);
        pending->done = true;
      }
      pending->cv.notify_all();
      pending_lookups.fetch_sub(1);
    }).detach();
  } catch (const std::system_error& e) {  // no thread to be had
    pending_lookups.fetch_sub(1);
    failed.error = StrCat("no thread for the lookup: ", e.what());
    return failed;
  }
  std::unique_lock<std::mutex> lock(pending->mu);
  if (!pending->cv.wait_for(lock, stop, timeout, [&] { return pending->done; })) {
    failed.error =
        stop.stop_requested() ? "stopped" : StrCat("timed out after ", timeout.count(), " ms");
    return failed;
  }
  return std::move(pending->result);
}

}  // namespace quiver
