// Name lookups that a caller can stop waiting for. getaddrinfo cannot be cancelled, and a DNS
// server that does not answer holds it for the resolver's own timeouts (5 s a try by default,
// several tries): a gateway's re-resolution or a trace export waiting on it would hold the
// process's shutdown that long. LookupHostWithin runs the lookup on a thread of its own and
// leaves that thread behind when its time is up or its stop token is asked to stop; the thread
// ends when getaddrinfo returns. At most kMaxPendingLookups such threads exist at a time in the
// process; beyond, a lookup fails at once rather than piling threads onto a DNS server that does
// not answer.
#pragma once

#include <chrono>
#include <functional>
#include <stop_token>
#include <string>
#include <vector>

namespace quiver {

struct HostLookup {
  enum class Outcome {
    kFound,       // at least one address
    kNoSuchName,  // the name exists nowhere or has no address (NXDOMAIN, no records)
    kFailed,      // no answer: the DNS server unreachable, a timeout, a stop, too many pending
  };
  Outcome outcome = Outcome::kFailed;
  // Numeric addresses ("10.0.0.7", "fd00::7"), each once, in the resolver's order.
  std::vector<std::string> addresses;
  std::string error;  // what failed, for kFailed and kNoSuchName
};

inline constexpr int kMaxPendingLookups = 8;

// getaddrinfo(host, port) for stream sockets, on the calling thread.
HostLookup LookupHost(const std::string& host, const std::string& port);

using HostLookupFn = std::function<HostLookup(const std::string& host, const std::string& port)>;

// `lookup` (LookupHost unless a test gives another) on its own thread, waited for at most
// `timeout` and only until `stop` is asked to stop: kFailed ("timed out", "stopped") after that.
HostLookup LookupHostWithin(const std::string& host, const std::string& port,
                            std::chrono::milliseconds timeout, const std::stop_token& stop = {},
                            HostLookupFn lookup = LookupHost);

}  // namespace quiver
