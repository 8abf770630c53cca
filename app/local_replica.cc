#include "app/local_replica.h"

#include "common/strings.h"
#include "worker/chunk_codec.h"

namespace quiver::app {

void LocalReplica::Call(gateway::CallKind kind, const quiver::v1::Chunk& chunk,
                        std::chrono::system_clock::time_point deadline,
                        std::shared_ptr<gateway::CancelSignal> cancel,
                        std::function<void(absl::StatusOr<gateway::ReplicaResult>)> done) {
  if ((kind == gateway::CallKind::kScore) != engine_->is_scorer()) {
    done(absl::InvalidArgumentError(engine_->is_scorer() ? "this model scores; it does not embed"
                                                         : "this model embeds; it does not score"));
    return;
  }
  scheduler::Chunk c;
  engine::RaggedBatch& b = c.batch;
  if (absl::Status decoded = worker::DecodeChunk(chunk, b); !decoded.ok()) {
    done(decoded);
    return;
  }
  if (absl::Status valid = engine_->Validate(b); !valid.ok()) {
    done(valid);
    return;
  }
  if (deadline != std::chrono::system_clock::time_point::max()) {
    c.deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     deadline - std::chrono::system_clock::now());
  }
  // Dropped before compute once cancelled (the client left, the deadline passed, a hedge won).
  if (cancel) c.is_cancelled = [cancel] { return cancel->cancelled(); };
  const int64_t tokens = b.num_tokens();
  const int64_t sequences = b.num_seqs();
  std::optional<telemetry::Span> span;
  if (tracer_ != nullptr && !chunk.traceparent().empty()) {
    span = telemetry::ChildSpan(chunk.traceparent(), kind == gateway::CallKind::kScore
                                                         ? "quiver.engine/Score"
                                                         : "quiver.engine/Embed");
    if (span) {
      span->kind = 1;  // INTERNAL
      span->start_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    }
  }
  outstanding_ += tokens;
  absl::Status admitted = scheduler_->Enqueue(std::move(c), [this, tokens, sequences, done,
                                                             span = std::move(span)](
                                                                absl::StatusOr<
                                                                    scheduler::ChunkResult>
                                                                    r) mutable {
    outstanding_ -= tokens;
    if (span) {
      span->end_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      span->error = !r.ok() && !absl::IsCancelled(r.status()) &&
                    !absl::IsDeadlineExceeded(r.status()) && !absl::IsResourceExhausted(r.status());
      span->attributes = {{"quiver.chunk.tokens", tokens}, {"quiver.chunk.sequences", sequences}};
      if (r.ok()) {
        span->attributes.push_back({"quiver.queue_wait_us", r->queue_wait_us});
        span->attributes.push_back({"quiver.compute_us", r->compute_us});
      }
      tracer_->Record(*std::move(span));
    }
    if (!r.ok()) {
      done(r.status());
      return;
    }
    gateway::ReplicaResult out;
    out.num_seqs = r->output.num_seqs;
    out.dimensions = r->output.dimensions;
    out.output_type = worker::EncodeOutputType(r->output.output_type);
    out.data.assign(r->output.data.begin(), r->output.data.end());
    out.queue_wait_us = r->queue_wait_us;
    out.compute_us = r->compute_us;
    done(std::move(out));
  });
  if (!admitted.ok()) {
    outstanding_ -= tokens;
    done(admitted);
  }
}

}  // namespace quiver::app
