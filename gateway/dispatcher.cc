#include "gateway/dispatcher.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>

#include "common/strings.h"

namespace quiver::gateway {

int PickReplica(std::span<const ReplicaLoad> replicas, std::span<const int> exclude, size_t start) {
  int best = -1;
  const size_t n = replicas.size();
  for (size_t k = 0; k < n; ++k) {
    const int i = static_cast<int>((start + k) % n);
    if (!replicas[i].healthy) continue;
    if (std::find(exclude.begin(), exclude.end(), i) != exclude.end()) continue;
    if (best < 0 || replicas[i].outstanding_tokens < replicas[best].outstanding_tokens) best = i;
  }
  return best;
}

std::vector<std::pair<size_t, size_t>> SplitIntoChunks(std::span<const int64_t> seq_tokens,
                                                       int64_t max_chunk_tokens) {
  std::vector<std::pair<size_t, size_t>> chunks;
  size_t begin = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < seq_tokens.size(); ++i) {
    if (i > begin && tokens + seq_tokens[i] > max_chunk_tokens) {
      chunks.emplace_back(begin, i);
      begin = i;
      tokens = 0;
    }
    tokens += seq_tokens[i];
  }
  if (begin < seq_tokens.size()) chunks.emplace_back(begin, seq_tokens.size());
  return chunks;
}

absl::Status CallContext::Check(std::string_view stage) const {
  if (client_gone && client_gone()) {
    return absl::CancelledError(StrCat("the client closed its connection (during ", stage, ")"));
  }
  if (stopping != nullptr && stopping->load()) {
    return absl::UnavailableError(
        StrCat("the server is shutting down and its --drain-timeout passed (during ", stage,
               "); retry elsewhere"));
  }
  if (std::chrono::system_clock::now() >= deadline) {
    return absl::DeadlineExceededError(StrCat("request deadline passed (during ", stage, ")"));
  }
  return absl::OkStatus();
}

void CancelSignal::Cancel() {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_.exchange(true)) return;
    hooks.swap(hooks_);
  }
  for (auto& hook : hooks) hook();
}

void CancelSignal::OnCancel(std::function<void()> hook) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!cancelled_.load()) {
      hooks_.push_back(std::move(hook));
      return;
    }
  }
  hook();
}

void LatencyEstimate::Observe(std::chrono::microseconds sample) {
  const double r = static_cast<double>(sample.count());
  if (samples_++ == 0) {
    srtt_us_ = r;
    rttvar_us_ = r / 2;
  } else {
    rttvar_us_ = 0.75 * rttvar_us_ + 0.25 * std::fabs(srtt_us_ - r);
    srtt_us_ = 0.875 * srtt_us_ + 0.125 * r;
  }
}

std::chrono::microseconds LatencyEstimate::Timeout(std::chrono::microseconds floor,
                                                   std::chrono::microseconds initial) const {
  if (samples_ == 0) return std::max(floor, initial);
  const auto rto = std::chrono::microseconds(static_cast<int64_t>(srtt_us_ + 4 * rttvar_us_));
  return std::max(floor, rto);
}

// Per-replica latency and suspicion, the hedge budget and the tie rotation, shared by every Run
// and by the callbacks of attempts that outlive theirs.
struct Dispatcher::Shared {
  HedgeOptions options;
  std::mutex mu;
  struct PerReplica {
    LatencyEstimate latency;
    // Set when one of its attempts had to be hedged; new chunks go elsewhere until then (or until
    // it answers one), as a load balancer ejects an outlier for a while.
    std::chrono::steady_clock::time_point silent_until;
    // Seen unhealthy while silent: once healthy again (reconnected, its health check passed), the
    // link or process that left its chunk unanswered is back, and it is trusted again at once.
    bool down_while_silent = false;
  };
  std::map<std::string, PerReplica> replicas;  // by name
  double hedge_tokens = 0;
  size_t rotation = 0;
  Counts counts;
  Counter* hedges_metric = nullptr;
  Counter* hedges_won_metric = nullptr;
  Counter* cancelled_metric = nullptr;

  std::chrono::microseconds AttemptTimeout(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    return replicas[name].latency.Timeout(options.min_attempt, options.initial_attempt);
  }
};

