// A replica: somewhere a chunk of pre-tokenized sequences can be computed. LocalReplica (in-process
// scheduler and engine, app/local_replica.cc) and GrpcReplica (a `quiver worker`) implement it,
// so splitting, balancing and retry are the same code for `quiver serve` and `quiver gateway`.
//
// Implementations are thread-safe; `done` may run on any thread and must not block.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "quiver/v1/inference.pb.h"

namespace quiver::gateway {

struct ReplicaResult {
  int64_t num_seqs = 0;
  int64_t dimensions = 0;   // values per sequence (1 for scores)
  quiver::v1::OutputType output_type = quiver::v1::OUTPUT_F32;
  std::string data;         // packed little-endian rows
  int64_t queue_wait_us = 0;
  int64_t compute_us = 0;
};

enum class CallKind { kEmbed, kScore };

class Replica {
 public:
  virtual ~Replica() = default;
  virtual const std::string& name() const = 0;
  virtual bool healthy() const = 0;
  // Tokens sent and not yet answered; the balancer sends a chunk to the replica with the fewest.
  virtual int64_t outstanding_tokens() const = 0;
  virtual void Call(CallKind kind, const quiver::v1::Chunk& chunk,
                    std::chrono::system_clock::time_point deadline,
                    std::function<void(absl::StatusOr<ReplicaResult>)> done) = 0;
};

}  // namespace quiver::gateway
