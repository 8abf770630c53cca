// `quiver embed`: a corpus in, its embeddings out, as a batch job (building or re-indexing a
// vector store). Input: JSON lines {"id": ..., "text": ...} or plain text lines (or --text).
// Output: a .npy matrix with the ids beside it (NAME.ids.jsonl, one JSON id per line), or JSON
// lines {"id", "index", "embedding"} (a file or stdout). Each text follows the prompt asked for
// (--prompt-name, --prompt) or the folder's default one, and a Pooling module with include_prompt
// false pools without the prompt's tokens, as sentence-transformers' encode. A SPLADE model's term
// weights are sparse: JSON lines only, each "embedding" its positive terms as {"index", "value"} in
// index order (TEI's /embed_sparse, which `quiver serve` answers for such a model). Texts are
// tokenized with the model's tokenizer.json and cut at its max_seq_length, as sentence-transformers
// does.
//
// The work goes through the gateway's Dispatcher, to the in-process engine (a LocalReplica, as
// in `quiver serve`) or to a pool of `quiver worker`s (--workers, balanced and retried as the
// gateway does), in units of --max-batch-tokens, several in flight, committed in input order.
// After each commit (at most once per --checkpoint-interval, 1 s) the outputs are synced and a
// checkpoint (OUTPUT.checkpoint) says how far they are complete: a killed job run again with the
// same arguments cuts its outputs back to that point and goes on, and ends with the bytes an
// uninterrupted run writes. --shard I/N (or --shards N with JOB_COMPLETION_INDEX) takes a
// contiguous slice of the records, so the shards' outputs concatenate to the whole.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "app/commands.h"
#include "app/embed_job.h"
#include "app/fidelity_gate.h"
#include "app/local_replica.h"
#include "common/file.h"
#include "common/metrics.h"
#include "common/strings.h"
#include "engine/engine.h"
#include "gateway/api/service.h"
#include "gateway/dispatcher.h"
#include "gateway/grpc_replica.h"
#include "scheduler/scheduler.h"
#include "spdlog/spdlog.h"
#include "tokenizer/tokenizer.h"

namespace quiver::app {
namespace {

// What the job runs against: the local engine or a worker pool, behind one Dispatcher.
struct Backend {
  std::unique_ptr<MetricsRegistry> metrics = std::make_unique<MetricsRegistry>();
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<scheduler::Scheduler> scheduler;
  std::unique_ptr<gateway::GrpcReplicaSet> workers;
  std::shared_ptr<gateway::Dispatcher> dispatcher;
  std::string tokenizer_path;
  std::string model_identity;   // part of the checkpoint's fingerprint
  int64_t width = 0;            // the embedding's full width
  int64_t sparse_width = 0;     // SPLADE: the vocabulary's terms in each answer row; 0: dense
  bool exclude_prompt = false;  // the Pooling module's include_prompt is false
  int64_t max_tokens = 0;       // inputs are cut here
  int window = 2;               // units in flight
};

int Fail(int code, absl::string_view message) {
  std::fprintf(stderr, "quiver embed: %.*s\n", static_cast<int>(message.size()), message.data());
  return code;
}

// What identifies a model folder's outputs for a checkpoint: the bytes of its config and
// tokenizer, and the size and modification time of each weights file (hashing gigabytes of
// weights at every start would cost more than it saves).
std::string FolderFingerprint(const std::string& dir) {
  std::string out;
  for (const char* name : {"config.json", "tokenizer.json", "modules.json",
                           "sentence_bert_config.json", "1_Pooling/config.json"}) {
    absl::StatusOr<InputScan> scan = ScanInput((std::filesystem::path(dir) / name).string());
    out += StrCat(name, "=", scan.ok() ? scan->hash : 0, ";");
  }
  std::error_code ec;
  std::vector<std::string> weights;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".safetensors")) continue;
    std::error_code size_ec, time_ec;
    const auto size = entry.file_size(size_ec);
    const auto time = entry.last_write_time(time_ec);
    weights.push_back(StrCat(name, "=", size_ec ? 0 : size, "@",
                             time_ec ? 0 : time.time_since_epoch().count(), ";"));
  }
  std::sort(weights.begin(), weights.end());
  for (const std::string& w : weights) out += w;
  return StrCat(ScanTexts({out}).hash);
}

