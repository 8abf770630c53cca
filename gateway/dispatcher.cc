#include "gateway/dispatcher.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "common/strings.h"

namespace quiver::gateway {

int PickReplica(std::span<const ReplicaLoad> replicas, std::span<const int> exclude,
                size_t start) {
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

Dispatcher::Dispatcher(std::vector<std::shared_ptr<Replica>> replicas, int64_t max_chunk_tokens)
    : source_([replicas = std::move(replicas)] { return replicas; }),
      max_chunk_tokens_(max_chunk_tokens) {}

Dispatcher::Dispatcher(ReplicaSource source, int64_t max_chunk_tokens)
    : source_(std::move(source)), max_chunk_tokens_(max_chunk_tokens) {}

bool Dispatcher::any_healthy() const {
  for (const auto& r : source_()) {
    if (r->healthy()) return true;
  }
  return false;
}

namespace {

// A replica that failed (down, draining, connection lost) is worth another replica's try;
// overload (RESOURCE_EXHAUSTED) goes back to the client as 429 with Retry-After, and bad input
// would fail anywhere.
bool Retryable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kAborted;
}

}  // namespace

absl::StatusOr<ReplicaResult> Dispatcher::Run(CallKind kind, const std::vector<Sequence>& sequences,
                                              const quiver::v1::OutputOptions& output,
                                              std::chrono::system_clock::time_point deadline) {
  const std::vector<std::shared_ptr<Replica>> replicas_ = source_();  // this request's snapshot
  std::vector<int64_t> lengths;
  for (const Sequence& s : sequences) lengths.push_back(static_cast<int64_t>(s.ids.size()));
  const auto bounds = SplitIntoChunks(lengths, max_chunk_tokens_);

  struct ChunkState {
    quiver::v1::Chunk chunk;
    int64_t tokens = 0;
    std::vector<int> tried;
    absl::StatusOr<ReplicaResult> result = absl::UnknownError("not run");
    absl::Status last_error;
    bool done = false;
  };
  std::vector<ChunkState> chunks(bounds.size());
  for (size_t c = 0; c < bounds.size(); ++c) {
    quiver::v1::Chunk& ch = chunks[c].chunk;
    *ch.mutable_output() = output;
    ch.add_cu_seqlens(0);
    bool types = false;
    for (size_t i = bounds[c].first; i < bounds[c].second; ++i) types |= !sequences[i].type_ids.empty();
    for (size_t i = bounds[c].first; i < bounds[c].second; ++i) {
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
    }
    chunks[c].tokens = ch.token_ids_size();
  }

  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = chunks.size();
  std::function<void(size_t)> send = [&](size_t c) {
    std::vector<ReplicaLoad> loads;
    for (const auto& r : replicas_) loads.push_back({r->healthy(), r->outstanding_tokens()});
    int pick;
    {
      std::lock_guard<std::mutex> lock(mu);
      pick = PickReplica(loads, chunks[c].tried, rotation_++);  // each replica at most once per chunk
      if (pick < 0 || std::chrono::system_clock::now() >= deadline) {
        if (pick >= 0) {
          chunks[c].result = absl::DeadlineExceededError("request deadline passed");
        } else if (!chunks[c].last_error.ok()) {
          chunks[c].result = chunks[c].last_error;
        } else {
          chunks[c].result = absl::UnavailableError("no healthy replica");
        }
        chunks[c].done = true;
        if (--remaining == 0) cv.notify_all();
        return;
      }
      chunks[c].tried.push_back(pick);
    }
    replicas_[pick]->Call(kind, chunks[c].chunk, deadline,
                          [&, c](absl::StatusOr<ReplicaResult> r) {
                            if (!r.ok() && Retryable(r.status()) &&
                                std::chrono::system_clock::now() < deadline) {
                              {
                                std::lock_guard<std::mutex> lock(mu);
                                chunks[c].last_error = r.status();
                              }
                              send(c);  // another replica, within the deadline
                              return;
                            }
                            std::lock_guard<std::mutex> lock(mu);
                            chunks[c].result = std::move(r);
                            chunks[c].done = true;
                            if (--remaining == 0) cv.notify_all();
                          });
  };
  for (size_t c = 0; c < chunks.size(); ++c) send(c);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return remaining == 0; });
  }
  ReplicaResult out;
  for (ChunkState& c : chunks) {
    if (!c.result.ok()) return c.result.status();
    out.num_seqs += c.result->num_seqs;
    out.dimensions = c.result->dimensions;
    out.output_type = c.result->output_type;
    out.data += c.result->data;
    out.queue_wait_us = std::max(out.queue_wait_us, c.result->queue_wait_us);
    out.compute_us = std::max(out.compute_us, c.result->compute_us);
  }
  return out;
}

}  // namespace quiver::gateway