namespace {

using SteadyClock = std::chrono::steady_clock;

// A replica that failed (down, draining, connection lost) is worth another replica's try;
// overload (RESOURCE_EXHAUSTED) goes back to the client as 429 with Retry-After, and bad input
// would fail anywhere.
bool Retryable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kAborted;
}

struct Attempt {
  int replica = 0;
  std::shared_ptr<CancelSignal> cancel;
  SteadyClock::time_point started;
  bool hedge = false;  // sent because the first was slow
  bool answered = false;
};

struct ChunkState {
  quiver::v1::Chunk chunk;
  std::vector<int> tried;
  std::vector<Attempt> attempts;
  int live = 0;  // attempts not answered yet
  absl::StatusOr<ReplicaResult> result = absl::UnknownError("not run");
  absl::Status last_error;
  bool done = false;
  bool hedged = false;
  SteadyClock::time_point hedge_at = SteadyClock::time_point::max();
};

// One Run's chunks; held by the attempts' callbacks too, so a Run that returns early (client
// gone, deadline) leaves nothing dangling.
struct RunState {
  CallKind kind = CallKind::kEmbed;
  std::chrono::system_clock::time_point deadline;
  std::vector<std::shared_ptr<Replica>> replicas;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ChunkState> chunks;
  size_t remaining = 0;
};

void FinishLocked(RunState& run, ChunkState& chunk, absl::StatusOr<ReplicaResult> result,
                  std::vector<std::shared_ptr<CancelSignal>>& to_cancel) {
  chunk.result = std::move(result);
  chunk.done = true;
  for (Attempt& a : chunk.attempts) {
    if (!a.answered) to_cancel.push_back(a.cancel);
  }
  if (--run.remaining == 0) run.cv.notify_all();
}

void CancelAll(Dispatcher::Shared& shared, std::vector<std::shared_ptr<CancelSignal>>& signals);

// Starts one more attempt for chunk `c` on the least loaded healthy replica it has not tried,
// preferring replicas not silent on a hedged chunk. False when there is none.
bool StartAttempt(const std::shared_ptr<Dispatcher::Shared>& shared,
                  const std::shared_ptr<RunState>& run, size_t c, bool hedge);

void OnAnswer(const std::shared_ptr<Dispatcher::Shared>& shared,
              const std::shared_ptr<RunState>& run, size_t c, size_t a,
              absl::StatusOr<ReplicaResult> r) {
  std::vector<std::shared_ptr<CancelSignal>> to_cancel;
  bool retry = false;
  {
    std::lock_guard<std::mutex> lock(run->mu);
    ChunkState& chunk = run->chunks[c];
    Attempt& attempt = chunk.attempts[a];
    --chunk.live;
    attempt.answered = true;
    const std::string& name = run->replicas[attempt.replica]->name();
    {
      std::lock_guard<std::mutex> shared_lock(shared->mu);
      Dispatcher::Shared::PerReplica& stats = shared->replicas[name];
      if (r.ok()) {
        stats.silent_until = {};
        stats.down_while_silent = false;
        stats.latency.Observe(std::chrono::duration_cast<std::chrono::microseconds>(
            SteadyClock::now() - attempt.started));
        if (!chunk.done) {
          shared->hedge_tokens = std::min(shared->options.max_hedge_tokens,
                                          shared->hedge_tokens + shared->options.hedges_per_answer);
          if (attempt.hedge) {
            ++shared->counts.hedges_won;
            if (shared->hedges_won_metric) shared->hedges_won_metric->Inc();
          }
        }
      }
    }
    if (chunk.done) return;  // the other attempt answered first, or the Run gave up
    if (r.ok() || !Retryable(r.status())) {
      FinishLocked(*run, chunk, std::move(r), to_cancel);
    } else {
      chunk.last_error = r.status();
      if (chunk.live > 0) return;  // the other attempt may still answer
      if (std::chrono::system_clock::now() >= run->deadline) {
        FinishLocked(*run, chunk, absl::DeadlineExceededError("request deadline passed"),
                     to_cancel);
      } else {
        retry = true;
      }
    }
  }
  CancelAll(*shared, to_cancel);
  if (retry && !StartAttempt(shared, run, c, /*hedge=*/false)) {
    std::lock_guard<std::mutex> lock(run->mu);
    ChunkState& chunk = run->chunks[c];
    if (!chunk.done && chunk.live == 0) FinishLocked(*run, chunk, chunk.last_error, to_cancel);
  }
  CancelAll(*shared, to_cancel);
}

