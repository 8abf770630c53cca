#include "gateway/grpc_replica.h"

#include <algorithm>
#include <set>

#include "common/host_lookup.h"
#include "common/strings.h"
#include "common/thread_name.h"
#include "proto/grpc_limits.h"
#include "proto/grpc_status.h"
#include "spdlog/spdlog.h"

namespace quiver::gateway {

GrpcReplica::GrpcReplica(std::string address, std::chrono::milliseconds health_interval,
                         MetricsRegistry* metrics, std::chrono::milliseconds health_timeout)
    : address_(std::move(address)),
      health_interval_(health_interval),
      health_timeout_(health_timeout) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kReconnectInitialBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kReconnectMaxBackoffMs);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kConnectTimeoutMs);  // gRPC's connect timeout
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  stub_ = quiver::v1::Inference::NewStub(channel_);
  health_ = grpc::health::v1::Health::NewStub(channel_);
  const std::string labels = StrCat("replica=\"", address_, "\"");
  healthy_gauge_ = &metrics->GetGauge("quiver_gateway_replica_healthy",
                                      "1 if the replica passes health checks", labels);
  chunks_ = &metrics->GetCounter("quiver_gateway_replica_chunks_total",
                                 "Chunks sent to each replica", labels);
  failures_ = &metrics->GetCounter("quiver_gateway_replica_failures_total",
                                   "Chunks a replica failed (retried elsewhere)", labels);
  health_thread_ = std::thread([this] {
    SetThreadName("quiver-health");
    HealthLoop();
  });
}

GrpcReplica::~GrpcReplica() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (health_call_ != nullptr) health_call_->TryCancel();
  }
  cv_.notify_all();
  health_thread_.join();
}

bool GrpcReplica::Track(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  health_call_ = stop_ ? nullptr : ctx;
  return !stop_;
}

void GrpcReplica::SetHealthy(bool healthy, std::string_view why) {
  healthy_gauge_->Set(healthy ? 1 : 0);
  if (healthy_.exchange(healthy) == healthy) return;  // a change is logged once
  if (healthy) {
    spdlog::info("worker {}: healthy", address_);
  } else {
    spdlog::warn("worker {}: unhealthy ({}); no chunks until a health check passes", address_, why);
  }
}

void GrpcReplica::HealthLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + health_timeout_);
      if (!Track(&ctx)) break;
      grpc::health::v1::HealthCheckResponse resp;
      const grpc::Status s = health_->Check(&ctx, {}, &resp);
      if (!Track(nullptr)) break;  // cancelled by the destructor: nothing to say
      SetHealthy(
          s.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING,
          s.ok() ? StrCat("its health check says ",
                          grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status()))
                 : StrCat("health check: ", s.error_message()));
    }
    if (healthy_.load() && max_queued_tokens_.load() == 0) {
      // The worker's queue size, once (a restarted worker on the same address keeps its flags
      // in any sane deployment; a wrong guess only changes whether a huge request gets 413 or 429).
      grpc::ClientContext ctx;
      if (!Track(&ctx)) break;
      auto info = ModelInfoOn(ctx, health_timeout_);
      Track(nullptr);
      if (info.ok()) max_queued_tokens_ = info->max_queued_tokens();
    }
    lock.lock();
    cv_.wait_for(lock, health_interval_, [&] { return stop_; });
  }
}

void GrpcReplica::Call(CallKind kind, const quiver::v1::Chunk& chunk,
                       std::chrono::system_clock::time_point deadline,
                       std::shared_ptr<CancelSignal> cancel,
                       std::function<void(absl::StatusOr<ReplicaResult>)> done) {
  struct CallState {
    grpc::ClientContext ctx;
    quiver::v1::EmbedRequest embed_req;
    quiver::v1::EmbedResponse embed_resp;
    quiver::v1::ScoreRequest score_req;
    quiver::v1::ScoreResponse score_resp;
  };
  auto state = std::make_shared<CallState>();
  state->ctx.set_deadline(deadline);
  const int64_t tokens = chunk.token_ids_size();
  outstanding_ += tokens;
  chunks_->Inc();
  auto finish = [this, state, tokens, kind, done = std::move(done)](const grpc::Status& s) {
    outstanding_ -= tokens;
    if (!s.ok()) {
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
        SetHealthy(false, StrCat("a call failed: ", s.error_message()));
        failures_->Inc();
      }
      done(FromGrpcStatus(s));
      return;
    }
    ReplicaResult r;
    if (kind == CallKind::kEmbed) {
      r.num_seqs = state->embed_resp.num_seqs();
      r.dimensions = state->embed_resp.dimensions();
      r.output_type = state->embed_resp.output_type();
      r.data = std::move(*state->embed_resp.mutable_data());
      r.queue_wait_us = static_cast<int64_t>(state->embed_resp.queue_wait_us());
      r.compute_us = static_cast<int64_t>(state->embed_resp.compute_us());
    } else {
      r.num_seqs = state->score_resp.num_seqs();
      r.dimensions = r.num_seqs > 0
                         ? static_cast<int64_t>(state->score_resp.scores().size() / 4 / r.num_seqs)
                         : 1;
      r.data = std::move(*state->score_resp.mutable_scores());
      r.queue_wait_us = static_cast<int64_t>(state->score_resp.queue_wait_us());
      r.compute_us = static_cast<int64_t>(state->score_resp.compute_us());
    }
    done(std::move(r));
  };
  // A cancelled call ends at once with CANCELLED; the worker sees its context cancelled and drops
  // the chunk if it is still queued. The state lives until the call ends, so a late Cancel is safe.
  if (cancel) cancel->OnCancel([state] { state->ctx.TryCancel(); });
  if (kind == CallKind::kEmbed) {
    *state->embed_req.mutable_chunk() = chunk;
    stub_->async()->Embed(&state->ctx, &state->embed_req, &state->embed_resp, std::move(finish));
  } else {
    *state->score_req.mutable_chunk() = chunk;
    stub_->async()->Score(&state->ctx, &state->score_req, &state->score_resp, std::move(finish));
  }
}

