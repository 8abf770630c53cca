// quiver: one binary for every role. See docs/architecture.md for the tiers.
#include <cstdio>
#include <exception>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "app/commands.h"
#include "app/fidelity_gate.h"
#include "common/logging.h"
#include "common/strings.h"
#include "engine/attention/registry.h"
#include "spdlog/spdlog.h"
#include "worker/worker.h"

namespace {

constexpr const char* kThreadsHelp =
    "Compute threads (0: the CPUs this process may use, i.e. its affinity mask capped by a cgroup "
    "CPU quota; `quiver version` shows the count). More threads than those CPUs take turns on "
    "them";

// The attention backends this binary has, per device: "cpu: reference, ...; cuda: ...".
std::string AttentionBackendList() {
  std::string list;
  for (const auto& [device, name] : {std::pair{quiver::engine::Device::kCpu, "cpu"},
                                     std::pair{quiver::engine::Device::kCuda, "cuda"}}) {
    const std::vector<std::string_view> names = quiver::engine::AttentionBackendNames(device);
    if (names.empty()) continue;
    list += quiver::StrCat(list.empty() ? "" : "; ", name, ": ");
    for (size_t i = 0; i < names.size(); ++i) list += quiver::StrCat(i ? ", " : "", names[i]);
  }
  return list;
}

// The HTTP server's and the API's flags, the same for serve and gateway.
void AddHttpApiFlags(CLI::App& cmd, std::string& host, int& port, int& handler_threads,
                     size_t& max_body_bytes, quiver::gateway::api::ApiLimits& api,
                     bool& access_log) {
  cmd.add_option("--host", host, "Address to listen on")->capture_default_str();
  cmd.add_option("--port", port, "HTTP port (0: pick a free one, logged)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd.add_option("--handler-threads", handler_threads,
                 "Threads that parse, tokenize and wait for results: the requests in flight at "
                 "once (later ones wait in order); the batcher can only batch what is in flight")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--max-body-bytes,--payload-limit", max_body_bytes,
                 "Largest request body; larger ones get 413 unread (--payload-limit: TEI's name)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--max-inputs,--max-client-batch-size", api.max_inputs,
                 "Inputs per request (413 beyond); bounds one request's memory and latency "
                 "(--max-client-batch-size: TEI's name)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--max-input-chars", api.max_input_chars,
                 "Characters per input, cut before tokenizing")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--request-timeout", api.request_timeout_s,
                 "Seconds a request may take, queueing and retries included")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--api-key", api.api_key,
                 "Require 'Authorization: Bearer KEY' (also QUIVER_API_KEY)")
      ->envname("QUIVER_API_KEY");
  cmd.add_flag("--auto-truncate", api.auto_truncate,
               "Cut inputs longer than the model accepts to its limit instead of refusing them (a "
               "request's own \"truncate\" still decides; off by default, as in TEI)");
  cmd.add_flag("--access-log", access_log,
               "Log one line per request: method, route, status, bytes, milliseconds");
}

void AddLimitFlags(CLI::App& cmd, quiver::scheduler::SchedulerLimits& limits) {
  cmd.add_option("--max-batch-tokens", limits.max_batch_tokens,
                 "Tokens per forward pass. Larger raises throughput until compute saturates and "
                 "the latency of every request in the batch; a few thousand on CPU, 16k-64k on a "
                 "GPU.")
      ->capture_default_str();
  cmd.add_option("--max-batch-seqs", limits.max_batch_seqs,
                 "Sequences per forward pass; bounds per-batch metadata. Rarely the binding "
                 "limit: leave it unless batches of many tiny inputs hurt latency.")
      ->capture_default_str();
  cmd.add_option("--max-queued-tokens", limits.max_queued_tokens,
                 "Tokens admitted and not yet finished; beyond it requests get 429 at once. "
                 "Size it to throughput (tokens/s) x the queue wait you accept.")
      ->capture_default_str();
}

void AddCorsFlag(CLI::App& cmd, std::vector<std::string>& origins) {
  cmd.add_option("--cors-allow-origin", origins,
                 "Origins whose web pages may call the API from a browser (CORS), as browsers "
                 "send them: https://search.example.com (no path, no trailing slash), repeated or "
                 "comma-separated, or * for any; preflights need no API key. Default: none (no "
                 "CORS headers; servers and SDKs are not affected)")
      ->delimiter(',')
      ->envname("QUIVER_CORS_ALLOW_ORIGIN");
}

