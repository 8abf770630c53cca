// A real `quiver worker` process on loopback serving the default model: concurrent ragged
// chunks come back byte for byte equal to the engine's direct result, nothing lost or
// duplicated; overload is refused with RESOURCE_EXHAUSTED and succeeds on retry; SIGTERM under
// load finishes every admitted request, refuses new ones and exits 0.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "engine/engine.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "quiver/v1/inference.grpc.pb.h"

extern char** environ;

namespace quiver {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = QUIVER_SOURCE_DIR;
const std::string kModel = (kSource / "models" / "all-MiniLM-L6-v2").string();

class WorkerProcess {
 public:
  explicit WorkerProcess(std::vector<std::string> extra, std::string model = kModel) {
    log_ = fs::temp_directory_path() / ("quiver-worker-" + std::to_string(getpid()) + "-" +
                                        std::to_string(counter_++) + ".log");
    std::vector<std::string> args = {QUIVER_BINARY, "worker",      "--model",   model,
                                     "--listen",    "127.0.0.1:0", "--threads", "2"};
    if (std::find(extra.begin(), extra.end(), "--metrics-port") == extra.end()) {
      args.insert(args.end(), {"--metrics-port", "-1"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    const std::regex port_re("port=([0-9]+) metrics_port=(-?[0-9]+)");
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::ifstream in(log_);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::smatch m;
      if (std::regex_search(text, m, port_re)) {
        port_ = std::stoi(m[1]);
        metrics_port_ = std::stoi(m[2]);
      }
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_NE(port_, 0) << "worker did not start; log at " << log_;
    // The port is logged before the warm-up; the worker says SERVING after it (a loaded machine
    // may take a while: the tests start once it does, as a gateway would).
    auto health = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
    bool serving = false;
    for (int i = 0; i < 600 && port_ != 0 && !serving; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      grpc::health::v1::HealthCheckResponse resp;
      serving = health->Check(&ctx, {}, &resp).ok() &&
                resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
      if (!serving) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(serving) << "worker did not say SERVING; log at " << log_;
  }
  ~WorkerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    fs::remove(log_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int metrics_port() const { return metrics_port_; }
  // Sends SIGTERM and returns the exit status.
  int Terminate() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  pid_t pid() const { return pid_; }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = -1;
  fs::path log_;
};

struct TestChunk {
  std::vector<std::vector<int32_t>> seqs;
  engine::OutputOptions output;
  quiver::v1::OutputType wire_type = quiver::v1::OUTPUT_F32;
};

TestChunk RandomChunk(std::mt19937& rng) {
  TestChunk c;
  const int seqs = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int s = 0; s < seqs; ++s) {
    const int len = std::uniform_int_distribution<int>(1, 40)(rng);
    std::vector<int32_t> ids = {101};
    for (int t = 0; t < len; ++t)
      ids.push_back(std::uniform_int_distribution<int32_t>(1000, 29000)(rng));
    ids.push_back(102);
    c.seqs.push_back(ids);
  }
  switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
    case 0:
      c.output.dimensions = 128;
      break;
    case 1:
      c.output.output_type = engine::OutputType::kInt8;
      c.wire_type = quiver::v1::OUTPUT_INT8;
      break;
    case 2:
      c.output.output_type = engine::OutputType::kBinary;
      c.wire_type = quiver::v1::OUTPUT_BINARY;
      break;
    default:
      break;
  }
  return c;
}

quiver::v1::EmbedRequest ToRequest(const TestChunk& c) {
  quiver::v1::EmbedRequest req;
  auto* chunk = req.mutable_chunk();
  chunk->add_cu_seqlens(0);
  for (const auto& s : c.seqs) {
    for (int32_t id : s) chunk->add_token_ids(static_cast<uint32_t>(id));
    chunk->add_cu_seqlens(static_cast<uint32_t>(chunk->token_ids_size()));
  }
  chunk->mutable_output()->set_dimensions(static_cast<uint32_t>(c.output.dimensions));
  chunk->mutable_output()->set_output_type(c.wire_type);
  return req;
}

std::string Direct(engine::Engine& e, const TestChunk& c) {
  engine::RaggedBatch b;
  for (const auto& s : c.seqs) b.Add(s);
  b.output = c.output;
  auto out = e.Run(b);
  EXPECT_TRUE(out.ok()) << out.status();
  return std::string(out->data.begin(), out->data.end());
}

std::unique_ptr<quiver::v1::Inference::Stub> Connect(const std::string& address) {
  return quiver::v1::Inference::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

TEST(WorkerIntegrationTest, ConcurrentRaggedChunksEqualTheEngineByteForByte) {
  WorkerProcess worker({"--max-batch-tokens", "2048"});
  auto engine = engine::Engine::Load(kModel, {});
  ASSERT_TRUE(engine.ok());
  // Health and model info first.
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(worker.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext hctx;
  grpc::health::v1::HealthCheckResponse hresp;
  ASSERT_TRUE(health->Check(&hctx, {}, &hresp).ok());
  EXPECT_EQ(hresp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  {
    grpc::ClientContext ctx;
    quiver::v1::ModelInfoResponse info;
    ASSERT_TRUE(Connect(worker.address())->ModelInfo(&ctx, {}, &info).ok());
    EXPECT_EQ(info.hidden_size(), 384u);
    EXPECT_EQ(info.max_input_tokens(), 512u);  // the position table
    EXPECT_EQ(info.max_seq_length(), 256u);    // sentence-transformers' max_seq_length
    EXPECT_TRUE(info.can_embed());
  }
  constexpr int kThreads = 32, kPerThread = 8;
  std::vector<std::vector<std::pair<TestChunk, std::string>>> got(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      auto stub = Connect(worker.address());
      for (int i = 0; i < kPerThread; ++i) {
        TestChunk c = RandomChunk(rng);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        quiver::v1::EmbedResponse resp;
        grpc::Status s = stub->Embed(&ctx, ToRequest(c), &resp);
        if (!s.ok()) {
          ++failures;
          continue;
        }
        EXPECT_EQ(resp.num_seqs(), c.seqs.size());
        got[t].emplace_back(std::move(c), resp.data());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  int checked = 0;
  for (const auto& per_thread : got) {
    for (const auto& [chunk, bytes] : per_thread) {
      EXPECT_EQ(bytes, Direct(**engine, chunk)) << "chunk " << checked;
      ++checked;
    }
  }
  EXPECT_EQ(checked, kThreads * kPerThread);
}

TEST(WorkerIntegrationTest, BadChunksAreRefusedWithTheirReason) {
  WorkerProcess worker({});
  auto stub = Connect(worker.address());
  auto call = [&](quiver::v1::EmbedRequest req) {
    grpc::ClientContext ctx;
    quiver::v1::EmbedResponse resp;
    return stub->Embed(&ctx, req, &resp);
  };
  quiver::v1::EmbedRequest too_long;
  too_long.mutable_chunk()->add_cu_seqlens(0);
  for (int i = 0; i < 600; ++i) too_long.mutable_chunk()->add_token_ids(1000);
  too_long.mutable_chunk()->add_cu_seqlens(600);
  grpc::Status s = call(too_long);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("at most"), std::string::npos) << s.error_message();
  quiver::v1::EmbedRequest bad_seqlens;
  bad_seqlens.mutable_chunk()->add_token_ids(1000);
  EXPECT_EQ(call(bad_seqlens).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  quiver::v1::EmbedRequest wrong_model = too_long;
  wrong_model.set_model("no-such-model");
  EXPECT_EQ(call(wrong_model).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext ctx;
  quiver::v1::ScoreResponse score;
  EXPECT_EQ(stub->Score(&ctx, {}, &score).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(WorkerIntegrationTest, ScoreServesACrossEncoderLikeTheEngine) {
  const std::string dir = (kSource / "tests" / "fixtures" / "tiny" / "bert_cross_encoder").string();
  WorkerProcess worker({}, dir);
  auto engine = engine::Engine::Load(dir, {});
  ASSERT_TRUE(engine.ok());
  std::ifstream in(kSource / "tests" / "fixtures" / "tiny" / "bert_cross_encoder" /
                   "reference.jsonl");
  std::string line;
  quiver::v1::ScoreRequest req;
  engine::RaggedBatch direct;
  auto* chunk = req.mutable_chunk();
  chunk->add_cu_seqlens(0);
  while (std::getline(in, line)) {
    const JsonValue row = *JsonValue::Parse(line);
    std::vector<int32_t> ids, types;
    for (const JsonValue& v : row.Find("ids")->items())
      ids.push_back(static_cast<int32_t>(v.as_int()));
    for (const JsonValue& v : row.Find("type_ids")->items()) {
      types.push_back(static_cast<int32_t>(v.as_int()));
    }
    direct.Add(ids, &types);
    for (size_t i = 0; i < ids.size(); ++i) {
      chunk->add_token_ids(static_cast<uint32_t>(ids[i]));
      chunk->add_token_type_ids(static_cast<uint32_t>(types[i]));
    }
    chunk->add_cu_seqlens(static_cast<uint32_t>(chunk->token_ids_size()));
  }
  grpc::ClientContext ctx;
  quiver::v1::ScoreResponse resp;
  ASSERT_TRUE(Connect(worker.address())->Score(&ctx, req, &resp).ok());
  auto want = (*engine)->Run(direct);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(resp.num_seqs(), static_cast<uint32_t>(direct.num_seqs()));
  EXPECT_EQ(resp.scores(), std::string(want->data.begin(), want->data.end()));
  grpc::ClientContext ctx2;
  quiver::v1::EmbedResponse embed;
  EXPECT_EQ(Connect(worker.address())->Embed(&ctx2, {}, &embed).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // a scoring model does not embed
}

TEST(WorkerIntegrationTest, MetricsEndpointServesPrometheusText) {
  WorkerProcess worker({"--metrics-port", "0", "--metrics-host", "127.0.0.1"});
  ASSERT_GT(worker.metrics_port(), 0);
  TestChunk c;
  c.seqs = {{101, 2000, 2001, 102}};
  grpc::ClientContext ctx;
  quiver::v1::EmbedResponse resp;
  ASSERT_TRUE(Connect(worker.address())->Embed(&ctx, ToRequest(c), &resp).ok());
  const std::string cmd =
      "python3 -c \"import urllib.request,sys; sys.stdout.write(urllib.request."
      "urlopen('http://127.0.0.1:" +
      std::to_string(worker.metrics_port()) + "/metrics').read().decode())\"";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) text.append(buf, n);
  pclose(pipe);
  // The Kubernetes probes: /health while it runs, /ready once the model is loaded (it is: the
  // worker answered), 404 for anything else.
  const std::string probe =
      "python3 -c \"import urllib.request,urllib.error\n"
      "for p in ('/health','/ready','/readyz'):\n"
      " try: print(p, urllib.request.urlopen('http://127.0.0.1:" +
      std::to_string(worker.metrics_port()) +
      "'+p).status)\n"
      " except urllib.error.HTTPError as e: print(p, e.code)\"";
  FILE* probes = popen(probe.c_str(), "r");
  ASSERT_NE(probes, nullptr);
  std::string answers;
  while (size_t n = fread(buf, 1, sizeof(buf), probes)) answers.append(buf, n);
  pclose(probes);
  EXPECT_EQ(answers, "/health 200\n/ready 200\n/readyz 404\n");
  for (const char* name :
       {"quiver_scheduler_batch_tokens_bucket", "quiver_scheduler_queue_wait_seconds",
        "quiver_scheduler_compute_seconds", "quiver_scheduler_admitted_tokens",
        "quiver_scheduler_rejected_total", "quiver_worker_requests_total{outcome=\"ok\"} 1"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
}

TEST(WorkerIntegrationTest, OverloadIsRefusedAtOnceAndSucceedsOnRetry) {
  WorkerProcess worker({"--max-batch-tokens", "300", "--max-queued-tokens", "400"});
  auto engine = engine::Engine::Load(kModel, {});
  ASSERT_TRUE(engine.ok());
  std::atomic<int> exhausted{0}, other_errors{0};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::pair<TestChunk, std::string>> results;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      TestChunk c;
      std::vector<int32_t> ids = {101};
      for (int i = 0; i < 150; ++i) ids.push_back(2000 + t * 10 + i);
      ids.push_back(102);
      c.seqs = {ids};
      auto stub = Connect(worker.address());
      for (int attempt = 0; attempt < 2000; ++attempt) {
        grpc::ClientContext ctx;
        quiver::v1::EmbedResponse resp;
        grpc::Status s = stub->Embed(&ctx, ToRequest(c), &resp);
        if (s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          results.emplace_back(c, resp.data());
          return;
        }
        if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          ++exhausted;
          EXPECT_NE(s.error_message().find("max_queued_tokens"), std::string::npos);
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        } else {
          ++other_errors;
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(exhausted.load(), 0);  // 16 x 152 tokens against a 400-token queue
  EXPECT_EQ(other_errors.load(), 0);
  ASSERT_EQ(results.size(), 16u);
  for (const auto& [c, bytes] : results) EXPECT_EQ(bytes, Direct(**engine, c));
}

TEST(WorkerIntegrationTest, SigtermDrainsAdmittedWorkAndExitsZero) {
  WorkerProcess worker({"--max-batch-tokens", "1024"});
  auto engine = engine::Engine::Load(kModel, {});
  ASSERT_TRUE(engine.ok());
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, refused{0}, wrong{0}, other{0};
  std::mutex mu;
  std::vector<std::pair<TestChunk, std::string>> results;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(77 + t);
      auto stub = Connect(worker.address());
      while (!stop) {
        TestChunk c = RandomChunk(rng);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        quiver::v1::EmbedResponse resp;
        grpc::Status s = stub->Embed(&ctx, ToRequest(c), &resp);
        if (s.ok()) {
          ++ok;
          std::lock_guard<std::mutex> lock(mu);
          results.emplace_back(std::move(c), resp.data());
        } else if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
          ++refused;  // never admitted; a gateway would now send elsewhere, as this client does
          return;
        } else {
          ++other;
          ADD_FAILURE() << s.error_code() << ": " << s.error_message() << " (" << s.error_details()
                        << ")";
        }
      }
    });
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (ok.load() < 30 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(ok.load(), 30) << "the worker answered too few requests before the signal";
  const int exit_code = worker.Terminate();  // waits for the process
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(refused.load(), 0);  // new requests after the signal were refused
  for (const auto& [c, bytes] : results) {
    if (bytes != Direct(**engine, c)) ++wrong;
  }
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace quiver