absl::StatusOr<quiver::v1::ModelInfoResponse> GrpcReplica::ModelInfo(
    std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  return ModelInfoOn(ctx, timeout);
}

absl::StatusOr<quiver::v1::ModelInfoResponse> GrpcReplica::ModelInfoOn(
    grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  ctx.set_wait_for_ready(true);
  quiver::v1::ModelInfoResponse resp;
  grpc::Status s = stub_->ModelInfo(&ctx, {}, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

GrpcReplicaSet::GrpcReplicaSet(std::string spec, std::chrono::milliseconds health_interval,
                               std::chrono::milliseconds resolve_interval, MetricsRegistry* metrics)
    : spec_(std::move(spec)),
      health_interval_(health_interval),
      resolve_interval_(resolve_interval),
      metrics_(metrics) {
  Resolve();
  if (spec_.starts_with("dns:")) {
    resolver_ = std::thread([this] {
      SetThreadName("quiver-resolver");
      std::unique_lock<std::mutex> lock(mu_);
      while (!stop_) {
        cv_.wait_for(lock, resolve_interval_, [&] { return stop_; });
        if (stop_) break;
        lock.unlock();
        Resolve();
        lock.lock();
      }
    });
  }
}

GrpcReplicaSet::~GrpcReplicaSet() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  resolve_stop_.request_stop();  // a lookup in flight is left to its own thread
  cv_.notify_all();
  if (resolver_.joinable()) resolver_.join();
}

void GrpcReplicaSet::Resolve() {
  std::set<std::string> wanted;
  if (spec_.starts_with("dns:")) {
    // dns:NAME:PORT -> every address NAME resolves to.
    const std::string rest = spec_.substr(4);
    const size_t colon = rest.rfind(':');
    const std::string host = rest.substr(0, colon), port = rest.substr(colon + 1);
    // Waited for at most a resolve interval (and 1 s at least), and not past the destructor.
    const HostLookup found =
        LookupHostWithin(host, port, std::max(resolve_interval_, std::chrono::milliseconds(1000)),
                         resolve_stop_.get_token());
    if (resolve_stop_.stop_requested()) return;  // the set is going away: nothing to say
    if (found.outcome == HostLookup::Outcome::kFailed) {
      // A lookup that failed (the DNS server unreachable, a timeout) keeps the workers we have:
      // their health checks say whether they are still there, and dropping them all would fail
      // every request until the next answer.
      std::lock_guard<std::mutex> lock(mu_);
      if (!resolve_failing_) {
        spdlog::warn(
            "quiver gateway: resolving {} failed ({}); keeping the {} workers found "
            "before",
            host, found.error, replicas_.size());
      }
      resolve_failing_ = true;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (resolve_failing_) spdlog::info("quiver gateway: resolving {} works again", host);
      resolve_failing_ = false;
    }
    // The name answered with no address (NXDOMAIN or no records: a headless Service with no
    // ready pods): no workers. Their addresses may be reused by other pods.
    for (const std::string& address : found.addresses) {
      wanted.insert(address.find(':') == std::string::npos ? StrCat(address, ":", port)
                                                           : StrCat("[", address, "]:", port));
    }
  } else {
    size_t start = 0;
    while (start <= spec_.size()) {
      size_t comma = spec_.find(',', start);
      if (comma == std::string::npos) comma = spec_.size();
      if (comma > start) wanted.insert(spec_.substr(start, comma - start));
      start = comma + 1;
    }
  }
  // Declared before the lock, `next` ends holding the workers no longer named and frees them
  // after the lock is released: no request's Snapshot waits for their health checks to stop.
  std::vector<std::shared_ptr<GrpcReplica>> next;
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& address : wanted) {
    auto it = std::find_if(replicas_.begin(), replicas_.end(),
                           [&](const auto& r) { return r->name() == address; });
    next.push_back(it != replicas_.end()
                       ? *it
                       : std::make_shared<GrpcReplica>(address, health_interval_, metrics_));
  }
  replicas_.swap(next);
}

std::vector<std::shared_ptr<Replica>> GrpcReplicaSet::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {replicas_.begin(), replicas_.end()};
}

std::vector<std::shared_ptr<GrpcReplica>> GrpcReplicaSet::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replicas_;
}

absl::StatusOr<quiver::v1::ModelInfoResponse> GrpcReplicaSet::FirstModelInfo(
    std::chrono::seconds within) const {
  absl::StatusOr<quiver::v1::ModelInfoResponse> info = absl::UnavailableError("no worker");
  const auto give_up = std::chrono::steady_clock::now() + within;
  while (!info.ok() && std::chrono::steady_clock::now() < give_up) {
    for (const auto& r : All()) {
      info = r->ModelInfo(std::chrono::milliseconds(1000));
      if (info.ok()) break;
    }
    if (!info.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!info.ok()) {
    return absl::UnavailableError(StrCat("no worker in '", spec_, "' answered ModelInfo within ",
                                         within.count(), " s: ", info.status().message()));
  }
  return info;
}

}  // namespace quiver::gateway
