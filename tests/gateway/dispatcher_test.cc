// The gateway's decisions: which replica gets a chunk, where a request is split, and what a
// request does when a replica hangs, its client leaves or its deadline passes (fake replicas).
#include "gateway/dispatcher.h"

#include <gtest/gtest.h>

#include <thread>

namespace quiver::gateway {
namespace {

TEST(PickReplicaTest, FewestOutstandingTokensAmongHealthy) {
  const std::vector<ReplicaLoad> r = {{true, 500}, {false, 0}, {true, 100}, {true, 300}};
  EXPECT_EQ(PickReplica(r, {}), 2);
  const std::vector<int> tried = {2};
  EXPECT_EQ(PickReplica(r, tried), 3);  // a retry goes elsewhere
  const std::vector<int> all = {0, 2, 3};
  EXPECT_EQ(PickReplica(r, all), -1);  // the unhealthy one is never picked
  EXPECT_EQ(PickReplica(std::vector<ReplicaLoad>{}, {}), -1);
}

TEST(PickReplicaTest, TiesRotate) {
  const std::vector<ReplicaLoad> idle = {{true, 0}, {true, 0}, {true, 0}};
  EXPECT_EQ(PickReplica(idle, {}, 0), 0);
  EXPECT_EQ(PickReplica(idle, {}, 1), 1);
  EXPECT_EQ(PickReplica(idle, {}, 5), 2);
}

TEST(SplitIntoChunksTest, ConsecutiveSequencesUpToTheBudget) {
  const std::vector<int64_t> lengths = {100, 100, 100, 500, 10, 10};
  const auto chunks = SplitIntoChunks(lengths, 250);
  const std::vector<std::pair<size_t, size_t>> want = {{0, 2}, {2, 3}, {3, 4}, {4, 6}};
  EXPECT_EQ(chunks, want);  // the 500-token sequence is a chunk of its own
  EXPECT_TRUE(SplitIntoChunks(std::vector<int64_t>{}, 250).empty());
}

TEST(LatencyEstimateTest, FollowsRfc6298) {
  using std::chrono::microseconds;
  LatencyEstimate e;
  EXPECT_EQ(e.Timeout(microseconds(1000), microseconds(7000)), microseconds(7000));
  e.Observe(microseconds(100000));  // srtt 100 ms, rttvar 50 ms
  EXPECT_EQ(e.Timeout(microseconds(1000), microseconds(7000)), microseconds(300000));
  e.Observe(microseconds(100000));  // rttvar 37.5 ms
  EXPECT_EQ(e.Timeout(microseconds(1000), microseconds(7000)), microseconds(250000));
  EXPECT_EQ(e.Timeout(microseconds(900000), microseconds(7000)), microseconds(900000));  // floor
}

// A replica that answers at once, after a delay, never (until its attempt is cancelled, when
// it answers CANCELLED as a real one does), or fails at once with `failure`.
class FakeReplica final : public Replica {
 public:
  enum class Mode { kAnswer, kDelay, kHang, kFail };
  FakeReplica(std::string name, Mode mode, std::chrono::milliseconds delay = {},
              absl::Status failure = absl::UnavailableError("worker is shutting down"))
      : name_(std::move(name)), mode_(mode), delay_(delay), failure_(std::move(failure)) {}
  // The last owner may be one of its own delayed answers: `done` holds the dispatcher's run
  // state, which holds the replicas, and the thread drops it after the test's thread has already
  // let go. That thread cannot join itself; it is detached, and touches nothing of this replica
  // after this destructor returns.
  ~FakeReplica() override {
    for (std::thread& t : threads_) {
      if (t.get_id() == std::this_thread::get_id()) {
        t.detach();
      } else {
        t.join();
      }
    }
  }
  const std::string& name() const override { return name_; }
  bool healthy() const override { return healthy_; }
  int64_t outstanding_tokens() const override { return 0; }
  void Call(CallKind, const quiver::v1::Chunk& chunk, std::chrono::system_clock::time_point,
            std::shared_ptr<CancelSignal> cancel,
            std::function<void(absl::StatusOr<ReplicaResult>)> done) override {
    ++calls;
    ReplicaResult r;
    r.num_seqs = chunk.cu_seqlens_size() - 1;
    r.dimensions = 1;
    r.data.assign(static_cast<size_t>(r.num_seqs) * sizeof(float), '\1');
    // `done` owns (through the dispatcher's run state) the cancel signal that keeps the hook below:
    // it is dropped once it has run, as a real replica's is, so that the two free each other.
    struct Pending {
      std::mutex mu;
      std::function<void(absl::StatusOr<ReplicaResult>)> done;
    };
    auto pending = std::make_shared<Pending>();
    pending->done = std::move(done);
    auto answer = [pending](absl::StatusOr<ReplicaResult> result) {
      std::function<void(absl::StatusOr<ReplicaResult>)> run;
      {
        std::lock_guard<std::mutex> lock(pending->mu);
        run = std::move(pending->done);
        pending->done = nullptr;
      }
      if (run) run(std::move(result));
    };
    cancel->OnCancel([this, answer] {
      ++cancels;
      answer(absl::CancelledError("cancelled"));
    });
    if (mode_ == Mode::kAnswer) {
      answer(std::move(r));
    } else if (mode_ == Mode::kFail) {
      answer(failure_);
    } else if (mode_ == Mode::kDelay) {
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back([answer, r, delay = delay_] {
        std::this_thread::sleep_for(delay);
        answer(r);
      });
    }
  }
  std::atomic<int> calls{0}, cancels{0};
  void set_healthy(bool healthy) { healthy_ = healthy; }
  void set_mode(Mode mode) { mode_ = mode; }