void AddPromptFlags(CLI::App& cmd, std::string& name, std::string& text) {
  cmd.add_option("--default-prompt-name", name,
                 "The prompt (one of the folder's config_sentence_transformers.json prompts) that "
                 "requests naming none get, instead of the folder's default_prompt_name");
  cmd.add_option("--default-prompt", text,
                 "A prompt's text that requests naming none get, e.g. 'query: ' (instead of the "
                 "folder's default prompt; not with --default-prompt-name)");
}

void AddTracingFlags(CLI::App& cmd, std::string& endpoint, std::string& service_name) {
  cmd.add_option("--otlp-endpoint", endpoint,
                 "Send spans (one per request; a worker's, one per chunk) to this OpenTelemetry "
                 "collector, over OTLP/HTTP with JSON (the base URL: http://HOST:4318; spans go to "
                 "its /v1/traces); a traceparent's trace is continued. Default: no tracing (the "
                 "standard OTEL_EXPORTER_OTLP_ENDPOINT is not read: it may name a gRPC or https "
                 "collector this exporter cannot reach)")
      ->envname("QUIVER_OTLP_ENDPOINT");
  cmd.add_option("--otlp-service-name", service_name, "service.name of the spans")
      ->envname("OTEL_SERVICE_NAME")
      ->capture_default_str();
}

void AddTimeoutFlags(CLI::App& cmd, quiver::app::HttpTimeouts& t) {
  cmd.add_option("--header-timeout", t.header_s,
                 "Seconds a client may take to send a request's line and headers; the "
                 "connection closes beyond")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--body-timeout", t.body_s,
                 "Seconds a client may take to send a request's body once its headers are in")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--idle-timeout", t.idle_s,
                 "Seconds a keep-alive connection may wait for its next request")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--max-connections", t.max_connections,
                 "Connections open at once; one more gets 503 with Retry-After and is closed "
                 "(keep it under the process's file-descriptor limit, ulimit -n)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd.add_option("--drain-timeout", t.drain_s,
                 "Seconds a stopping server (SIGTERM) lets running requests finish; those still "
                 "running then get 503 and the process exits")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  cmd.add_option("--max-body-bytes-in-flight", t.max_body_bytes_in_flight,
                 "Request-body bytes being read, parsed or handled at once; a request whose body "
                 "does not fit waits with its body unread (one request always runs)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 40))
      ->capture_default_str();
}

void AddDeviceFlags(CLI::App& cmd, quiver::engine::DeviceSettings& device) {
  cmd.add_option("--pooling", device.pooling,
                 "Embedding models: pool the tokens this way instead of as the folder says "
                 "(sentence-transformers' Pooling module, else the architecture's default): cls, "
                 "mean, max, lasttoken (or last-token), mean_sqrt_len_tokens, weightedmean. Dense "
                 "and Normalize modules still apply; refused for scoring models. Also "
                 "{\"pooling\": ...} in the folder's quiver.json");
  cmd.add_option("--device", device.device,
                 "cpu, cuda (the first GPU) or cuda:N. Asking for CUDA where it is absent fails "
                 "at start-up naming why (not compiled with CUDA, no driver, no device)")
      ->capture_default_str();
  cmd.add_option("--cuda-graphs", device.cuda_graphs,
                 "CUDA: 'lazy' runs a (token, sequence) bucket's first batch eagerly, captures a "
                 "graph on its second and replays it after; 'off' runs every batch eagerly "
                 "(debugging)")
      ->check(CLI::IsMember({"off", "lazy"}))
      ->capture_default_str();
  cmd.add_option("--max-graphs", device.max_graphs,
                 "CUDA: graphs held at once; the least recently used beyond it is dropped "
                 "(its memory given back; graph_memory_bytes in /metrics)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--graph-max-tokens", device.graph_max_tokens,
                 "CUDA: batches over this many tokens run eagerly, unpadded (launch overhead is "
                 "small beside their work)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--quantize", device.quantize,
                 "CPU: 'int8' keeps the encoder's Linear weights in int8 per output channel and "
                 "quantizes activations per token as each layer runs (attention, norms and task "
                 "heads stay f32); 'bf16' keeps them in bf16 and rounds activations to bf16, "
                 "summing in f32 (hosts with AVX512_BF16 only); the fidelity gate compares "
                 "either with f32 at start-up. A model folder's quiver.json may set it "
                 "({\"quantize\": \"int8\"}); this flag wins")
      ->check(CLI::IsMember({"none", "int8", "bf16"}))
      ->capture_default_str();
  cmd.add_option("--spin-wait-us", device.spin_wait_us,
                 "after a batch with nothing queued, the compute thread polls this many "
                 "microseconds for the next request before it sleeps (0: sleeps at once). A "
                 "thread that sleeps lets its CPU idle, and the next request's forward pass ran "
                 "slower (docs/engine.md); costs at most this much CPU per batch, and only when "
                 "the queue runs empty. At most 1000000")
      ->capture_default_str();
  cmd.add_option("--min-int8-cosine", device.min_int8_cosine,
                 "with --quantize int8: the smallest cosine to the f32 engine, on fixed corpus "
                 "texts, at which the server becomes ready (below it, /ready stays 503 and the "
                 "numbers are logged; also min_int8_cosine in the folder's quiver.json)")
      ->check(CLI::Range(-1.0, 1.0))
      ->capture_default_str();
}

}  // namespace