bool StartAttempt(const std::shared_ptr<Dispatcher::Shared>& shared,
                  const std::shared_ptr<RunState>& run, size_t c, bool hedge) {
  const size_t n = run->replicas.size();
  std::vector<ReplicaLoad> loads(n), quiet(n);
  size_t start;
  {
    std::lock_guard<std::mutex> lock(shared->mu);
    start = shared->rotation++;
    const SteadyClock::time_point now = SteadyClock::now();
    for (size_t i = 0; i < n; ++i) {
      const Replica& r = *run->replicas[i];
      loads[i] = {r.healthy(), r.outstanding_tokens()};
      quiet[i] = loads[i];
      auto it = shared->replicas.find(r.name());
      if (it == shared->replicas.end()) continue;
      Dispatcher::Shared::PerReplica& stats = it->second;
      if (!loads[i].healthy && now < stats.silent_until) {
        stats.down_while_silent = true;
      } else if (loads[i].healthy && stats.down_while_silent) {
        stats.down_while_silent = false;
        stats.silent_until = {};
      }
      quiet[i].healthy = loads[i].healthy && now >= stats.silent_until;
    }
  }
  int pick;
  size_t a;
  auto cancel = std::make_shared<CancelSignal>();
  {
    std::lock_guard<std::mutex> lock(run->mu);  // then shared->mu, the order OnAnswer takes
    ChunkState& chunk = run->chunks[c];
    if (chunk.done) return true;
    pick = PickReplica(quiet, chunk.tried, start);
    if (pick < 0) pick = PickReplica(loads, chunk.tried, start);
    if (pick < 0) return false;
    chunk.tried.push_back(pick);
    a = chunk.attempts.size();
    const auto now = SteadyClock::now();
    chunk.attempts.push_back({pick, cancel, now, hedge});
    ++chunk.live;
    if (!hedge) chunk.hedge_at = now + shared->AttemptTimeout(run->replicas[pick]->name());
  }
  if (hedge) {
    std::lock_guard<std::mutex> lock(shared->mu);
    ++shared->counts.hedges;
    if (shared->hedges_metric) shared->hedges_metric->Inc();
  }
  run->replicas[pick]->Call(run->kind, run->chunks[c].chunk, run->deadline, cancel,
                            [shared, run, c, a](absl::StatusOr<ReplicaResult> r) {
                              OnAnswer(shared, run, c, a, std::move(r));
                            });
  return true;
}

}  // namespace