 private:
  std::string name_;
  std::atomic<Mode> mode_;
  std::atomic<bool> healthy_{true};
  std::chrono::milliseconds delay_;
  absl::Status failure_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

std::vector<Sequence> OneSequence() { return {Sequence{{101, 7592, 102}, {}, {}}}; }

HedgeOptions FastHedges() {
  HedgeOptions h;
  h.min_attempt = std::chrono::milliseconds(50);
  h.initial_attempt = std::chrono::milliseconds(100);
  return h;
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(DispatcherTest, AHungReplicaCostsAnAttemptTimeoutNotTheDeadline) {
  auto hung = std::make_shared<FakeReplica>("hung", FakeReplica::Mode::kHang);
  auto good = std::make_shared<FakeReplica>("good", FakeReplica::Mode::kAnswer);
  // The hung replica first in line (ties go to the rotation's start, 0 on the first pick).
  Dispatcher d(std::vector<std::shared_ptr<Replica>>{hung, good}, 1000, FastHedges());
  const auto start = std::chrono::steady_clock::now();
  auto r = d.Run(CallKind::kScore, OneSequence(), {},
                 std::chrono::system_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_seqs, 1);
  EXPECT_LT(SecondsSince(start), 5.0);  // about the initial attempt timeout, not 30 s
  EXPECT_EQ(hung->calls.load(), 1);
  EXPECT_EQ(hung->cancels.load(), 1);  // the losing attempt was cancelled
  EXPECT_EQ(d.counts().hedges, 1);
  EXPECT_EQ(d.counts().hedges_won, 1);
  // New requests avoid the silent replica while another is there.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(d.Run(CallKind::kScore, OneSequence(), {},
                      std::chrono::system_clock::now() + std::chrono::seconds(30))
                    .ok());
  }
  EXPECT_EQ(hung->calls.load(), 1);
  EXPECT_EQ(good->calls.load(), 5);
}

// A host whose link went down and came back: its hung chunk was hedged, it was seen unhealthy,
// then it reconnected and passed its health check; it gets chunks again at once, not after
// silent_for (10 s).
TEST(DispatcherTest, AReplicaBackFromUnhealthyIsTrustedAgainAtOnce) {
  auto cut = std::make_shared<FakeReplica>("cut", FakeReplica::Mode::kHang);
  auto good = std::make_shared<FakeReplica>("good", FakeReplica::Mode::kAnswer);
  Dispatcher d(std::vector<std::shared_ptr<Replica>>{cut, good}, 1000, FastHedges());
  const auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(30); };
  ASSERT_TRUE(d.Run(CallKind::kScore, OneSequence(), {}, deadline()).ok());
  ASSERT_EQ(d.counts().hedges, 1);
  cut->set_healthy(false);
  ASSERT_TRUE(d.Run(CallKind::kScore, OneSequence(), {}, deadline()).ok());
  cut->set_mode(FakeReplica::Mode::kAnswer);
  cut->set_healthy(true);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(d.Run(CallKind::kScore, OneSequence(), {}, deadline()).ok());
  EXPECT_GE(cut->calls.load(), 2);  // the hung call and the ones since it came back
}

