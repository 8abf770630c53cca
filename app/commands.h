// Subcommands of the quiver binary. Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/models/model.h"
#include "gateway/api/api.h"
#include "gateway/api/requests.h"
#include "gateway/http_server.h"
#include "scheduler/limits.h"

namespace quiver::app {

// Requests serve and gateway handle at once (--handler-threads): the batcher needs many in
// flight to make batches.
constexpr int kDefaultHandlerThreads = 64;

// The HTTP server's flags shared by serve and gateway: read timeouts in seconds (--header-timeout,
// --body-timeout, --idle-timeout), connection and body limits, the drain.
struct HttpTimeouts {
  int header_s = gateway::kDefaultHeaderTimeoutS;
  int body_s = gateway::kDefaultBodyTimeoutS;
  int idle_s = gateway::kDefaultIdleTimeoutS;
  int max_connections = gateway::kDefaultMaxConnections;  // --max-connections
  size_t max_body_bytes_in_flight = 32 << 20;             // --max-body-bytes-in-flight
  int drain_s = 30;  // --drain-timeout: how long a stopping server lets requests finish
};

struct ServeOptions {
  std::string model_dir = "models/all-MiniLM-L6-v2";
  std::string model_name;  // "" = the folder's name
  std::string host = "0.0.0.0";
  int port = 8080;
  int threads = 0;
  int handler_threads = kDefaultHandlerThreads;
  size_t max_body_bytes = gateway::kDefaultMaxBodyBytes;
  int64_t max_input_tokens = 0;  // 0: sentence-transformers' max_seq_length, else the positions
  scheduler::SchedulerLimits limits;
  gateway::api::ApiLimits api;
  bool access_log = false;                                  // one log line per request
  std::vector<std::string> cors_allow_origins;              // --cors-allow-origin; empty: no CORS
  std::string default_prompt_name, default_prompt;          // over the folder's default prompt
  std::string otlp_endpoint, otlp_service_name = "quiver";  // request spans (gateway/tracing.h)
  engine::DeviceSettings device;
  HttpTimeouts timeouts;
};

struct TokenizeOptions {
  std::string tokenizer_path;
  bool pairs = false;
  int max_length = 0;  // 0: no truncation
  std::string truncation_side = "right";
};

struct EmbedOptions {
  std::string model_dir = "models/all-MiniLM-L6-v2";
  std::vector<std::string> texts;
  std::string input_path;
  std::string input_format = "auto";  // jsonl, text, auto (by the file's extension)
  // empty: stdout; *.npy: a NumPy matrix (+ NAME.ids.jsonl); else JSON lines. "{shard}" becomes
  // the shard's index.
  std::string output_path;
  std::string shard;     // "I/N"
  int64_t shards = 0;    // N, the index from JOB_COMPLETION_INDEX
  std::string workers;   // empty: the local engine; else host:port,... or dns:NAME:PORT
  bool restart = false;  // ignore a checkpoint and start over
  std::string progress = "auto";
  int progress_interval_s = 10;
  int request_timeout_s = 600;  // per batch, retries within it included
  int retries = 5;              // a batch the pool could not answer is tried again this often
  double checkpoint_interval_s = 1.0;  // the least time between two checkpoints (0: every batch)
  int startup_timeout_s = 60;  // --workers: how long to wait for one to answer and be healthy
  // The prompt before every text: one of the folder's sentence-transformers prompts by name, or
  // a text; neither: the folder's default_prompt_name's, as sentence-transformers' encode.
  std::string prompt_name, prompt;
  int64_t dimensions = 0;
  bool normalize = false;  // force L2 normalization (default: what the model's modules say)
  std::string dtype = "f32";
  int64_t max_batch_tokens = 8192;
  int threads = 0;
  std::string attention_backend;
  engine::DeviceSettings device;
};

struct GatewayOptions {
  std::string workers;    // host:port,host:port or dns:NAME:PORT
  std::string model_dir;  // for tokenizer.json
  std::string model_name;
  std::string host = "0.0.0.0";
  int port = 8080;
  int handler_threads = kDefaultHandlerThreads;
  size_t max_body_bytes = gateway::kDefaultMaxBodyBytes;
  int64_t max_chunk_tokens = 0;  // 0: the workers' max_batch_tokens
  int health_interval_ms = 1000;
  int resolve_interval_ms = 5000;
  int startup_timeout_s = 60;
  gateway::api::ApiLimits api;
  bool access_log = false;
  std::vector<std::string> cors_allow_origins;
  std::string default_prompt_name, default_prompt;
  std::string otlp_endpoint, otlp_service_name = "quiver";
  HttpTimeouts timeouts;
};

int RunServe(const ServeOptions& options);
int RunGateway(const GatewayOptions& options);
// The engine's model options that come from elsewhere in the folder (a yes/no reranker's token
// ids, from its tokenizer), for the folder as loaded (the engine then loads from it, reading it
// once).
absl::StatusOr<engine::ModelOptions> ResolveModelOptions(const engine::ModelFolder& folder);
int RunEmbed(const EmbedOptions& options);
int RunTokenize(const TokenizeOptions& options);
int RunVersion();

// The HTTP server's options for serve and gateway alike; the API checks keys from the headers.
gateway::HttpServerOptions HttpOptions(const std::string& host, int port, int handler_threads,
                                       size_t max_body_bytes, const HttpTimeouts& t,
                                       gateway::api::Api& api);

// A stopping server: not ready, answers say Connection: close, running requests get
// `drain_s` seconds to finish (then 503 at their next check), and the HTTP server stops.
void DrainAndStop(gateway::HttpServer& server, gateway::api::Api& api, int drain_s,
                  std::string_view who);

}  // namespace quiver::app
