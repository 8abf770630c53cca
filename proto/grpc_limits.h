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
// How long the gateway gives one attempt to connect (gRPC's default, 20 s, would hold a worker out
// that long after a partition: the attempt under way when the link comes back had its SYNs
// dropped).
constexpr int kConnectTimeoutMs = 2000;

// The gateway pings each worker's connection every kKeepaliveTimeMs and closes it when a ping is
// unanswered for kKeepaliveTimeoutMs: a connection whose peer vanished without a reset (a link
// down, a partition) is dialed afresh, so that the worker is back about a second after its
// network is. A connection kept through a partition resumes only at TCP's next retransmission,
// which backs off to minutes (measured: 14.5 s after a 40 s cut; docs/benchmarks.md). The timeout
// is generous: a worker answers a ping from its transport threads, however busy its cores, and a
// false alarm costs the chunks in flight on that connection a retry elsewhere, never an answer.
constexpr int kKeepaliveTimeMs = 2000;
constexpr int kKeepaliveTimeoutMs = 5000;
// The workers accept pings that often, calls in flight or not (gRPC's server default closes a
// connection pinged more often than every 5 minutes without data).
constexpr int kMinPingIntervalMs = 1000;

}  // namespace quiver