// A replica that stayed healthy but left a chunk unanswered stays silent (the test above's
// difference): a wedged process can still pass a health check.
TEST(DispatcherTest, ASlowReplicaThatStayedHealthyStaysSilent) {
  auto slow = std::make_shared<FakeReplica>("slow", FakeReplica::Mode::kHang);
  auto good = std::make_shared<FakeReplica>("good", FakeReplica::Mode::kAnswer);
  Dispatcher d(std::vector<std::shared_ptr<Replica>>{slow, good}, 1000, FastHedges());
  const auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(30); };
  ASSERT_TRUE(d.Run(CallKind::kScore, OneSequence(), {}, deadline()).ok());
  slow->set_mode(FakeReplica::Mode::kAnswer);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(d.Run(CallKind::kScore, OneSequence(), {}, deadline()).ok());
  EXPECT_EQ(slow->calls.load(), 1);
}

TEST(DispatcherTest, AClientThatLeftCancelsItsChunks) {
  auto hung = std::make_shared<FakeReplica>("hung", FakeReplica::Mode::kHang);
  Dispatcher d(std::vector<std::shared_ptr<Replica>>{hung}, 1000, FastHedges());
  const auto start = std::chrono::steady_clock::now();
  CallContext call(std::chrono::system_clock::now() + std::chrono::seconds(30));
  call.client_gone = [start] { return SecondsSince(start) > 0.2; };
  auto r = d.Run(CallKind::kScore, OneSequence(), {}, call);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_EQ(hung->cancels.load(), 1);
}