absl::StatusOr<Backend> LocalBackend(const EmbedOptions& options) {
  Backend b;
  absl::StatusOr<engine::ModelFolder> folder = engine::LoadModelFolder(options.model_dir);
  if (!folder.ok()) return folder.status();
  absl::StatusOr<engine::ModelOptions> model = ResolveModelOptions(*folder);
  if (!model.ok()) return model.status();
  engine::EngineOptions engine_options;
  engine_options.num_threads = options.threads;
  engine_options.attention_backend = options.attention_backend;
  engine_options.model = *model;
  scheduler::SchedulerLimits limits;
  limits.max_batch_tokens = options.max_batch_tokens;
  limits.max_batch_seqs = 512;
  limits.max_queued_tokens =
      std::max<int64_t>(limits.max_queued_tokens, 4 * options.max_batch_tokens);
  if (absl::Status s = engine::ApplyDeviceSettings(options.device, limits.max_batch_tokens,
                                                   limits.max_batch_seqs, engine_options);
      !s.ok()) {
    return s;
  }
  // int8 or bf16 weights must agree with the f32 engine before anything is written; the gate's
  // reference first, its f32 engine gone before this one loads.
  const bool gate = engine_options.quantize != engine::ops::WeightPrecision::kF32;
  absl::StatusOr<FidelityReference> reference = absl::UnavailableError("no fidelity gate");
  if (gate) reference = FidelityReference::Compute(options.model_dir, engine_options);
  absl::StatusOr<std::unique_ptr<engine::Engine>> eng =
      engine::Engine::Load(*std::move(folder), engine_options);
  if (!eng.ok()) return eng.status();
  b.engine = *std::move(eng);
  if (b.engine->info().sparse) {
    b.sparse_width = b.engine->info().num_labels;
  } else if (b.engine->is_scorer()) {
    return absl::InvalidArgumentError(
        StrCat(options.model_dir, " is a scoring model, not an embedding model"));
  }
  if (gate) {
    if (absl::Status s = CheckFidelity(*b.engine, reference, options.device.min_int8_cosine);
        !s.ok()) {
      return s;
    }
  }
  b.tokenizer_path = b.engine->folder().tokenizer_path;
  b.exclude_prompt = !b.engine->folder().pooling.include_prompt;
  b.width = b.engine->output_size();
  b.max_tokens = std::min<int64_t>(
      b.engine->folder().pooling.max_seq_length.value_or(b.engine->max_input_tokens()),
      b.engine->max_input_tokens());
  b.model_identity = StrCat(
      b.engine->folder().architecture, "/", b.width, "/", FolderFingerprint(options.model_dir), "/",
      options.device.device, "/", options.device.quantize, "/", options.attention_backend,
      // only when asked for: checkpoints of earlier jobs still match
      options.device.pooling.empty() ? std::string() : StrCat("/pooling=", options.device.pooling));
  b.scheduler = std::make_unique<scheduler::Scheduler>(b.engine.get(), limits, b.metrics.get());
  auto replica = std::make_shared<LocalReplica>("local", b.engine.get(), b.scheduler.get());
  b.dispatcher = std::make_shared<gateway::Dispatcher>(
      std::vector<std::shared_ptr<gateway::Replica>>{replica}, options.max_batch_tokens);
  b.window = 3;
  return b;
}