namespace {

void CancelAll(Dispatcher::Shared& shared, std::vector<std::shared_ptr<CancelSignal>>& signals) {
  int64_t fresh = 0;
  for (auto& s : signals) fresh += s->cancelled() ? 0 : 1;
  if (fresh > 0) {
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.counts.cancelled += fresh;
    if (shared.cancelled_metric) shared.cancelled_metric->Inc(fresh);
  }
  for (auto& s : signals) s->Cancel();
  signals.clear();
}

// Chunks whose first attempt is overdue get a second one elsewhere, each paid from the hedge
// budget; their first replica is marked silent, so that new chunks avoid it for a while
// (silent_for, or until it answers one). Called and returns with run->mu held through `lock`,
// which it releases while it starts the attempts.
void Hedge(const std::shared_ptr<Dispatcher::Shared>& shared, const std::shared_ptr<RunState>& run,
           const std::vector<size_t>& due, SteadyClock::time_point now,
           std::unique_lock<std::mutex>& lock) {
  {
    std::lock_guard<std::mutex> shared_lock(shared->mu);
    for (size_t c : due) {
      const Attempt& first = run->chunks[c].attempts.front();
      shared->replicas[run->replicas[first.replica]->name()].silent_until =
          now + shared->options.silent_for;
    }
  }
  lock.unlock();
  for (size_t c : due) {
    bool allowed;
    {
      std::lock_guard<std::mutex> shared_lock(shared->mu);
      allowed = shared->hedge_tokens >= 1;
      if (allowed) shared->hedge_tokens -= 1;
    }
    if (allowed && !StartAttempt(shared, run, c, /*hedge=*/true)) {
      std::lock_guard<std::mutex> shared_lock(shared->mu);
      shared->hedge_tokens += 1;  // no other replica: nothing was spent
    }
  }
  lock.lock();
}

// The chunk of sequences [begin, end): their ids with cu_seqlens, span bounds, token type ids
// where any of them has some, prompt lengths where any has a prompt; the output options and the
// trace context.
quiver::v1::Chunk BuildChunk(const std::vector<Sequence>& sequences, size_t begin, size_t end,
                             const quiver::v1::OutputOptions& output,
                             const std::string& traceparent) {
  quiver::v1::Chunk ch;
  *ch.mutable_output() = output;
  if (!traceparent.empty()) ch.set_traceparent(traceparent);
  ch.add_cu_seqlens(0);
  bool types = false, prompts = false;
  for (size_t i = begin; i < end; ++i) {
    types |= !sequences[i].type_ids.empty();
    prompts |= sequences[i].prompt_tokens > 0;
  }
  for (size_t i = begin; i < end; ++i) {
    const uint32_t base = static_cast<uint32_t>(ch.token_ids_size());
    for (const auto& [b, e] : sequences[i].spans) {
      ch.add_span_bounds(base + b);
      ch.add_span_bounds(base + e);
    }
    for (uint32_t id : sequences[i].ids) ch.add_token_ids(id);
    if (types) {
      for (size_t k = 0; k < sequences[i].ids.size(); ++k) {
        ch.add_token_type_ids(sequences[i].type_ids.empty() ? 0 : sequences[i].type_ids[k]);
      }
    }
    ch.add_cu_seqlens(static_cast<uint32_t>(ch.token_ids_size()));
    if (prompts) ch.add_prompt_lengths(sequences[i].prompt_tokens);
  }
  return ch;
}

// OUT_OF_RANGE when the chunks hold more tokens than the healthy replicas' queues admit
// together (where every one of them says its limit).
absl::Status CheckCapacity(const std::vector<std::shared_ptr<Replica>>& replicas,
                           const std::vector<ChunkState>& chunks) {
  int64_t capacity = 0, tokens = 0;
  bool known = true;
  for (const auto& r : replicas) {
    if (!r->healthy()) continue;
    const int64_t q = r->max_queued_tokens();
    known = known && q > 0;
    capacity += q;
  }
  for (const ChunkState& c : chunks) tokens += c.chunk.token_ids_size();
  if (known && capacity > 0 && tokens > capacity) {
    return absl::OutOfRangeError(
        StrCat("the request has ", tokens, " tokens; the replicas admit at most ", capacity,
               " at once (--max-queued-tokens", replicas.size() > 1 ? ", summed" : "",
               "): send it in smaller requests"));
  }
  return absl::OkStatus();
}

// The chunks' results joined in order, or the first failure; then every attempt still out goes
// to `to_cancel` (the request fails as a whole: the other chunks are not worth computing).
absl::StatusOr<ReplicaResult> Gather(std::vector<ChunkState>& chunks,
                                     std::vector<std::shared_ptr<CancelSignal>>& to_cancel) {
  ReplicaResult out;
  absl::Status failed;
  for (ChunkState& c : chunks) {
    if (!c.result.ok()) {
      if (failed.ok()) failed = c.result.status();
      continue;
    }
    out.num_seqs += c.result->num_seqs;
    out.dimensions = c.result->dimensions;
    out.output_type = c.result->output_type;
    out.data += c.result->data;
    out.queue_wait_us = std::max(out.queue_wait_us, c.result->queue_wait_us);
    out.compute_us = std::max(out.compute_us, c.result->compute_us);
  }
  if (failed.ok()) return out;
  for (ChunkState& c : chunks) {
    for (Attempt& a : c.attempts) {
      if (!a.answered) to_cancel.push_back(a.cancel);
    }
  }
  return failed;
}

}  // namespace

Dispatcher::Dispatcher(std::vector<std::shared_ptr<Replica>> replicas, int64_t max_chunk_tokens,
                       HedgeOptions hedge)
    : Dispatcher(ReplicaSource([replicas = std::move(replicas)] { return replicas; }),
                 max_chunk_tokens, hedge) {}

Dispatcher::Dispatcher(ReplicaSource source, int64_t max_chunk_tokens, HedgeOptions hedge)
    : source_(std::move(source)),
      max_chunk_tokens_(max_chunk_tokens),
      shared_(std::make_shared<Shared>()) {
  shared_->options = hedge;
  shared_->hedge_tokens = hedge.max_hedge_tokens;
}

