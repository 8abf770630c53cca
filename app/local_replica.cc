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
  c.deadline = scheduler::SteadyDeadline(deadline);
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
      span->start_unix_ns = telemetry::UnixNanos();
    }
  }
  outstanding_ += tokens;
  // The span, where the chunk is traced: ended and queued once the chunk is answered or refused.
  auto record = [this, tokens, sequences](telemetry::Span span, const absl::Status& status,
                                          const scheduler::ChunkResult* result) {
    span.end_unix_ns = telemetry::UnixNanos();
    span.error = !status.ok() && !absl::IsCancelled(status) && !absl::IsDeadlineExceeded(status) &&
                 !absl::IsResourceExhausted(status);
    span.attributes = {{"quiver.chunk.tokens", tokens}, {"quiver.chunk.sequences", sequences}};
    if (result != nullptr) {
      span.attributes.emplace_back("quiver.queue_wait_us", result->queue_wait_us);
      span.attributes.emplace_back("quiver.compute_us", result->compute_us);
    }
    tracer_->Record(std::move(span));
  };
  absl::Status admitted = scheduler_->Enqueue(
      std::move(c), [this, tokens, done, span, record](absl::StatusOr<scheduler::ChunkResult> r) {
        outstanding_ -= tokens;
        if (span) record(*span, r.status(), r.ok() ? &*r : nullptr);
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
  if (!admitted.ok()) {  // refused (overload, drain): the callback never runs
    outstanding_ -= tokens;
    if (span) record(*std::move(span), admitted, nullptr);
    done(admitted);
  }
}

}  // namespace quiver::app