absl::StatusOr<Backend> WorkerBackend(const EmbedOptions& options) {
  if (options.device.pooling_given) {
    return absl::InvalidArgumentError(
        "--pooling sets the local engine's pooling; with --workers the workers pool (give them "
        "--pooling)");
  }
  Backend b;
  b.workers =
      std::make_unique<gateway::GrpcReplicaSet>(options.workers, std::chrono::milliseconds(500),
                                                std::chrono::milliseconds(2000), b.metrics.get());
  // One deadline for both: a worker's ModelInfo, then its health check.
  const std::chrono::seconds startup(options.startup_timeout_s);
  const auto give_up = std::chrono::steady_clock::now() + startup;
  absl::StatusOr<quiver::v1::ModelInfoResponse> info = b.workers->FirstModelInfo(startup);
  if (!info.ok()) {
    return absl::UnavailableError(StrCat(info.status().message(), " (--startup-timeout)"));
  }
  if (!info->can_embed() && info->sparse_width() == 0) {
    return absl::InvalidArgumentError(
        StrCat("the workers serve ", info->name(), ", which does not embed"));
  }
  b.sparse_width = info->sparse_width();
  b.exclude_prompt = info->exclude_prompt();
  b.tokenizer_path = (std::filesystem::path(options.model_dir) / "tokenizer.json").string();
  b.width = info->hidden_size();
  b.max_tokens = info->max_seq_length() > 0 ? info->max_seq_length() : info->max_input_tokens();
  // The workers' model: its name and shape (their weights are not here to hash), and the
  // tokenizer used here.
  absl::StatusOr<InputScan> tokenizer = ScanInput(b.tokenizer_path);
  b.model_identity = StrCat(info->architecture(), "/", b.width, "/", info->name(), "/",
                            tokenizer.ok() ? tokenizer->hash : 0, "/pooling", info->pooling());
  for (int pooling : info->poolings()) b.model_identity += StrCat("+", pooling);  // several modes
  b.dispatcher = std::make_shared<gateway::Dispatcher>(
      [set = b.workers.get()] { return set->Snapshot(); },
      std::min<int64_t>(options.max_batch_tokens, std::max<uint32_t>(1, info->max_batch_tokens())));
  b.window = std::max<int>(3, 2 * static_cast<int>(b.workers->All().size()));
  // A worker answers ModelInfo before its warm-up and fidelity gate, and says SERVING after
  // them: batches sent before would fail ("no healthy replica") and spend their retries.
  for (bool said = false; !b.dispatcher->any_healthy(); said = true) {
    if (std::chrono::steady_clock::now() >= give_up) {
      return absl::UnavailableError(
          StrCat("the workers in '", options.workers,
                 "' answered ModelInfo, but none passed its health check (warm-up and fidelity "
                 "gate) within --startup-timeout ",
                 options.startup_timeout_s, " s; their logs say why"));
    }
    if (!said) spdlog::info("quiver embed: waiting for a worker to finish its warm-up");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return b;
}

// One unit of work: consecutive records, tokenized, and its answer once it comes.
struct Unit {
  std::vector<std::string> ids;  // JSON ids
  std::vector<int64_t> indices;  // records' indices in the input
  int64_t tokens = 0;
  std::future<absl::StatusOr<gateway::ReplicaResult>> result;
};

bool Retriable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsResourceExhausted(s) ||
         absl::IsAborted(s) || absl::IsInternal(s) || absl::IsUnknown(s) || absl::IsCancelled(s);
}