Dispatcher::~Dispatcher() = default;

bool Dispatcher::any_healthy() const {
  for (const auto& r : source_()) {
    if (r->healthy()) return true;
  }
  return false;
}

void Dispatcher::ExportMetrics(MetricsRegistry* metrics) {
  if (metrics == nullptr) return;
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->hedges_metric = &metrics->GetCounter(
      "quiver_gateway_hedges_total", "Chunks sent to a second replica after the first was slow");
  shared_->hedges_won_metric = &metrics->GetCounter(
      "quiver_gateway_hedges_won_total", "Hedged chunks answered first by the second replica");
  shared_->cancelled_metric = &metrics->GetCounter(
      "quiver_gateway_attempts_cancelled_total",
      "Chunk attempts cancelled: the client left, the deadline passed or a hedge won");
}

Dispatcher::Counts Dispatcher::counts() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->counts;
}

absl::StatusOr<ReplicaResult> Dispatcher::Run(CallKind kind, const std::vector<Sequence>& sequences,
                                              const quiver::v1::OutputOptions& output,
                                              const CallContext& call) {
  auto run = std::make_shared<RunState>();
  run->kind = kind;
  run->deadline = call.deadline;
  run->replicas = source_();  // this request's snapshot
  std::vector<int64_t> lengths;
  lengths.reserve(sequences.size());
  for (const Sequence& s : sequences) lengths.push_back(static_cast<int64_t>(s.ids.size()));
  const auto bounds = SplitIntoChunks(lengths, max_chunk_tokens_);

  run->chunks.resize(bounds.size());
  for (size_t c = 0; c < bounds.size(); ++c) {
    run->chunks[c].chunk =
        BuildChunk(sequences, bounds[c].first, bounds[c].second, output, call.traceparent);
  }
  run->remaining = run->chunks.size();

  // A request no queue could ever admit is refused now (413), not partly computed and then
  // answered 429 on every retry.
  if (absl::Status s = CheckCapacity(run->replicas, run->chunks); !s.ok()) return s;

  std::vector<std::shared_ptr<CancelSignal>> to_cancel;
  for (size_t c = 0; c < run->chunks.size(); ++c) {
    if (absl::Status s = call.Check("dispatch"); !s.ok()) break;  // the loop below answers
    if (!StartAttempt(shared_, run, c, /*hedge=*/false)) {
      std::lock_guard<std::mutex> lock(run->mu);
      ChunkState& chunk = run->chunks[c];
      if (!chunk.done) {
        FinishLocked(*run, chunk, absl::UnavailableError("no healthy replica"), to_cancel);
      }
    }
  }

  // Wait for the answers; meanwhile hedge slow chunks, and give up when the client leaves or the
  // deadline passes. The client is polled every 50 ms.
  std::unique_lock<std::mutex> lock(run->mu);
  while (run->remaining > 0) {
    const absl::Status stop = call.Check("compute");
    if (!stop.ok()) {
      for (ChunkState& chunk : run->chunks) {
        if (!chunk.done) FinishLocked(*run, chunk, stop, to_cancel);
      }
      break;
    }
    const auto now = SteadyClock::now();
    std::vector<size_t> due;
    SteadyClock::time_point next = now + std::chrono::milliseconds(50);
    for (size_t c = 0; c < run->chunks.size(); ++c) {
      ChunkState& chunk = run->chunks[c];
      if (chunk.done || chunk.hedged || chunk.live == 0) continue;
      if (now >= chunk.hedge_at) {
        chunk.hedged = true;
        due.push_back(c);
      } else {
        next = std::min(next, chunk.hedge_at);
      }
    }
    if (!due.empty()) {
      Hedge(shared_, run, due, now, lock);
      continue;
    }
    const auto wall_deadline = call.deadline;
    if (wall_deadline != std::chrono::system_clock::time_point::max()) {
      const auto left = wall_deadline - std::chrono::system_clock::now();
      next = std::min(next, now + std::chrono::duration_cast<SteadyClock::duration>(left));
    }
    run->cv.wait_until(lock, next);
  }
  absl::StatusOr<ReplicaResult> out = Gather(run->chunks, to_cancel);
  lock.unlock();
  CancelAll(*shared_, to_cancel);
  return out;
}

}  // namespace quiver::gateway
