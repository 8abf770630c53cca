// A `quiver worker` reached over gRPC. Calls are asynchronous (the callback client API); a
// background thread checks grpc.health.v1 every `health_interval` (each check given
// `health_timeout`) and a failed call marks the replica unhealthy at once, so the balancer stops
// sending to it until a check passes again. Destroying it cancels a check in flight: the last
// reference may go on any thread, a gRPC callback's among them, which must not wait for a worker
// that stopped answering.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "gateway/replica.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "quiver/v1/inference.grpc.pb.h"

namespace quiver::gateway {

class GrpcReplica final : public Replica {
 public:
  GrpcReplica(std::string address, std::chrono::milliseconds health_interval,
              MetricsRegistry* metrics,
              std::chrono::milliseconds health_timeout = std::chrono::milliseconds(500));
  ~GrpcReplica() override;

  const std::string& name() const override { return address_; }
  bool healthy() const override { return healthy_.load(); }
  int64_t outstanding_tokens() const override { return outstanding_.load(); }
  int64_t max_queued_tokens() const override { return max_queued_tokens_.load(); }
  void Call(CallKind kind, const quiver::v1::Chunk& chunk,
            std::chrono::system_clock::time_point deadline, std::shared_ptr<CancelSignal> cancel,
            std::function<void(absl::StatusOr<ReplicaResult>)> done) override;
  // One synchronous ModelInfo call (for the gateway's start-up).
  absl::StatusOr<quiver::v1::ModelInfoResponse> ModelInfo(std::chrono::milliseconds timeout);

 private:
  void HealthLoop();
  // Sets the state and its gauge; a change is logged, with `why` when it is to unhealthy.
  void SetHealthy(bool healthy, std::string_view why);
  // Names the health thread's call in flight (nullptr: none), which the destructor cancels;
  // false, naming none, once the destructor has begun.
  bool Track(grpc::ClientContext* ctx);
  // ModelInfo on `ctx` (which the health thread names to Track, so that it can be cancelled).
  absl::StatusOr<quiver::v1::ModelInfoResponse> ModelInfoOn(grpc::ClientContext& ctx,
                                                            std::chrono::milliseconds timeout);

  std::string address_;
  std::chrono::milliseconds health_interval_, health_timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<quiver::v1::Inference::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  std::atomic<bool> healthy_{false};
  std::atomic<int64_t> outstanding_{0};
  std::atomic<int64_t> max_queued_tokens_{0};  // from ModelInfo, asked once it is healthy
  Gauge* healthy_gauge_;
  Counter* chunks_;
  Counter* failures_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  grpc::ClientContext* health_call_ = nullptr;  // under mu_
  std::thread health_thread_;
};

// A set of GrpcReplica from a static list ("host:port,host:port") or a DNS name
// ("dns:NAME:PORT", re-resolved every `resolve_interval`, as a Kubernetes headless Service
// gives one address per pod).
class GrpcReplicaSet {
 public:
  GrpcReplicaSet(std::string spec, std::chrono::milliseconds health_interval,
                 std::chrono::milliseconds resolve_interval, MetricsRegistry* metrics);
  ~GrpcReplicaSet();
  std::vector<std::shared_ptr<Replica>> Snapshot() const;
  std::vector<std::shared_ptr<GrpcReplica>> All() const;
  // ModelInfo from the first replica that answers, asking them in turn (a second each) until
  // `within` has passed; UNAVAILABLE naming the set and the last error when none did. A worker
  // answers it before its warm-up (start-up reads the model's description from it).
  absl::StatusOr<quiver::v1::ModelInfoResponse> FirstModelInfo(std::chrono::seconds within) const;

 private:
  void Resolve();
  std::string spec_;
  std::chrono::milliseconds health_interval_, resolve_interval_;
  MetricsRegistry* metrics_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<GrpcReplica>> replicas_;
  bool resolve_failing_ = false;   // the last lookup failed (logged once, until one works)
  std::stop_source resolve_stop_;  // stops the wait for a lookup in flight (host_lookup.h)
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread resolver_;
};

}  // namespace quiver::gateway