TEST(DispatcherTest, TheDeadlineCancelsAndReturnsAtOnce) {
  auto hung = std::make_shared<FakeReplica>("hung", FakeReplica::Mode::kHang);
  Dispatcher d(std::vector<std::shared_ptr<Replica>>{hung}, 1000, FastHedges());
  const auto start = std::chrono::steady_clock::now();
  auto r = d.Run(CallKind::kScore, OneSequence(), {},
                 std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_EQ(hung->cancels.load(), 1);
}

TEST(DispatcherTest, HedgesAreBudgeted) {
  // Both replicas slow: the first request may hedge, the next finds the bucket empty.
  auto a =
      std::make_shared<FakeReplica>("a", FakeReplica::Mode::kDelay, std::chrono::milliseconds(400));
  auto b =
      std::make_shared<FakeReplica>("b", FakeReplica::Mode::kDelay, std::chrono::milliseconds(400));
  HedgeOptions h = FastHedges();
  h.max_hedge_tokens = 1;
  h.hedges_per_answer = 0;
  Dispatcher d(std::vector<std::shared_ptr<Replica>>{a, b}, 1000, h);
  for (int i = 0; i < 3; ++i) {
    auto r = d.Run(CallKind::kScore, OneSequence(), {},
                   std::chrono::system_clock::now() + std::chrono::seconds(30));
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(d.counts().hedges, 1);
  EXPECT_EQ(a->calls.load() + b->calls.load(), 4);
}

TEST(DispatcherTest, AReplicaThatAnswersInTimeIsNeverHedged) {
  auto a = std::make_shared<FakeReplica>("a", FakeReplica::Mode::kAnswer);
  auto b = std::make_shared<FakeReplica>("b", FakeReplica::Mode::kAnswer);
  Dispatcher d(std::vector<std::shared_ptr<Replica>>{a, b}, 2, FastHedges());
  std::vector<Sequence> many(20, Sequence{{1, 2}, {}, {}});
  auto r = d.Run(CallKind::kScore, many, {},
                 std::chrono::system_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_seqs, 20);
  EXPECT_EQ(d.counts().hedges, 0);
  EXPECT_EQ(a->calls.load() + b->calls.load(), 20);
  EXPECT_EQ(a->cancels.load() + b->cancels.load(), 0);
}

// A replica that fails (down, draining: UNAVAILABLE; ABORTED) costs a retry on another replica,
// never the request; each replica is tried once, and when all have failed the request fails with
// the last error, at once. Overload and bad input go back to the client as they are: another
// replica would refuse them too (and overload wants the client's backoff, 429).
TEST(DispatcherTest, AFailedReplicaIsRetriedElsewhere) {
  for (const absl::Status& failure :
       {absl::UnavailableError("worker is shutting down"), absl::AbortedError("stream reset")}) {
    auto failing = std::make_shared<FakeReplica>("failing", FakeReplica::Mode::kFail,
                                                 std::chrono::milliseconds(0), failure);
    auto good = std::make_shared<FakeReplica>("good", FakeReplica::Mode::kAnswer);
    // The failing replica first in line (ties go to the rotation's start, 0 on the first pick).
    Dispatcher d(std::vector<std::shared_ptr<Replica>>{failing, good}, 1000, FastHedges());
    auto r = d.Run(CallKind::kEmbed, OneSequence(), {},
                   std::chrono::system_clock::now() + std::chrono::seconds(30));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->num_seqs, 1);
    EXPECT_EQ(failing->calls.load(), 1) << failure;
    EXPECT_EQ(good->calls.load(), 1) << failure;
  }
}

TEST(DispatcherTest, WhenEveryReplicaFailsTheRequestFailsWithTheLastError) {
  auto a = std::make_shared<FakeReplica>("a", FakeReplica::Mode::kFail);
  auto b = std::make_shared<FakeReplica>("b", FakeReplica::Mode::kFail);
  Dispatcher d(std::vector<std::shared_ptr<Replica>>{a, b}, 1000, FastHedges());
  const auto start = std::chrono::steady_clock::now();
  auto r = d.Run(CallKind::kEmbed, OneSequence(), {},
                 std::chrono::system_clock::now() + std::chrono::seconds(30));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_LT(SecondsSince(start), 5.0);  // not held until the deadline
  EXPECT_EQ(a->calls.load(), 1);
  EXPECT_EQ(b->calls.load(), 1);
}

TEST(DispatcherTest, OverloadAndBadInputAreNotRetried) {
  for (const absl::Status& refusal : {absl::ResourceExhaustedError("queue full"),
                                      absl::InvalidArgumentError("too many tokens")}) {
    auto refusing = std::make_shared<FakeReplica>("refusing", FakeReplica::Mode::kFail,
                                                  std::chrono::milliseconds(0), refusal);
    auto good = std::make_shared<FakeReplica>("good", FakeReplica::Mode::kAnswer);
    Dispatcher d(std::vector<std::shared_ptr<Replica>>{refusing, good}, 1000, FastHedges());
    auto r = d.Run(CallKind::kEmbed, OneSequence(), {},
                   std::chrono::system_clock::now() + std::chrono::seconds(30));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), refusal.code()) << r.status();
    EXPECT_EQ(good->calls.load(), 0) << refusal;
  }
}

}  // namespace
}  // namespace quiver::gateway
