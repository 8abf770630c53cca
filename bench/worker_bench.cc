// Throughput through `quiver worker` against the engine called directly, at the same batch
// shapes, in one run:
//
//   quiver_worker_bench --quiver build/quiver --model models/all-MiniLM-L6-v2
//                       [--clients 8] [--seqs 16] [--tokens 128] [--seconds 15] [--threads 2]
//
// Each chunk is `seqs` sequences of `tokens` tokens and the worker's max_batch_tokens equals a
// chunk, so every batch the worker runs has exactly the shape the direct run uses. Phase 1: the
// engine in this process, batches submitted two ahead (as the scheduler does). Phase 2: a worker
// process on loopback and `clients` client threads sending chunks for `seconds`. Prints JSON.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "quiver/v1/inference.grpc.pb.h"

extern char** environ;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string quiver = "build/quiver", model = "models/all-MiniLM-L6-v2";
  int clients = 8, seqs = 16, tokens = 128, threads = 2;
  double seconds = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string f = argv[i], v = argv[i + 1];
    if (f == "--quiver") quiver = v;
    if (f == "--model") model = v;
    if (f == "--clients") clients = std::stoi(v);
    if (f == "--seqs") seqs = std::stoi(v);
    if (f == "--tokens") tokens = std::stoi(v);
    if (f == "--seconds") seconds = std::stod(v);
    if (f == "--threads") threads = std::stoi(v);
  }
  // One fixed set of chunks (real-looking ids: [CLS] ... [SEP]).
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> sequences;
  for (int s = 0; s < 64; ++s) {
    std::vector<int32_t> ids = {101};
    for (int t = 0; t < tokens - 2; ++t)
      ids.push_back(std::uniform_int_distribution<int>(1000, 29000)(rng));
    ids.push_back(102);
    sequences.push_back(ids);
  }
  auto make_batch = [&](int k) {
    quiver::engine::RaggedBatch b;
    for (int s = 0; s < seqs; ++s) b.Add(sequences[(k * seqs + s) % sequences.size()]);
    return b;
  };
  const int64_t chunk_tokens = int64_t(seqs) * tokens;

  // Phase 1: the engine directly, two batches in flight.
  double direct_tps = 0;
  {
    quiver::engine::EngineOptions o;
    o.num_threads = threads;
    auto engine = quiver::engine::Engine::Load(model, o);
    if (!engine.ok()) {
      std::fprintf(stderr, "%s\n", std::string(engine.status().message()).c_str());
      return 1;
    }
    for (int w = 0; w < 2; ++w) (void)(*engine)->Run(make_batch(w));  // warm-up
    std::deque<quiver::engine::LazyResult> in_flight;
    int64_t done_tokens = 0;
    int k = 0;
    const auto start = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
      while (in_flight.size() < 2) in_flight.push_back((*engine)->Submit(make_batch(k++)));
      in_flight.front().Wait();
      in_flight.pop_front();
      done_tokens += chunk_tokens;
    }
    for (auto& r : in_flight) {
      r.Wait();
      done_tokens += chunk_tokens;
    }
    direct_tps = done_tokens / std::chrono::duration<double>(Clock::now() - start).count();
  }

  // Phase 2: a worker process and concurrent clients.
  const std::string log = "/tmp/quiver-worker-bench-" + std::to_string(getpid()) + ".log";
  std::vector<std::string> args = {quiver,
                                   "worker",
                                   "--model",
                                   model,
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--metrics-port",
                                   "-1",
                                   "--threads",
                                   std::to_string(threads),
                                   "--max-batch-tokens",
                                   std::to_string(chunk_tokens),
                                   "--max-queued-tokens",
                                   std::to_string(chunk_tokens * clients * 2)};
  std::vector<char*> argv_w;
  for (auto& a : args) argv_w.push_back(a.data());
  argv_w.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  if (posix_spawn(&pid, argv_w[0], &actions, nullptr, argv_w.data(), environ) != 0) return 1;
  int port = 0;
  for (int i = 0; i < 600 && port == 0; ++i) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(text, m, std::regex("port=([0-9]+) metrics_port")))
      port = std::stoi(m[1]);
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (port == 0) return 1;
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto request_for = [&](int k) {
    quiver::v1::EmbedRequest req;
    auto* c = req.mutable_chunk();
    c->add_cu_seqlens(0);
    const auto b = make_batch(k);
    for (int32_t id : b.token_ids) c->add_token_ids(static_cast<uint32_t>(id));
    for (size_t s = 1; s < b.cu_seqlens.size(); ++s) c->add_cu_seqlens(b.cu_seqlens[s]);
    return req;
  };
  {  // warm-up
    auto stub = quiver::v1::Inference::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    for (int w = 0; w < 2; ++w) {
      grpc::ClientContext ctx;
      quiver::v1::EmbedResponse resp;
      stub->Embed(&ctx, request_for(w), &resp);
    }
  }
  std::atomic<int64_t> worker_tokens{0}, errors{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  const auto start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    pool.emplace_back([&, c] {
      auto stub = quiver::v1::Inference::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
      const auto req = request_for(c);
      while (!stop) {
        grpc::ClientContext ctx;
        quiver::v1::EmbedResponse resp;
        if (stub->Embed(&ctx, req, &resp).ok()) {
          worker_tokens += chunk_tokens;
        } else {
          ++errors;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : pool) t.join();
  const double worker_tps =
      worker_tokens / std::chrono::duration<double>(Clock::now() - start).count();
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::remove(log.c_str());
  std::printf(
      "{\"model\": \"%s\", \"clients\": %d, \"seqs_per_chunk\": %d, \"tokens_per_seq\": %d, "
      "\"threads\": %d, \"seconds\": %.1f, \"direct_tokens_per_s\": %.1f, "
      "\"worker_tokens_per_s\": %.1f, \"ratio\": %.4f, \"errors\": %lld}\n",
      model.c_str(), clients, seqs, tokens, threads, seconds, direct_tps, worker_tps,
      worker_tps / direct_tps, static_cast<long long>(errors.load()));
  return errors.load() == 0 ? 0 : 1;
}