// Runs one unit through the dispatcher; a unit the pool could not answer (every worker down, the
// deadline passed) is tried again after a pause, up to `retries` times.
// `abort` (set when the job stops on an error) ends the unit at once: its calls are cancelled as
// a gateway's are when the client leaves, and no retry follows.
// std::async keeps its own copies of the arguments while this runs.
absl::StatusOr<gateway::ReplicaResult> RunUnit(
    const std::shared_ptr<gateway::Dispatcher>& dispatcher, gateway::CallKind kind,
    const std::vector<gateway::Sequence>& seqs, const quiver::v1::OutputOptions& output,
    int timeout_s, int retries, const std::shared_ptr<const std::atomic<bool>>& abort) {
  absl::StatusOr<gateway::ReplicaResult> r = absl::UnknownError("not run");
  for (int attempt = 0;; ++attempt) {
    gateway::CallContext call(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
    call.client_gone = [abort] { return abort->load(std::memory_order_relaxed); };
    r = dispatcher->Run(kind, seqs, output, call);
    if (r.ok() || !Retriable(r.status()) || attempt >= retries || abort->load()) return r;
    spdlog::warn("quiver embed: a batch failed ({}); trying again ({} of {})", r.status().message(),
                 attempt + 1, retries);
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(1 << std::min(attempt, 4));
    while (std::chrono::steady_clock::now() < until && !abort->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

std::string FormatRow(const std::string& id, int64_t index, const uint8_t* row,
                      quiver::v1::OutputType type, int64_t cols) {
  std::string line = StrCat("{\"id\":", id, ",\"index\":", index, ",\"embedding\":[");
  for (int64_t j = 0; j < cols; ++j) {
    if (j > 0) line += ',';
    if (type == quiver::v1::OUTPUT_F32) {
      float v;
      std::memcpy(&v, row + 4 * j, 4);
      line += fmt::format("{}", v);  // the shortest form that reads back to the same float
    } else if (type == quiver::v1::OUTPUT_INT8) {
      line += std::to_string(static_cast<int8_t>(row[j]));
    } else {
      line += std::to_string(row[j]);
    }
  }
  line += "]}\n";
  return line;
}

// A SPLADE row (`width` f32 term weights) as its positive terms, as /embed_sparse writes them.
std::string FormatSparseRow(const std::string& id, int64_t index, const uint8_t* row,
                            int64_t width) {
  std::string line = StrCat("{\"id\":", id, ",\"index\":", index, ",\"embedding\":[");
  bool first = true;
  for (int64_t j = 0; j < width; ++j) {
    float v;
    std::memcpy(&v, row + 4 * j, 4);
    if (!(v > 0.0f)) continue;
    line += fmt::format("{}{{\"index\":{},\"value\":{}}}", first ? "" : ",", j, v);
    first = false;
  }
  line += "]}\n";
  return line;
}

// One run of `quiver embed`, in the order it goes: Plan (what to read, which slice of it, where
// to write), Connect (the engine or the worker pool, and the rows it answers), Open (resume from
// a checkpoint or start the outputs), Run (read and tokenize units, send them, commit the oldest
// in order). Each step returns 0 or the exit status, having said why.
class EmbedJob {
 public:
  explicit EmbedJob(const EmbedOptions& options) : options_(options) {}

  int Plan();
  int Connect();
  int Open();
  int Run();

 private:
  // A record read and tokenized that did not fit in the unit before.
  struct Pending {
    std::string id_json;
    int64_t index = 0;
    gateway::Sequence seq;
  };

  // Syncs the outputs and writes the checkpoint (to a file only).
  absl::Status Save();
  // Writes the oldest unit's rows once its answer is in; a checkpoint at most every
  // --checkpoint-interval.
  absl::Status Commit(Unit& unit);
  // Stops on `s`: the units in flight cancelled, what was committed kept for a resume.
  int FailAndKeep(const absl::Status& s);
  // Starts units of consecutive records up to --max-batch-tokens until the window is full or the
  // records are all sent (a record that would pass it starts the next unit; a longer one is a
  // unit of its own).
  absl::Status FillWindow();
  // Connect's part for a SPLADE model: JSON lines of its terms, the dense options refused.
  int ConnectSparse();
  // The prompt before each text (Connect's part): the one asked for or the folder's default, and
  // its tokens where the pooling leaves them out.
  int ChoosePrompt();

  const EmbedOptions& options_;
  // Plan.
  Shard shard_;
  Progress::Mode progress_mode_ = Progress::Mode::kOff;
  InputFormat format_ = InputFormat::kText;
  InputScan scan_;
  int64_t first_ = 0, end_ = 0;  // the records of this shard
  std::string output_path_, ids_path_, checkpoint_path_;
  bool to_file_ = false, npy_ = false;
  // Connect.
  std::optional<Backend> backend_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  tokenizer::EncodeOptions encode_;
  std::string prompt_;
  size_t prompt_tokens_ = 0;  // left out of the pooling (include_prompt false), else 0
  quiver::v1::OutputOptions output_;
  gateway::CallKind kind_ = gateway::CallKind::kEmbed;  // kScore for a SPLADE model's terms
  int64_t dims_ = 0, cols_ = 0, row_bytes_ = 0;
  const char* descr_ = "<f4";  // the .npy dtype
  // Open.
  Checkpoint checkpoint_;
  bool resume_ = false;
  std::optional<OutputFile> out_, ids_out_;
  std::optional<RecordReader> reader_;
  // Run.
  int64_t next_ = 0;                         // the next record to read
  int64_t committed_ = 0, tokens_done_ = 0;  // this run's
  std::chrono::steady_clock::time_point last_checkpoint_ = std::chrono::steady_clock::now();
  std::deque<Unit> in_flight_;
  std::optional<Pending> carry_;
  bool consistent_ = true;     // false while a commit is half written
  int64_t saved_records_ = 0;  // what the checkpoint on disk says
  std::shared_ptr<std::atomic<bool>> abort_ = std::make_shared<std::atomic<bool>>(false);
};

int EmbedJob::Plan() {
  if (!options_.shard.empty()) {
    absl::StatusOr<Shard> s = ParseShard(options_.shard);
    if (!s.ok()) return Fail(2, s.status().message());
    shard_ = *s;
  } else if (options_.shards > 0) {
    absl::StatusOr<Shard> s =
        ShardFromJobIndex(options_.shards, std::getenv("JOB_COMPLETION_INDEX"));
    if (!s.ok()) return Fail(2, s.status().message());
    shard_ = *s;
  }
  absl::StatusOr<Progress::Mode> progress_mode = Progress::ParseMode(options_.progress);
  if (!progress_mode.ok()) return Fail(2, progress_mode.status().message());
  progress_mode_ = *progress_mode;
  if (!options_.input_path.empty()) {
    absl::StatusOr<InputFormat> f = ParseInputFormat(options_.input_format, options_.input_path);
    if (!f.ok()) return Fail(2, f.status().message());
    format_ = *f;
    absl::StatusOr<InputScan> s = ScanInput(options_.input_path);
    if (!s.ok()) return Fail(2, s.status().message());
    scan_ = *s;
  } else {
    scan_ = ScanTexts(options_.texts);
  }
  if (scan_.records == 0) return Fail(2, "no texts (give --text or a non-empty --input)");
  std::tie(first_, end_) = ShardRange(scan_.records, shard_);
  output_path_ = ExpandShard(options_.output_path, shard_);
  to_file_ = !output_path_.empty();
  npy_ = output_path_.ends_with(".npy");
  if (npy_) ids_path_ = output_path_.substr(0, output_path_.size() - 4) + ".ids.jsonl";
  if (to_file_) checkpoint_path_ = output_path_ + ".checkpoint";
  return 0;
}

int EmbedJob::Connect() {
  absl::StatusOr<Backend> backend =
      options_.workers.empty() ? LocalBackend(options_) : WorkerBackend(options_);
  if (!backend.ok()) {
    return Fail(absl::IsInvalidArgument(backend.status()) ? 2 : 1, backend.status().message());
  }
  backend_ = *std::move(backend);
  if (backend_->sparse_width == 0 && options_.dimensions > backend_->width) {
    return Fail(2, StrCat("--dimensions ", options_.dimensions, " is more than the model's ",
                          backend_->width));
  }
  auto tok = tokenizer::Tokenizer::FromFile(backend_->tokenizer_path);
  if (!tok.ok()) return Fail(1, tok.status().message());
  tokenizer_ = *std::move(tok);
  encode_.truncation = tokenizer::Truncation{static_cast<size_t>(backend_->max_tokens)};
  if (int status = ChoosePrompt(); status != 0) return status;

  if (backend_->sparse_width > 0) return ConnectSparse();
  if (options_.normalize) output_.set_normalize(true);
  output_.set_dimensions(static_cast<uint32_t>(options_.dimensions));
  output_.set_output_type(options_.dtype == "int8"     ? quiver::v1::OUTPUT_INT8
                          : options_.dtype == "binary" ? quiver::v1::OUTPUT_BINARY
                                                       : quiver::v1::OUTPUT_F32);
  dims_ = options_.dimensions > 0 ? options_.dimensions : backend_->width;
  cols_ = options_.dtype == "binary" ? (dims_ + 7) / 8 : dims_;
  row_bytes_ = options_.dtype == "f32" ? 4 * cols_ : cols_;
  descr_ = options_.dtype == "f32" ? "<f4" : options_.dtype == "int8" ? "|i1" : "|u1";
  return 0;
}

int EmbedJob::ChoosePrompt() {
  // The folder's prompts: with --workers, --model's copy of the folder (the tokenizer's).
  gateway::api::ModelDescription prompts;
  absl::Status s = gateway::api::ReadPrompts(options_.model_dir, prompts);
  if (s.ok()) {
    s = gateway::api::ApplyDefaultPrompt(options_.prompt_name, options_.prompt, prompts,
                                         "--prompt-name", "--prompt");
  }
  if (!s.ok()) return Fail(2, s.message());
  prompt_ = gateway::api::DefaultPromptText(prompts);
  if (prompt_.empty()) return 0;
  if (backend_->exclude_prompt) {
    absl::StatusOr<std::vector<uint32_t>> ids =
        gateway::api::PromptIds(*tokenizer_, prompt_, encode_);
    if (!ids.ok()) return Fail(2, StrCat("the prompt: ", ids.status().message()));
    prompt_tokens_ = ids->size();
  }
  spdlog::info("quiver embed: every text after the prompt {}\"{}\"{}",
               prompts.default_prompt_name.empty() ? std::string()
                                                   : StrCat("'", prompts.default_prompt_name, "' "),
               prompt_,
               prompt_tokens_ > 0
                   ? StrCat(", whose ", prompt_tokens_, " tokens the pooling leaves out")
                   : std::string());
  return 0;
}

int EmbedJob::ConnectSparse() {
  const std::string model =
      StrCat(options_.workers.empty() ? options_.model_dir : "the workers' model",
             " is a SPLADE model, whose term weights are sparse");
  if (npy_) {
    return Fail(2, StrCat(model,
                          ": they are written as JSON lines ({\"id\", \"index\", "
                          "\"embedding\": [{\"index\", \"value\"}, ...]}), not .npy; give "
                          "--output NAME.jsonl, or none for stdout"));
  }
  if (options_.dimensions > 0) return Fail(2, StrCat(model, ": --dimensions does not apply"));
  if (options_.normalize) return Fail(2, StrCat(model, ": --normalize does not apply"));
  if (options_.dtype != "f32") {
    return Fail(2, StrCat(model, ": --dtype ", options_.dtype, " does not apply (f32 only)"));
  }
  kind_ = gateway::CallKind::kScore;
  dims_ = cols_ = backend_->sparse_width;
  row_bytes_ = 4 * cols_;
  return 0;
}

int EmbedJob::Open() {
  checkpoint_.fingerprint =
      StrCat("input=", scan_.bytes, ":", scan_.hash, ";format=", static_cast<int>(format_),
             ";shard=", shard_.index, "/", shard_.count, ";model=", backend_->model_identity,
             ";max_tokens=", backend_->max_tokens, ";dims=", dims_, ";dtype=", options_.dtype,
             ";normalize=", options_.normalize, ";npy=", npy_,
             // only for SPLADE or a prompt: checkpoints of earlier jobs still match
             kind_ == gateway::CallKind::kScore ? ";sparse" : "",
             prompt_.empty() ? std::string() : StrCat(";prompt=", ScanTexts({prompt_}).hash));
  if (to_file_ && options_.restart) {
    // Gone before anything is written: a --restart run killed early must not resume the old job.
    std::error_code ec;
    std::filesystem::remove(checkpoint_path_, ec);
    if (ec) return Fail(1, StrCat(checkpoint_path_, ": cannot remove: ", ec.message()));
  } else if (to_file_) {
    absl::StatusOr<std::optional<Checkpoint>> found = ReadCheckpoint(checkpoint_path_);
    if (!found.ok()) {
      return Fail(absl::IsUnavailable(found.status()) ? 1 : 2,
                  StrCat(found.status().message(), " (--restart removes it and starts over)"));
    }
    if (found->has_value()) {
      if ((*found)->fingerprint != checkpoint_.fingerprint) {
        return Fail(2, StrCat(checkpoint_path_,
                              " is from a job with another input, shard, model "
                              "or output options; run the same command to resume it, or add "
                              "--restart to start over"));
      }
      checkpoint_ = **found;
      resume_ = true;
    }
  }
  absl::StatusOr<OutputFile> out =
      to_file_ ? OutputFile::Open(output_path_, resume_ ? checkpoint_.output_bytes : -1)
               : OutputFile::Stdout();
  // A checkpoint the file does not match is the user's to sort out (2); an I/O error may pass (1).
  if (!out.ok()) return Fail(absl::IsDataLoss(out.status()) ? 2 : 1, out.status().message());
  out_ = *std::move(out);
  if (npy_) {
    absl::StatusOr<OutputFile> f =
        OutputFile::Open(ids_path_, resume_ ? checkpoint_.ids_bytes : -1);
    if (!f.ok()) return Fail(absl::IsDataLoss(f.status()) ? 2 : 1, f.status().message());
    ids_out_ = *std::move(f);
  }
  if (!resume_ && npy_) {
    if (absl::Status s = out_->Append(NpyHeader(descr_, end_ - first_, cols_)); !s.ok()) {
      return Fail(1, s.message());
    }
  }
  absl::StatusOr<RecordReader> reader = options_.input_path.empty()
                                            ? RecordReader::FromTexts(options_.texts)
                                            : RecordReader::OpenFile(options_.input_path, format_);
  if (!reader.ok()) return Fail(2, reader.status().message());
  reader_ = *std::move(reader);
  if (absl::Status s = reader_->Skip(first_ + checkpoint_.records_done); !s.ok()) {
    return Fail(2, s.message());
  }
  if (resume_) {
    spdlog::info("quiver embed: resuming {} at record {} of {} (from {})", output_path_,
                 checkpoint_.records_done, end_ - first_, checkpoint_path_);
  }
  spdlog::info("quiver embed: {} records [{}, {}) of {} (shard {}/{}) -> {} ({} x {} {}{})",
               end_ - first_, first_, end_, scan_.records, shard_.index, shard_.count,
               to_file_ ? output_path_ : "stdout", end_ - first_, cols_, options_.dtype,
               kind_ == gateway::CallKind::kScore ? ", sparse: the positive terms" : "");
  return 0;
}

absl::Status EmbedJob::Save() {
  if (!to_file_) return absl::OkStatus();
  if (absl::Status s = out_->Sync(); !s.ok()) return s;
  if (ids_out_) {
    if (absl::Status s = ids_out_->Sync(); !s.ok()) return s;
  }
  checkpoint_.output_bytes = out_->bytes();
  checkpoint_.ids_bytes = ids_out_ ? ids_out_->bytes() : 0;
  last_checkpoint_ = std::chrono::steady_clock::now();
  absl::Status written = WriteCheckpoint(checkpoint_path_, checkpoint_);
  if (written.ok()) saved_records_ = checkpoint_.records_done;
  return written;
}

absl::Status EmbedJob::Commit(Unit& unit) {
  absl::StatusOr<gateway::ReplicaResult> r = unit.result.get();
  if (!r.ok()) return r.status();
  const int64_t n = static_cast<int64_t>(unit.ids.size());
  if (r->num_seqs != n || static_cast<int64_t>(r->data.size()) != n * row_bytes_) {
    return absl::InternalError(StrCat("a batch of ", n, " texts came back with ", r->num_seqs,
                                      " rows of ", r->data.size(), " bytes"));
  }
  consistent_ = false;
  if (npy_) {
    if (absl::Status s = out_->Append(r->data); !s.ok()) return s;
    std::string ids;
    for (const std::string& id : unit.ids) ids += id + "\n";
    if (absl::Status s = ids_out_->Append(ids); !s.ok()) return s;
  } else {
    std::string lines;
    for (int64_t i = 0; i < n; ++i) {
      const auto* row = reinterpret_cast<const uint8_t*>(r->data.data()) + i * row_bytes_;
      lines += kind_ == gateway::CallKind::kScore
                   ? FormatSparseRow(unit.ids[i], unit.indices[i], row, cols_)
                   : FormatRow(unit.ids[i], unit.indices[i], row, r->output_type, cols_);
    }
    if (absl::Status s = out_->Append(lines); !s.ok()) return s;
  }
  consistent_ = true;
  committed_ += n;
  tokens_done_ += unit.tokens;
  checkpoint_.records_done += n;
  if (std::chrono::steady_clock::now() - last_checkpoint_ >=
      std::chrono::duration<double>(options_.checkpoint_interval_s)) {
    return Save();
  }
  return absl::OkStatus();
}

int EmbedJob::FailAndKeep(const absl::Status& s) {
  // Units still in flight are cancelled, not waited for to their deadlines.
  abort_->store(true);
  for (Unit& u : in_flight_) u.result.wait();
  in_flight_.clear();
  // What was committed stays committed: the next run resumes there.
  if (consistent_ && committed_ > 0) (void)Save();
  if (progress_mode_ == Progress::Mode::kBar) std::fprintf(stderr, "\n");
  const bool bad_input = absl::IsInvalidArgument(s) || absl::IsDataLoss(s);
  if (to_file_) {
    return Fail(
        bad_input ? 2 : 1,
        StrCat(s.message(), "; ", saved_records_, " of ", end_ - first_, " records are written",
               bad_input ? " (a changed input starts over: run with --restart)"
                         : ", and the same command resumes from there"));
  }
  return Fail(bad_input ? 2 : 1, s.message());
}

absl::Status EmbedJob::FillWindow() {
  tokenizer::Encoding enc;
  Record record;
  while ((next_ < end_ || carry_) && static_cast<int>(in_flight_.size()) < backend_->window) {
    Unit unit;
    std::vector<gateway::Sequence> seqs;
    while (next_ < end_ || carry_) {
      if (!carry_) {
        absl::StatusOr<bool> got = reader_->Next(&record);
        if (!got.ok()) return got.status();
        if (!*got) {
          return absl::DataLossError(StrCat(options_.input_path, " ended before record ", next_,
                                            " (did it change while the job ran?)"));
        }
        if (absl::Status s = prompt_.empty()
                                 ? tokenizer_->Encode(record.text, encode_, &enc)
                                 : tokenizer_->Encode(prompt_ + record.text, encode_, &enc);
            !s.ok()) {
          return absl::InvalidArgumentError(
              StrCat(reader_->where(), " (record ", record.index, "): ", s.message()));
        }
        if (prompt_tokens_ > 0 && prompt_tokens_ >= enc.ids.size()) {
          return absl::InvalidArgumentError(StrCat(
              reader_->where(), " (record ", record.index, "): the prompt takes ", prompt_tokens_,
              " of its ", enc.ids.size(),
              " tokens, and the model pools without the prompt's tokens (include_prompt false): "
              "nothing is left to pool"));
        }
        ++next_;
        Pending p{record.id_json, record.index, {}};
        p.seq.ids = enc.ids;
        p.seq.prompt_tokens = static_cast<uint32_t>(prompt_tokens_);
        if (std::any_of(enc.type_ids.begin(), enc.type_ids.end(),
                        [](uint32_t t) { return t != 0; })) {
          p.seq.type_ids = enc.type_ids;
        }
        carry_ = std::move(p);
      }
      const int64_t len = static_cast<int64_t>(carry_->seq.ids.size());
      if (!seqs.empty() && (unit.tokens + len > options_.max_batch_tokens || seqs.size() >= 512)) {
        break;
      }
      unit.tokens += len;
      seqs.push_back(std::move(carry_->seq));
      unit.ids.push_back(std::move(carry_->id_json));
      unit.indices.push_back(carry_->index);
      carry_.reset();
    }
    unit.result =
        std::async(std::launch::async, RunUnit, backend_->dispatcher, kind_, std::move(seqs),
                   output_, options_.request_timeout_s, options_.retries, abort_);
    in_flight_.push_back(std::move(unit));
  }
  return absl::OkStatus();
}

int EmbedJob::Run() {
  Progress progress(progress_mode_, end_ - first_, checkpoint_.records_done,
                    std::chrono::seconds(options_.progress_interval_s));
  next_ = first_ + checkpoint_.records_done;
  saved_records_ = checkpoint_.records_done;
  last_checkpoint_ = std::chrono::steady_clock::now();
  while (next_ < end_ || carry_ || !in_flight_.empty()) {
    if (absl::Status s = FillWindow(); !s.ok()) return FailAndKeep(s);
    // Commit the oldest when it is done; redraw the progress while waiting.
    Unit& oldest = in_flight_.front();
    while (oldest.result.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      progress.Update(committed_, tokens_done_);
    }
    if (absl::Status s = Commit(oldest); !s.ok()) {
      in_flight_.pop_front();
      return FailAndKeep(s);
    }
    in_flight_.pop_front();
    progress.Update(committed_, tokens_done_);
  }
  if (absl::Status s = to_file_ ? out_->Sync() : absl::OkStatus(); !s.ok()) {
    return Fail(1, s.message());
  }
  if (ids_out_) {
    if (absl::Status s = ids_out_->Sync(); !s.ok()) return Fail(1, s.message());
  }
  progress.Finish(committed_, tokens_done_);
  if (to_file_) {
    std::error_code ec;
    std::filesystem::remove(checkpoint_path_, ec);
    if (ec) spdlog::warn("quiver embed: done, but {} stays: {}", checkpoint_path_, ec.message());
  }
  return 0;
}

}  // namespace

int RunEmbed(const EmbedOptions& options) {
  EmbedJob job(options);
  if (int status = job.Plan(); status != 0) return status;
  if (int status = job.Connect(); status != 0) return status;
  if (int status = job.Open(); status != 0) return status;
  return job.Run();
}

}  // namespace quiver::app
