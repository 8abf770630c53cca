// Limits both ends of the gateway-worker wire agree on (gateway/grpc_replica.cc,
// worker/worker.cc).
#pragma once

namespace quiver {

// The largest gRPC message either side sends or accepts. The largest answer a worker gives is
// /embed_all's: at most 8 Mi f32 values a request whatever the model (gateway/api/service.h,
// kMaxTokenEmbeddingValues), 32 MiB; a chunk's token ids are far smaller. Twice that leaves room
// for the framing.
constexpr int kMaxGrpcMessageBytes = 64 << 20;

// How soon the gateway dials a worker it lost again: first after 200 ms, then backing off to at
// most one second, so that a worker back from a restart takes traffic within about a second
// (gRPC's own default waits up to two minutes).
constexpr int kReconnectInitialBackoffMs = 200;
constexpr int kReconnectMaxBackoffMs = 1000;

}  // namespace quiver