namespace {

// quiver serve: the gateway and an in-process engine.
CLI::App* AddServeCommand(CLI::App& app, quiver::app::ServeOptions& serve) {
  CLI::App* serve_cmd =
      app.add_subcommand("serve", "Gateway and an in-process engine in one process");
  serve_cmd
      ->add_option("--model,--model-id", serve.model_dir,
                   "Hugging Face model folder (--model-id: TEI's name)")
      ->capture_default_str();
  serve_cmd->add_option("--model-name,--served-model-name", serve.model_name,
                        "Name clients use in 'model' (default: the folder's name; "
                        "--served-model-name: TEI's and vLLM's name)");
  serve_cmd->add_option("--threads", serve.threads, kThreadsHelp)->capture_default_str();
  serve_cmd
      ->add_option("--max-input-tokens,--max-model-len", serve.max_input_tokens,
                   "Longest input in tokens, 413 beyond (0: the model's max_seq_length, "
                   "else its position limit; never more than the position limit; "
                   "--max-model-len: vLLM's name)")
      ->capture_default_str();
  AddHttpApiFlags(*serve_cmd, serve.host, serve.port, serve.handler_threads, serve.max_body_bytes,
                  serve.api, serve.access_log);
  AddLimitFlags(*serve_cmd, serve.limits);
  AddTimeoutFlags(*serve_cmd, serve.timeouts);
  AddCorsFlag(*serve_cmd, serve.cors_allow_origins);
  AddPromptFlags(*serve_cmd, serve.default_prompt_name, serve.default_prompt);
  AddTracingFlags(*serve_cmd, serve.otlp_endpoint, serve.otlp_service_name);
  AddDeviceFlags(*serve_cmd, serve.device);
  return serve_cmd;
}

// quiver gateway: HTTP in front of workers.
CLI::App* AddGatewayCommand(CLI::App& app, quiver::app::GatewayOptions& gw) {
  CLI::App* gateway_cmd = app.add_subcommand("gateway", "HTTP gateway in front of workers");
  gateway_cmd
      ->add_option("--workers", gw.workers,
                   "Workers: host:port,host:port or dns:NAME:PORT (re-resolved, e.g. a "
                   "Kubernetes headless Service)")
      ->required();
  gateway_cmd->add_option("--model", gw.model_dir, "Model folder (its tokenizer.json is used)")
      ->required();
  gateway_cmd->add_option("--model-name,--served-model-name", gw.model_name,
                          "Name clients use (default: the workers')");
  gateway_cmd
      ->add_option("--max-chunk-tokens", gw.max_chunk_tokens,
                   "Split requests into chunks of at most this many tokens (0: the workers' "
                   "max_batch_tokens)")
      ->capture_default_str();
  gateway_cmd
      ->add_option("--health-interval-ms", gw.health_interval_ms,
                   "How often each worker's health is checked; a failed call marks it "
                   "unhealthy at once")
      ->capture_default_str();
  gateway_cmd
      ->add_option("--resolve-interval-ms", gw.resolve_interval_ms,
                   "How often a dns: worker name is re-resolved")
      ->capture_default_str();
  AddHttpApiFlags(*gateway_cmd, gw.host, gw.port, gw.handler_threads, gw.max_body_bytes, gw.api,
                  gw.access_log);
  AddTimeoutFlags(*gateway_cmd, gw.timeouts);
  AddCorsFlag(*gateway_cmd, gw.cors_allow_origins);
  AddPromptFlags(*gateway_cmd, gw.default_prompt_name, gw.default_prompt);
  AddTracingFlags(*gateway_cmd, gw.otlp_endpoint, gw.otlp_service_name);
  return gateway_cmd;
}

// quiver worker: the gRPC worker.
CLI::App* AddWorkerCommand(CLI::App& app, quiver::worker::WorkerOptions& worker) {
  CLI::App* worker_cmd = app.add_subcommand("worker", "gRPC inference worker");
  worker_cmd->add_option("--model,--model-id", worker.model_dir, "Hugging Face model folder")
      ->required();
  AddTracingFlags(*worker_cmd, worker.otlp_endpoint, worker.otlp_service_name);
  worker_cmd->add_option("--model-name,--served-model-name", worker.model_name,
                         "Name clients use for the model (default: the folder's name)");
  worker_cmd->add_option("--listen", worker.listen, "gRPC host:port (port 0: pick a free one)")
      ->capture_default_str();
  worker_cmd
      ->add_option("--metrics-port", worker.metrics_port,
                   "Port for Prometheus GET /metrics (-1: off)")
      ->capture_default_str();
  worker_cmd->add_option("--metrics-host", worker.metrics_host, "Address for /metrics")
      ->capture_default_str();
  worker_cmd
      ->add_option("--threads", worker.threads,
                   quiver::StrCat(kThreadsHelp, ". One worker per machine or per GPU."))
      ->capture_default_str();
  worker_cmd
      ->add_option("--drain-grace-ms", worker.drain_grace_ms,
                   "On SIGTERM, after finishing admitted work, keep refusing new calls with "
                   "UNAVAILABLE this long before closing, so clients retry elsewhere; "
                   "about a health-check interval")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  AddLimitFlags(*worker_cmd, worker.limits);
  AddDeviceFlags(*worker_cmd, worker.device);
  return worker_cmd;
}

// quiver embed: the batch job.
CLI::App* AddEmbedCommand(CLI::App& app, quiver::app::EmbedOptions& embed) {
  CLI::App* embed_cmd = app.add_subcommand("embed", "Embed texts offline");
  embed_cmd->add_option("--model", embed.model_dir, "Hugging Face model folder")
      ->capture_default_str();
  auto* text_opt = embed_cmd->add_option("--text", embed.texts, "A text to embed (repeatable)");
  embed_cmd
      ->add_option("--input", embed.input_path,
                   "Input: JSON lines {\"id\": ..., \"text\": ...} (id optional: the "
                   "record's index) or plain text, one text per line; blank lines skipped")
      ->excludes(text_opt);
  embed_cmd
      ->add_option("--input-format", embed.input_format,
                   "jsonl, text, or auto (JSON lines for *.jsonl, *.ndjson, *.json)")
      ->check(CLI::IsMember({"auto", "jsonl", "text"}))
      ->capture_default_str();
  embed_cmd->add_option("--output", embed.output_path,
                        "Output file: *.npy for a NumPy matrix with the ids in NAME.ids.jsonl, "
                        "else JSON lines {\"id\", \"index\", \"embedding\"} (default stdout; a "
                        "SPLADE model: JSON lines only, its positive terms as [{\"index\", "
                        "\"value\"}, ...]). "
                        "'{shard}' in it becomes the shard's index. A file output is resumable: "
                        "a killed job run again goes on from OUTPUT.checkpoint");
  auto* shard_opt = embed_cmd->add_option(
      "--shard", embed.shard,
      "I/N: embed only shard I (from 0) of N, a contiguous slice of the records, so the shards' "
      "outputs in order concatenate to the whole");
  embed_cmd
      ->add_option("--shards", embed.shards,
                   "N shards, this one's index from JOB_COMPLETION_INDEX (a Kubernetes "
                   "Indexed Job with N completions)")
      ->check(CLI::PositiveNumber)
      ->excludes(shard_opt);
  embed_cmd->add_option("--workers", embed.workers,
                        "Run through quiver workers (host:port,... or dns:NAME:PORT) with the "
                        "gateway's balancing and retry, instead of a local engine; --model then "
                        "gives the tokenizer only");
  embed_cmd->add_flag("--restart", embed.restart,
                      "Ignore OUTPUT.checkpoint and start the output over");
  embed_cmd
      ->add_option("--progress", embed.progress,
                   "auto (a bar on a terminal, else log lines), bar, log or off")
      ->check(CLI::IsMember({"auto", "bar", "log", "off"}))
      ->capture_default_str();
  embed_cmd
      ->add_option("--progress-interval", embed.progress_interval_s,
                   "Seconds between progress log lines when stderr is not a terminal")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  embed_cmd
      ->add_option("--request-timeout", embed.request_timeout_s,
                   "Seconds one batch may take, retries on other workers included")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  embed_cmd
      ->add_option("--checkpoint-interval", embed.checkpoint_interval_s,
                   "Least seconds between two checkpoints (each syncs the outputs to disk); "
                   "0 writes one after every batch. A killed job redoes at most this much")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  embed_cmd
      ->add_option("--startup-timeout", embed.startup_timeout_s,
                   "Seconds to wait, with --workers, for a worker to answer and to pass its "
                   "health check (its warm-up and fidelity gate done)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  embed_cmd
      ->add_option("--retries", embed.retries,
                   "Times a batch that no worker could answer is tried again (after 1, 2, "
                   "4, ... s) before the job stops, resumable")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  auto* prompt_name_opt = embed_cmd->add_option(
      "--prompt-name", embed.prompt_name,
      "The prompt before every text, by its name in the folder's config_sentence_transformers.json "
      "(e.g. document or passage when indexing a corpus); default: the folder's "
      "default_prompt_name, as sentence-transformers' encode");
  embed_cmd
      ->add_option("--prompt", embed.prompt,
                   "The prompt's text itself, e.g. 'passage: ' (instead of the folder's prompts)")
      ->excludes(prompt_name_opt);
  embed_cmd
      ->add_option("--dimensions", embed.dimensions,
                   "Matryoshka truncation to this many dimensions (0: the model's width)")
      ->check(CLI::NonNegativeNumber);
  embed_cmd->add_flag("--normalize", embed.normalize,
                      "L2-normalize (default: as the model's sentence-transformers modules say)");
  embed_cmd->add_option("--dtype", embed.dtype, "f32, int8 (tanh-scaled) or binary (sign bits)")
      ->check(CLI::IsMember({"f32", "int8", "binary"}))
      ->capture_default_str();
  embed_cmd
      ->add_option("--max-batch-tokens", embed.max_batch_tokens,
                   "Tokens per forward pass; larger batches raise throughput and memory")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  embed_cmd->add_option("--threads", embed.threads, kThreadsHelp);
  AddDeviceFlags(*embed_cmd, embed.device);
  embed_cmd->add_option(
      "--attention-backend", embed.attention_backend,
      quiver::StrCat("Force an attention backend (", AttentionBackendList(),
                     "); default: the per-model table, by family and sequence length"));
  return embed_cmd;
}

// quiver tokenize.
CLI::App* AddTokenizeCommand(CLI::App& app, quiver::app::TokenizeOptions& tokenize) {
  CLI::App* tokenize_cmd = app.add_subcommand(
      "tokenize", "Tokenize JSON lines {\"text\": ...} from stdin into {\"ids\", \"type_ids\"}");
  tokenize_cmd->add_option("--tokenizer", tokenize.tokenizer_path, "Path to tokenizer.json")
      ->required();
  tokenize_cmd->add_flag("--pairs", tokenize.pairs,
                         "Every line is a pair: {\"text\": ..., \"text_pair\": ...}");
  tokenize_cmd
      ->add_option("--max-length", tokenize.max_length,
                   "Truncate to this many tokens, special tokens included (0: off)")
      ->check(CLI::NonNegativeNumber);
  tokenize_cmd->add_option("--truncation-side", tokenize.truncation_side, "right or left")
      ->check(CLI::IsMember({"right", "left"}))
      ->capture_default_str();
  return tokenize_cmd;
}

// Runs quiver worker: the yes/no ids and the fidelity gate's reference composed around it.
int RunWorkerCommand(quiver::worker::WorkerOptions& worker) {
  worker.resolve_model = quiver::app::ResolveModelOptions;
  // The gate's reference before the engine loads (app/fidelity_gate.h).
  absl::StatusOr<quiver::app::FidelityReference> reference =
      absl::UnavailableError("no fidelity gate");
  worker.before_load = [&worker, &reference](const quiver::engine::EngineOptions& options) {
    if (quiver::app::NeedsFidelityGate(options)) {
      reference = quiver::app::FidelityReference::Compute(worker.model_dir, options);
    }
  };
  worker.readiness_gate = [&worker, &reference](quiver::engine::Engine& engine) {
    return quiver::app::CheckFidelity(engine, reference, worker.device.min_int8_cosine);
  };
  return quiver::worker::RunWorker(worker);
}

int Main(int argc, char** argv) {
  CLI::App app{"quiver: a server for text-embedding and reranking models"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->envname("QUIVER_LOG_LEVEL")
      ->capture_default_str();
  std::string log_format = "text";
  app.add_option("--log-format", log_format,
                 "Log lines on stderr as 'text' or as 'json' (one object per line: timestamp in "
                 "UTC, level, logger, thread, message and the record's own fields), for log "
                 "collectors")
      ->envname("QUIVER_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  quiver::app::ServeOptions serve;
  CLI::App* serve_cmd = AddServeCommand(app, serve);
  quiver::app::GatewayOptions gw;
  CLI::App* gateway_cmd = AddGatewayCommand(app, gw);
  quiver::worker::WorkerOptions worker;
  CLI::App* worker_cmd = AddWorkerCommand(app, worker);
  quiver::app::EmbedOptions embed;
  CLI::App* embed_cmd = AddEmbedCommand(app, embed);
  quiver::app::TokenizeOptions tokenize;
  CLI::App* tokenize_cmd = AddTokenizeCommand(app, tokenize);
  CLI::App* version_cmd = app.add_subcommand("version", "Version, build and devices");

  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<quiver::LogFormat> format = quiver::ParseLogFormat(log_format);
  absl::Status logging = format.ok() ? quiver::InitLogging(log_level, *format) : format.status();
  if (!logging.ok()) {
    std::fprintf(stderr, "quiver: %s\n", std::string(logging.message()).c_str());
    return 2;
  }
  // A model folder's quiver.json (ApplyModelSettings) sets what the command line did not.
  for (auto [cmd, device, model_dir] : {std::tuple{serve_cmd, &serve.device, &serve.model_dir},
                                        std::tuple{worker_cmd, &worker.device, &worker.model_dir},
                                        std::tuple{embed_cmd, &embed.device, &embed.model_dir}}) {
    if (!*cmd) continue;
    device->quantize_given = cmd->get_option("--quantize")->count() > 0;
    device->min_int8_cosine_given = cmd->get_option("--min-int8-cosine")->count() > 0;
    device->pooling_given = cmd->get_option("--pooling")->count() > 0;
    if (absl::Status s = quiver::engine::ApplyModelSettings(*model_dir, *device); !s.ok()) {
      spdlog::error("quiver {}: {}", cmd->get_name(), s.message());
      return 2;
    }
  }
  if (*serve_cmd) return quiver::app::RunServe(serve);
  if (*version_cmd) return quiver::app::RunVersion();
  if (*tokenize_cmd) return quiver::app::RunTokenize(tokenize);
  if (*embed_cmd) return quiver::app::RunEmbed(embed);
  if (*worker_cmd) return RunWorkerCommand(worker);
  if (*gateway_cmd) return quiver::app::RunGateway(gw);
  return 2;
}

}  // namespace

// Errors are values below main; what still escapes as an exception (out of memory while parsing
// the flags, say) ends the process with its message and exit status 1 instead of std::terminate's
// abort.
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quiver: stopped by an unexpected error: %s\n", e.what());
    return 1;
  }
}
