#include "common/host_lookup.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace quiver {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A DNS server that does not answer, as getaddrinfo meets it: the lookup returns after `delay`.
HostLookupFn SlowLookup(milliseconds delay) {
  return [delay](const std::string&, const std::string&) {
    std::this_thread::sleep_for(delay);
    HostLookup late;
    late.outcome = HostLookup::Outcome::kFound;
    late.addresses = {"10.0.0.7"};
    return late;
  };
}

TEST(HostLookupTest, NumericAndLocalNamesResolve) {
  const HostLookup v4 = LookupHost("127.0.0.1", "8080");
  ASSERT_EQ(v4.outcome, HostLookup::Outcome::kFound) << v4.error;
  EXPECT_EQ(v4.addresses, std::vector<std::string>{"127.0.0.1"});  // once, not per protocol
  const HostLookup v6 = LookupHostWithin("::1", "8080", milliseconds(5000));
  ASSERT_EQ(v6.outcome, HostLookup::Outcome::kFound) << v6.error;
  EXPECT_EQ(v6.addresses, std::vector<std::string>{"::1"});
  const HostLookup local = LookupHostWithin("localhost", "80", milliseconds(5000));
  ASSERT_EQ(local.outcome, HostLookup::Outcome::kFound) << local.error;
  EXPECT_FALSE(local.addresses.empty());
}

TEST(HostLookupTest, ANameThatCannotExistIsNoSuchNameNotAFailure) {
  // .invalid is reserved never to resolve (RFC 2606); with no DNS server reachable the resolver
  // may say so as a failure instead, which the callers also handle.
  const HostLookup none = LookupHostWithin("quiver-test.invalid", "80", milliseconds(10000));
  EXPECT_NE(none.outcome, HostLookup::Outcome::kFound);
  EXPECT_FALSE(none.error.empty());
}

TEST(HostLookupTest, AnUnansweredLookupIsLeftAtItsTimeout) {
  const auto start = Clock::now();
  const HostLookup late =
      LookupHostWithin("collector", "4318", milliseconds(50), {}, SlowLookup(milliseconds(2000)));
  const auto waited = Clock::now() - start;
  EXPECT_EQ(late.outcome, HostLookup::Outcome::kFailed);
  EXPECT_NE(late.error.find("timed out after 50 ms"), std::string::npos) << late.error;
  EXPECT_LT(waited, milliseconds(1500));

  // One that answers in time is waited for.
  const HostLookup soon =
      LookupHostWithin("collector", "4318", milliseconds(5000), {}, SlowLookup(milliseconds(10)));
  ASSERT_EQ(soon.outcome, HostLookup::Outcome::kFound);
  EXPECT_EQ(soon.addresses, std::vector<std::string>{"10.0.0.7"});
}

TEST(HostLookupTest, AStopEndsTheWait) {
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(50));
    stop.request_stop();
  });
  const auto start = Clock::now();
  const HostLookup stopped = LookupHostWithin("workers", "50051", milliseconds(60000),
                                              stop.get_token(), SlowLookup(milliseconds(2000)));
  const auto waited = Clock::now() - start;
  stopper.join();
  EXPECT_EQ(stopped.outcome, HostLookup::Outcome::kFailed);
  EXPECT_EQ(stopped.error, "stopped");
  EXPECT_LT(waited, milliseconds(1500));
}

TEST(HostLookupTest, PendingLookupsAreBounded) {
  // kMaxPendingLookups lookups left waiting on a server that does not answer; the next fails at
  // once instead of starting another thread.
  for (int i = 0; i < kMaxPendingLookups + 2; ++i) {
    LookupHostWithin("workers", "50051", milliseconds(1), {}, SlowLookup(milliseconds(1500)));
  }
  const auto start = Clock::now();
  const HostLookup refused =
      LookupHostWithin("workers", "50051", milliseconds(5000), {}, SlowLookup(milliseconds(1)));
  EXPECT_LT(Clock::now() - start, milliseconds(500));
  EXPECT_EQ(refused.outcome, HostLookup::Outcome::kFailed);
  EXPECT_NE(refused.error.find("lookups still waiting"), std::string::npos) << refused.error;
  // Once they have answered (1.5 s; polled, so that a loaded machine's late threads do not fail
  // the test), lookups run again.
  HostLookup again;
  for (const auto until = Clock::now() + milliseconds(20000); Clock::now() < until;) {
    std::this_thread::sleep_for(milliseconds(250));
    again =
        LookupHostWithin("workers", "50051", milliseconds(5000), {}, SlowLookup(milliseconds(1)));
    if (again.outcome == HostLookup::Outcome::kFound) break;
  }
  EXPECT_EQ(again.outcome, HostLookup::Outcome::kFound) << again.error;
}

}  // namespace
}  // namespace quiver
