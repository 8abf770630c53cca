#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <new>

#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "common/strings.h"
#include "common/thread_name.h"
#include "engine/attention/registry.h"
#include "engine/attention/table.h"
#include "engine/base/spin.h"
#include "engine/graph_bucket.h"
#include "engine/kernels/cpu/cpu_features.h"
#include "engine/ops/output_format.h"
#include "engine/ops/pooling.h"
#include "engine/runtime/cuda_runtime.h"

namespace quiver::engine {
namespace {

ops::PoolMode ToOpPooling(Pooling mode) {
  switch (mode) {
    case Pooling::kModelDefault:  // resolved by the caller
    case Pooling::kCls:
      return ops::PoolMode::kCls;
    case Pooling::kMean:
      return ops::PoolMode::kMean;
    case Pooling::kLastToken:
      return ops::PoolMode::kLastToken;
  }
  return ops::PoolMode::kCls;
}

ops::PoolMode ToOpPooling(PoolingMode mode) {
  switch (mode) {
    case PoolingMode::kCls:
      return ops::PoolMode::kCls;
    case PoolingMode::kMean:
      return ops::PoolMode::kMean;
    case PoolingMode::kLastToken:
      return ops::PoolMode::kLastToken;
    case PoolingMode::kMax:
      return ops::PoolMode::kMax;
    case PoolingMode::kMeanSqrtLen:
      return ops::PoolMode::kMeanSqrtLen;
    case PoolingMode::kWeightedMean:
      return ops::PoolMode::kWeightedMean;
  }
  return ops::PoolMode::kCls;
}

}  // namespace

std::string DeviceSpec::ToString() const {
  return device == Device::kCpu ? std::string("cpu") : StrCat("cuda:", index);
}

absl::StatusOr<DeviceSpec> ParseDeviceSpec(std::string_view text) {
  DeviceSpec spec;
  if (text == "cpu") return spec;
  if (text == "cuda") {
    spec.device = Device::kCuda;
    return spec;
  }
  if (text.substr(0, 5) == "cuda:" && text.size() > 5 && text.size() <= 8) {
    int index = 0;
    for (char c : text.substr(5)) {
      if (c < '0' || c > '9') {
        index = -1;
        break;
      }
      index = index * 10 + (c - '0');
    }
    if (index >= 0) {
      spec.device = Device::kCuda;
      spec.index = index;
      return spec;
    }
  }
  return absl::InvalidArgumentError(
      StrCat("device '", text, "' is not one of cpu, cuda, cuda:N (N a device index)"));
}

absl::StatusOr<GraphMode> ParseGraphMode(std::string_view text) {
  if (text == "off") return GraphMode::kOff;
  if (text == "lazy") return GraphMode::kLazy;
  return absl::InvalidArgumentError(StrCat("cuda-graphs '", text, "' is not one of off, lazy"));
}

constexpr std::string_view kPoolingNames =
    "cls, mean, max, lasttoken (or last-token), mean_sqrt_len_tokens, weightedmean";

absl::Status ApplyModelSettings(const std::string& model_dir, DeviceSettings& settings) {
  const std::string path = (std::filesystem::path(model_dir) / "quiver.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::OkStatus();
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<JsonValue> json = JsonValue::Parse(*text);
  if (!json.ok()) return WithContext(json.status(), path);
  if (!json->is_object()) {
    return absl::InvalidArgumentError(StrCat(path, ": must be a JSON object"));
  }
  for (const auto& [key, value] : json->members()) {
    if (key == "quantize") {
      if (!value.is_string() || (value.as_string() != "none" && value.as_string() != "int8" &&
                                 value.as_string() != "bf16")) {
        return absl::InvalidArgumentError(
            StrCat(path, ": \"quantize\" must be \"none\", \"int8\" or \"bf16\""));
      }
      if (!settings.quantize_given) settings.quantize = value.as_string();
    } else if (key == "min_int8_cosine") {
      if (!value.is_number() || !(value.as_double() >= -1.0 && value.as_double() <= 1.0)) {
        return absl::InvalidArgumentError(
            StrCat(path, ": \"min_int8_cosine\" must be a cosine, a number in [-1, 1]"));
      }
      if (!settings.min_int8_cosine_given) settings.min_int8_cosine = value.as_double();
    } else if (key == "pooling") {
      if (!value.is_string() || !PoolingModeFromName(value.as_string())) {
        return absl::InvalidArgumentError(
            StrCat(path, ": \"pooling\" must be one of ", kPoolingNames));
      }
      if (!settings.pooling_given) settings.pooling = value.as_string();
    } else {
      return absl::InvalidArgumentError(
          StrCat(path, ": unknown key \"", key, "\" (known: quantize, min_int8_cosine, pooling)"));
    }
  }
  return absl::OkStatus();
}

// --spin-wait-us's bound: polling longer than a second between requests is a busy core, not a
// wait.
constexpr int64_t kMaxSpinWaitUs = 1000000;

absl::Status ApplyDeviceSettings(const DeviceSettings& settings, int64_t max_batch_tokens,
                                 int64_t max_batch_seqs, EngineOptions& options) {
  absl::StatusOr<DeviceSpec> device = ParseDeviceSpec(settings.device);
  if (!device.ok()) return WithContext(device.status(), "--device");
  absl::StatusOr<GraphMode> graphs = ParseGraphMode(settings.cuda_graphs);
  if (!graphs.ok()) return WithContext(graphs.status(), "--cuda-graphs");
  if (settings.max_graphs < 0) {
    return absl::InvalidArgumentError(
        StrCat("--max-graphs ", settings.max_graphs, " must be 0 (no graphs) or more"));
  }
  if (settings.graph_max_tokens < 0) {
    return absl::InvalidArgumentError(
        StrCat("--graph-max-tokens ", settings.graph_max_tokens, " must be 0 or more"));
  }
  if (max_batch_tokens <= 0 || max_batch_seqs <= 0) {
    return absl::InvalidArgumentError(StrCat("--max-batch-tokens ", max_batch_tokens,
                                             " and --max-batch-seqs ", max_batch_seqs,
                                             " must be positive"));
  }
  if (settings.quantize != "none" && settings.quantize != "int8" && settings.quantize != "bf16") {
    return absl::InvalidArgumentError(
        StrCat("--quantize '", settings.quantize, "' is not one of none, int8, bf16"));
  }
  if (!(settings.min_int8_cosine >= -1.0 && settings.min_int8_cosine <= 1.0)) {
    return absl::InvalidArgumentError(
        StrCat("--min-int8-cosine ", settings.min_int8_cosine, " must be a cosine, in [-1, 1]"));
  }
  if (settings.quantize != "none" && device->device != Device::kCpu) {
    return absl::InvalidArgumentError(
        StrCat("--quantize ", settings.quantize, " runs on the CPU; on ", device->ToString(),
               " the engine computes in bf16 (leave --quantize out)"));
  }
  options.quantize = settings.quantize == "int8"   ? ops::WeightPrecision::kInt8
                     : settings.quantize == "bf16" ? ops::WeightPrecision::kBf16
                                                   : ops::WeightPrecision::kF32;
  if (!ops::WeightPrecisionSupported(device->device, options.quantize)) {
    return absl::InvalidArgumentError(StrCat(
        "--quantize bf16 needs a CPU with AVX512_BF16 (and a kernel path of avx512 or above); "
        "this one: ",
        cpu::CpuSummary(), ". Use --quantize int8 or none"));
  }
  if (!settings.pooling.empty()) {
    options.pooling = PoolingModeFromName(settings.pooling);
    if (!options.pooling) {
      return absl::InvalidArgumentError(
          StrCat("--pooling '", settings.pooling, "' is not one of ", kPoolingNames));
    }
  }
  if (settings.spin_wait_us < 0 || settings.spin_wait_us > kMaxSpinWaitUs) {
    return absl::InvalidArgumentError(StrCat("--spin-wait-us ", settings.spin_wait_us,
                                             " must be from 0 (sleep at once) to ", kMaxSpinWaitUs,
                                             " (one second)"));
  }
  options.spin_wait = std::chrono::microseconds(settings.spin_wait_us);
  options.device = *device;
  options.cuda_graphs = *graphs;
  options.max_graphs = settings.max_graphs;
  options.graph_max_tokens = settings.graph_max_tokens;
  options.max_batch_tokens = max_batch_tokens;
  options.max_batch_seqs = max_batch_seqs;
  return absl::OkStatus();
}

namespace {

// The CPU threads an engine computes with: num_threads, else the CPUs this process may use.
int ComputeThreads(const EngineOptions& options, const CpuBudget& budget) {
  return std::max(1, options.num_threads > 0 ? options.num_threads : budget.usable_cpus);
}

// For DeviceSummary: how many compute threads and why. The pool's threads spin between tasks,
// so more of them than the CPUs the process may use take turns on those CPUs (and, under a
// cgroup quota, spend it): said where a setting asks for that.
std::string ThreadsSummary(int threads, const EngineOptions& options, const CpuBudget& budget) {
  if (options.num_threads <= 0) {
    return StrCat(" threads=", threads, " (the CPUs this process may use: ", budget.ToString(),
                  ")");
  }
  if (threads > budget.usable_cpus) {
    return StrCat(" threads=", threads, " (as set, over the ", budget.ToString(),
                  " CPUs this process may use: the threads share them and wait on each other)");
  }
  return StrCat(" threads=", threads, " (as set)");
}

// What Load refuses before it reads the folder: a bad QUIVER_CPU_ISA or prefetch setting,
// reduced-precision weights off the CPU or on a CPU without their instructions, and, on CUDA,
// a device that cannot be used or batch limits that are not positive.
absl::Status CheckLoadOptions(const std::string& model_dir, const EngineOptions& options) {
  const Device device = options.device.device;
  if (absl::StatusOr<cpu::CpuPath> path = cpu::ChosenCpuPath(); !path.ok()) return path.status();
  if (absl::StatusOr<int64_t> rows = cpu::ChosenPrefetchMinRows(); !rows.ok()) return rows.status();
  if (device != Device::kCpu && options.quantize != ops::WeightPrecision::kF32) {
    return absl::InvalidArgumentError(
        StrCat(model_dir, ": ", ops::WeightPrecisionName(options.quantize),
               " weights run on the CPU, not on ", options.device.ToString()));
  }
  if (!ops::WeightPrecisionSupported(device, options.quantize)) {
    return absl::InvalidArgumentError(
        StrCat(model_dir, ": ", ops::WeightPrecisionName(options.quantize),
               " weights need a CPU with AVX512_BF16 and the avx512 path or above (",
               cpu::CpuSummary(), ")"));
  }
  if (device == Device::kCuda) {
    QUIVER_RETURN_IF_ERROR(CudaUseDevice(options.device.index));
    if (options.max_batch_tokens <= 0 || options.max_batch_seqs <= 0) {
      return absl::InvalidArgumentError(StrCat("max_batch_tokens ", options.max_batch_tokens,
                                               " and max_batch_seqs ", options.max_batch_seqs,
                                               " must be positive"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& model_dir,
                                                     const EngineOptions& options) {
  QUIVER_RETURN_IF_ERROR(CheckLoadOptions(model_dir, options));
  absl::StatusOr<ModelFolder> folder = LoadModelFolder(model_dir);
  if (!folder.ok()) return folder.status();
  return LoadChecked(*std::move(folder), options);
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Load(ModelFolder folder,
                                                     const EngineOptions& options) {
  QUIVER_RETURN_IF_ERROR(CheckLoadOptions(folder.dir, options));
  return LoadChecked(std::move(folder), options);
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::LoadChecked(ModelFolder folder,
                                                            const EngineOptions& options) {
  const std::string model_dir = folder.dir;
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  e->cpu_budget_ = ReadCpuBudget();
  const Device device = options.device.device;
  e->folder_ = std::make_unique<ModelFolder>(std::move(folder));
  const ModelFolder& f = *e->folder_;
  // The pooling is settled before any batch runs (a CUDA load warms up its graphs).
  if (options.pooling) {
    if (f.info.num_labels > 0) {
      return absl::InvalidArgumentError(
          StrCat(model_dir, ": --pooling applies to embedding models; ", f.architecture,
                 f.info.sparse ? " is a SPLADE model (its pooling is the max over the tokens)"
                               : " scores with its own head"));
    }
    e->folder_->pooling.modes = {*options.pooling};
  }
  if (f.pooling.modes.size() > 1 && device == Device::kCuda) {
    return absl::UnimplementedError(StrCat(model_dir, ": its Pooling module concatenates ",
                                           f.pooling.ModesName(),
                                           "; several pooling modes run on the CPU only (--device "
                                           "cpu), or choose one with --pooling"));
  }
  if (!options.attention_backend.empty()) {
    absl::StatusOr<std::unique_ptr<AttentionBackend>> forced =
        MakeAttentionBackend(device, options.attention_backend);
    if (!forced.ok()) return forced.status();
    e->forced_attention_ = *std::move(forced);
  }
  for (std::string_view name : TableAttentionBackends(device)) {
    absl::StatusOr<std::unique_ptr<AttentionBackend>> backend = MakeAttentionBackend(device, name);
    if (!backend.ok()) return backend.status();
    e->table_attention_.emplace(name, *std::move(backend));
  }
  QUIVER_RETURN_IF_ERROR(e->FitAttention(f.info));
  QUIVER_ASSIGN_OR_RETURN(Allocator * allocator, AllocatorFor(device));
  e->model_ws_ = std::make_unique<Workspace>(*allocator);
  e->engine_ws_ = std::make_unique<Workspace>(*allocator);
  if (device == Device::kCuda) {
    QUIVER_RETURN_IF_ERROR(e->LoadCuda(model_dir));
  } else {
    QUIVER_RETURN_IF_ERROR(e->LoadCpu(model_dir));
  }
  if (e->pool_ == nullptr && !f.pooling.dense.empty()) {  // CUDA: the host's Dense GEMMs
    e->pool_ = std::make_unique<ThreadPool>(ComputeThreads(options, e->cpu_budget_));
  }
  {
    absl::StatusOr<DenseModules> dense =
        DenseModules::Load(f.pooling.dense, e->pooled_size(), WeightLoader::Mode::kPrepare);
    if (!dense.ok()) return dense.status();
    e->dense_ = *std::move(dense);
  }
  // The checkpoint's pages read while loading (every weight, now in its packed, quantized or
  // uploaded form) leave the process's resident memory: 42 MB of all-MiniLM-L6-v2's 90 MB.
  f.weights.DropResidentPages();
  e->stats_.device = options.device.ToString();
  e->UpdateStats();
  e->compute_thread_ = std::thread([engine = e.get()] {
    SetThreadName("quiver-compute");
    engine->ComputeLoop();
  });
  return e;
}

absl::Status Engine::LoadCpu(const std::string& model_dir) {
  const ModelFolder& f = *folder_;
  weights_ =
      std::make_unique<WeightLoader>(f.weights, f.architecture, std::string(f.entry->module_prefix),
                                     WeightLoader::Mode::kPrepare, Device::kCpu);
  weights_->set_precision(options_.quantize);
  absl::StatusOr<std::unique_ptr<Model>> model =
      f.entry->factory({f.architecture, f.config, *weights_, options_.model});
  if (!model.ok()) return WithContext(model.status(), model_dir);
  model_ = *std::move(model);
  pool_ = std::make_unique<ThreadPool>(ComputeThreads(options_, cpu_budget_));
  const ExecContext exec{Device::kCpu, pool_.get()};
  runtime_ = options_.make_runtime
                 ? options_.make_runtime(*model_, exec, *model_ws_, *engine_ws_)
                 : std::make_unique<CpuRuntime>(*model_, exec, *model_ws_, *engine_ws_,
                                                options_.skip_unread_rows);
  return absl::OkStatus();
}

absl::Status Engine::LoadCuda(const std::string& model_dir) {
  const ModelFolder& f = *folder_;
  const std::string where = options_.device.ToString();
  QUIVER_ASSIGN_OR_RETURN(const CudaMemory before, CudaMemoryInfo());
  constexpr double kMiB = 1024.0 * 1024.0;
  // A model that does not fit fails here, with the numbers.
  auto failed = [&](std::string_view step, std::string_view what) {
    absl::StatusOr<CudaMemory> now = CudaMemoryInfo();
    const double taken = now.ok() && before.free_bytes > now->free_bytes
                             ? static_cast<double>(before.free_bytes - now->free_bytes) / kMiB
                             : 0.0;
    return absl::ResourceExhaustedError(fmt::format(
        "{}: {} on {} failed: {}; the device had {:.0f} MiB free of {:.0f} MiB before loading, "
        "and loading had taken {:.0f} MiB when it failed (--max-batch-tokens {} and "
        "--max-batch-seqs {} size the activation buffers)",
        model_dir, step, where, what, static_cast<double>(before.free_bytes) / kMiB,
        static_cast<double>(before.total_bytes) / kMiB, taken, options_.max_batch_tokens,
        options_.max_batch_seqs));
  };
  try {
    weights_ = std::make_unique<WeightLoader>(f.weights, f.architecture,
                                              std::string(f.entry->module_prefix),
                                              WeightLoader::Mode::kPrepare, Device::kCuda);
    absl::StatusOr<std::unique_ptr<Model>> model =
        f.entry->factory({f.architecture, f.config, *weights_, options_.model});
    if (!model.ok()) return WithContext(model.status(), model_dir);
    model_ = *std::move(model);
  } catch (const std::exception& e) {
    return failed("uploading the weights", e.what());
  }
  if (absl::StatusOr<CudaMemory> now = CudaMemoryInfo();
      now.ok() && before.free_bytes > now->free_bytes) {
    weight_bytes_ = static_cast<int64_t>(before.free_bytes - now->free_bytes);
  }
  CudaRuntimeOptions r;
  r.device = options_.device.index;
  r.graphs = options_.cuda_graphs;
  r.max_graphs = options_.max_graphs;
  r.graph_max_tokens = options_.graph_max_tokens;
  // The scheduler runs a chunk larger than its batch limits alone, so the buffers hold the
  // larger of max_batch_tokens and one sequence at the model's limit, in as many sequences as
  // that many tokens can make (every sequence and late-chunking span is non-empty).
  cuda_max_tokens_ = std::max(options_.max_batch_tokens, max_input_tokens());
  r.max_tokens = cuda_max_tokens_;
  r.max_seqs = cuda_max_tokens_;
  r.max_rows = cuda_max_tokens_;
  r.row_width = is_scorer() ? info().num_labels : hidden_size();
  r.slots = options_.slots;
  try {
    QUIVER_ASSIGN_OR_RETURN(runtime_, MakeCudaRuntime(r, *model_, *model_ws_, *engine_ws_));
    QUIVER_RETURN_IF_ERROR(WarmUp());
  } catch (const std::exception& e) {
    return failed("sizing the activation buffers for the largest batch", e.what());
  }
  model_ws_->Freeze();
  engine_ws_->Freeze();
  if (absl::StatusOr<CudaMemory> now = CudaMemoryInfo();
      now.ok() && before.free_bytes > now->free_bytes) {
    load_device_bytes_ = static_cast<int64_t>(before.free_bytes - now->free_bytes);
  }
  return absl::OkStatus();
}

// Runs the largest batches the limits allow, eagerly, on the load thread: every workspace slot
// grows to its final size (then frozen), and the GEMM algorithms of the largest bucket are
// chosen. The batches: the most tokens in max_batch_seqs sequences (and one token fewer, whose
// bucket adds a padding sequence), the most sequences (one token each: the most rows), and the
// longest one sequence may be (what a model sizes per sequence grows with it: SPLADE's logits
// for up to 256 of a sequence's tokens at once).
absl::Status Engine::WarmUp() {
  const int64_t tokens = cuda_max_tokens_;
  struct Shape {
    int64_t tokens, seqs;
  };
  const int64_t seqs = std::max<int64_t>(
      std::min(options_.max_batch_seqs, tokens),
      (tokens + max_input_tokens() - 1) / max_input_tokens());  // none over the model's limit
  const int64_t longest = std::min(tokens, max_input_tokens());
  for (const Shape shape : {Shape{tokens, seqs}, Shape{std::max(seqs, tokens - 1), seqs},
                            Shape{tokens, tokens}, Shape{longest, 1}}) {
    RaggedBatch batch;
    const int64_t n = std::min(shape.seqs, shape.tokens);
    for (int64_t s = 0; s < n; ++s) {
      const int64_t len = shape.tokens / n + (s < shape.tokens % n ? 1 : 0);
      batch.Add(std::vector<int32_t>(static_cast<size_t>(len), 0));
    }
    if (info().type_vocab_size > 1) batch.token_type_ids.assign(batch.token_ids.size(), 0);
    QUIVER_RETURN_IF_ERROR(
        ValidateBatch(batch, info().vocab_size, info().type_vocab_size, max_input_tokens()));
    Pending item;
    item.batch = std::move(batch);
    Running running = Start(std::move(item));
    absl::StatusOr<EngineOutput> out = Finish(running);
    if (!out.ok()) return WithContext(out.status(), "warm-up batch");
  }
  return absl::OkStatus();
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    arrivals_.fetch_add(1, std::memory_order_release);  // ends the compute thread's polling
  }
  cv_.notify_all();
  if (compute_thread_.joinable()) compute_thread_.join();
  // Before mu_ and cv_ go: a device's completion callbacks may still be pending (a batch's
  // event completed, its host function not yet run), and the runtime waits for them.
  runtime_.reset();
}

absl::Status Engine::Validate(const RaggedBatch& batch) const {
  absl::Status valid =
      ValidateBatch(batch, info().vocab_size, info().type_vocab_size, max_input_tokens());
  if (valid.ok() && batch.output.dimensions > output_size() && !is_scorer()) {
    valid = absl::InvalidArgumentError(StrCat("dimensions ", batch.output.dimensions,
                                              " is larger than the model's ", output_size()));
  }
  if (valid.ok() && !is_scorer() && folder_->pooling.modes.size() > 1) {
    // The model's embedding is its modes' rows side by side: a chunk cannot ask for one mode,
    // nor for late chunking's mean per span (token rows, raw_hidden, are the hidden states).
    if (batch.output.pooling != Pooling::kModelDefault) {
      valid = absl::InvalidArgumentError(StrCat("the model concatenates the pooling modes ",
                                                folder_->pooling.ModesName(),
                                                ": a chunk cannot choose one"));
    } else if (!batch.span_bounds.empty() && !batch.output.raw_hidden) {
      valid = absl::InvalidArgumentError(
          StrCat("late chunking (contextualized embeddings) pools each span by its mean; the "
                 "model concatenates the pooling modes ",
                 folder_->pooling.ModesName(), ", so its embeddings have no such form"));
    }
  }
  if (valid.ok() && options_.device.device == Device::kCuda) {
    if (batch.num_tokens() > cuda_max_tokens_) {
      valid = absl::InvalidArgumentError(
          StrCat("a batch of ", batch.num_tokens(), " tokens is over the ", cuda_max_tokens_,
                 " the device's buffers were sized for at load (--max-batch-tokens ",
                 options_.max_batch_tokens, ", or one sequence at the model's limit)"));
    } else if (batch.num_rows() > batch.num_tokens()) {
      // The answer rows are sized by tokens: batches packed together then never pass the limit.
      valid = absl::InvalidArgumentError(
          StrCat(batch.num_rows(), " late-chunking spans over ", batch.num_tokens(),
                 " tokens: on CUDA the spans of a batch may not outnumber its tokens"));
    }
  }
  return valid;
}

LazyResult Engine::Submit(RaggedBatch batch, std::function<void()> on_ready) {
  LazyResult result;
  // A batch that fails the checks is still answered on the compute thread, in order: on_ready
  // never runs inside Submit, where the caller may hold the lock that on_ready takes.
  absl::Status valid = Validate(batch);
  if (const int32_t id = info().score_before_trailing_id;
      valid.ok() && id >= 0 && batch.span_bounds.empty() && !batch.output.raw_hidden) {
    DropTrailingTokens(batch, id);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(batch), result, std::move(on_ready), std::move(valid)});
    arrivals_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_one();
  return result;
}

absl::StatusOr<EngineOutput> Engine::Run(RaggedBatch batch) {
  return Submit(std::move(batch)).Wait();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

std::string Engine::DeviceSummary() const {
  const EngineStats s = stats();
  const std::string fallback =
      fallback_attention_ != nullptr
          ? StrCat(" attention=", fallback_attention_->name(), " (the table's backends do not run ",
                   "this model's attention)")
          : std::string();
  if (options_.device.device == Device::kCpu) {
    const bool bf16_attention = ops::Bf16AttentionProducts(Device::kCpu, options_.quantize);
    return StrCat(
        "device=cpu (", cpu::CpuSummary(), ")",
        ThreadsSummary(pool_ == nullptr ? 0 : pool_->num_threads(), options_, cpu_budget_),
        options_.quantize == ops::WeightPrecision::kF32
            ? ""
            : StrCat(" weights=", ops::WeightPrecisionName(options_.quantize)),
        bf16_attention ? " attention_products=bf16" : "",
        ops::Int16AttentionProducts(Device::kCpu, options_.quantize) ? " attention_products=int16"
                                                                     : "",
        options_.quantize == ops::WeightPrecision::kBf16 && !bf16_attention
            ? " (bf16 products by vdpbf16ps without AMX tiles: slower than f32 on "
              "Intel cores; bf16 weights halve the memory here, not the time)"
            : "",
        fallback);
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  return fmt::format(
             "device={} device_memory={:.0f} MiB (weights {:.0f} MiB; buffers sized for "
             "max_batch_tokens={} max_batch_seqs={}) cuda_graphs={} max_graphs={} "
             "graph_max_tokens={} "
             "slots={}",
             s.device, static_cast<double>(s.device_memory_bytes) / kMiB,
             static_cast<double>(s.weight_bytes) / kMiB, options_.max_batch_tokens,
             options_.max_batch_seqs, options_.cuda_graphs == GraphMode::kOff ? "off" : "lazy",
             options_.max_graphs, options_.graph_max_tokens, runtime_->slots()) +
         (fallback.empty() ? CudaAttentionSummary() : fallback);
}

// " attention=..." on CUDA: the table's backends for this model, and the capturable one that
// takes the batches a graph may run where the table's plan per batch (AttentionFor).
std::string Engine::CudaAttentionSummary() const {
  if (forced_attention_ != nullptr) {
    return StrCat(" attention=", forced_attention_->name(), " (forced)");
  }
  std::string names;
  bool planned_per_batch = false;
  for (std::string_view name :
       TableAttentionBackends(Device::kCuda, info().family, info().head_dim)) {
    names += StrCat(names.empty() ? "" : "/", name);
    planned_per_batch = planned_per_batch || !table_attention_.at(name)->Capturable();
  }
  if (!planned_per_batch || options_.cuda_graphs == GraphMode::kOff) {
    return StrCat(" attention=", names);
  }
  if (const AttentionBackend* capturable = CapturableAttention()) {
    return StrCat(" attention=", names, " (", capturable->name(), " in CUDA graphs up to ",
                  kGraphsBeforeFlashInferTokens, " tokens)");
  }
  return StrCat(" attention=", names);
}

void Engine::UpdateStats() {
  const RuntimeStats r = runtime_->stats();
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.graphs = r.graphs;
  stats_.last_graph_failure = r.last_graph_failure;
  stats_.weight_bytes = weight_bytes_;
  stats_.device_memory_bytes =
      options_.device.device == Device::kCuda ? load_device_bytes_ + r.graphs.memory_bytes : 0;
}

bool Engine::Runs(const AttentionBackend& backend, const ModelInfo& info) {
  return backend.Supports(info.head_dim) && (!info.attention_masks || backend.SupportsMasks());
}

absl::Status Engine::FitAttention(const ModelInfo& info) {
  const Device device = options_.device.device;
  const std::string needs =
      StrCat("head_dim ", info.head_dim,
             info.attention_masks ? " with a sliding window or a position bias" : "");
  if (forced_attention_ != nullptr) {
    if (!Runs(*forced_attention_, info)) {
      return absl::InvalidArgumentError(StrCat("attention backend '", forced_attention_->name(),
                                               "' does not run ", needs, " (",
                                               folder_->architecture, ")"));
    }
    return absl::OkStatus();
  }
  bool all = true;
  for (std::string_view name : TableAttentionBackends(device, info.family, info.head_dim)) {
    all = all && Runs(*table_attention_.at(name), info);
  }
  if (all) return absl::OkStatus();
  // A table backend cannot run this model: the first backend of the device that can takes its
  // batches (CUDA: cuda_reference for a head_dim the varlen kernel has no instance of).
  for (std::string_view name : AttentionBackendNames(device)) {
    absl::StatusOr<std::unique_ptr<AttentionBackend>> backend = MakeAttentionBackend(device, name);
    if (backend.ok() && Runs(**backend, info)) {
      fallback_attention_ = *std::move(backend);
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(StrCat("no attention backend on ", DeviceName(device), " runs ",
                                           needs, " (", folder_->architecture, ")"));
}

const AttentionBackend& Engine::AttentionFor(int64_t max_seqlen, bool graphable) const {
  if (forced_attention_ != nullptr) return *forced_attention_;
  const AttentionBackend* chosen =
      table_attention_
          .at(ChooseAttentionBackend(options_.device.device, info().family, info().head_dim,
                                     max_seqlen))
          .get();
  if (fallback_attention_ != nullptr && !Runs(*chosen, info())) chosen = fallback_attention_.get();
  if (graphable && !chosen->Capturable()) {
    if (const AttentionBackend* capturable = CapturableAttention()) return *capturable;
  }
  return *chosen;
}

const AttentionBackend* Engine::CapturableAttention() const {
  for (const auto& [name, backend] : table_attention_) {
    if (backend->Capturable() && Runs(*backend, info())) return backend.get();
  }
  if (fallback_attention_ != nullptr && fallback_attention_->Capturable()) {
    return fallback_attention_.get();
  }
  return nullptr;
}

void Engine::ComputeLoop() {
  if (options_.device.device == Device::kCuda) {
    CudaUseDevice(options_.device.index).IgnoreError();  // Start sets it again and reports
  }
  const size_t depth = static_cast<size_t>(runtime_->slots());
  std::deque<Running> running;
  uint64_t taken = 0;  // batches taken from the queue: arrivals_ beyond it are waiting
  bool idle = false;   // the last batch finished with nothing queued or running
  while (true) {
    Pending next;
    bool start = false;
    if (idle && options_.spin_wait.count() > 0) {
      // Poll for the next request a while before sleeping (EngineOptions::spin_wait), once
      // per idle spell; what follows finds it queued, or sleeps.
      PollUntil(std::chrono::steady_clock::now() + options_.spin_wait,
                [&] { return arrivals_.load(std::memory_order_acquire) != taken; });
    }
    idle = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [&] {
        return (!queue_.empty() && running.size() < depth) ||
               (!running.empty() && running.front().done->load()) ||
               (stopping_ && queue_.empty() && running.empty());
      };
      // A batch whose device failed never signals: past a while, ask the runtime.
      while (!cv_.wait_for(lock, std::chrono::milliseconds(100), ready)) {
        if (!running.empty() && running.front().ticket >= 0 &&
            runtime_->Settled(running.front().ticket)) {
          running.front().done->store(true);
          break;
        }
      }
      if (!queue_.empty() && running.size() < depth) {
        next = std::move(queue_.front());
        queue_.pop_front();
        ++taken;
        start = true;
      } else if (running.empty()) {
        return;  // stopping and drained
      }
    }
    if (start) {  // enqueue first: the device works on it while the host formats the last one
      running.push_back(Start(std::move(next)));
      if (options_.device.device != Device::kCpu) UpdateStats();  // the CPU's never change
      continue;
    }
    Running finished = std::move(running.front());
    running.pop_front();
    absl::StatusOr<EngineOutput> out = Finish(finished);
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle = queue_.empty() && running.empty();
    }
    // Nothing queued behind this batch: the pool's workers stop spinning and poll politely for
    // the next one as this thread will (they leave their CPUs to the threads that deliver the
    // result whenever those run), then sleep.
    if (idle && pool_ != nullptr) pool_->Rest(options_.spin_wait);
    Deliver(finished.item, std::move(out));
  }
}

Engine::Running Engine::Start(Pending item) {
  Running r;
  r.done = std::make_shared<std::atomic<bool>>(false);
  r.item = std::move(item);
  const RaggedBatch& input = r.item.batch;
  if (!r.item.valid.ok()) {
    r.failed = r.item.valid;
    r.done->store(true);
    return r;
  }
  try {
    bool pad = options_.pad_to_buckets;
    const bool cuda = options_.device.device == Device::kCuda;
    if (cuda) {
      // Padded only where a graph may run it: a forced backend that plans per batch never is,
      // and a large batch whose table backend plans per batch (FlashInfer) runs that backend
      // eagerly rather than a capturable one in a graph (AttentionFor).
      const int64_t bucket_tokens = BucketFor(input.num_tokens(), input.num_seqs()).tokens;
      pad = options_.cuda_graphs != GraphMode::kOff && options_.max_graphs > 0 &&
            (forced_attention_ == nullptr || forced_attention_->Capturable()) &&
            bucket_tokens <= options_.graph_max_tokens &&
            (bucket_tokens <= kGraphsBeforeFlashInferTokens ||
             AttentionFor(input.max_seqlen(), false).Capturable());
    }
    // Plan: once per batch, read-only for the whole layer loop.
    BuildPlan(input, pad, info(), plan_, folder_->pooling.include_prompt);
    // Reduced-precision weights: attention's products in bf16 too, where that is faster on
    // this host, or else in int16 where AVX-512 VNNI exists (DeviceSummary says which).
    plan_.attention.bf16_products =
        ops::Bf16AttentionProducts(options_.device.device, options_.quantize);
    plan_.attention.int16_products =
        ops::Int16AttentionProducts(options_.device.device, options_.quantize);
    BatchWork work;
    work.plan = &plan_;
    work.attention = &AttentionFor(plan_.attention.max_seqlen, cuda && pad);
    work.score = is_scorer();
    // The model's modes (several: their rows side by side, Finish), a chunk's own, or late
    // chunking's mean per span.
    if (!input.span_bounds.empty()) {
      work.pools = {ops::PoolMode::kMean};
    } else if (input.output.pooling != Pooling::kModelDefault) {
      work.pools = {ToOpPooling(input.output.pooling)};
    } else {
      for (PoolingMode mode : folder_->pooling.modes) work.pools.push_back(ToOpPooling(mode));
    }
    work.rows =
        work.score ? plan_.num_real_seqs : static_cast<int64_t>(plan_.row_bounds.size() / 3);
    work.width = work.score ? info().num_labels : hidden_size();
    r.rows = work.rows;
    r.width = work.width;
    r.blocks = work.score ? 1 : static_cast<int64_t>(work.pools.size());
    std::shared_ptr<std::atomic<bool>> done = r.done;
    absl::StatusOr<int> ticket = runtime_->Start(work, [this, done] {
      {
        std::lock_guard<std::mutex> lock(mu_);  // no wake-up lost between check and wait
        done->store(true);
      }
      cv_.notify_all();
    });
    plan_.Clear();
    if (!ticket.ok()) {
      r.failed = ticket.status();
      r.done->store(true);
      return r;
    }
    r.ticket = *ticket;
  } catch (const std::bad_alloc&) {  // the batch fails, the engine goes on
    plan_.Clear();
    r.failed = absl::ResourceExhaustedError(
        StrCat("out of memory running a batch of ", input.num_tokens(), " tokens"));
    r.done->store(true);
  } catch (const std::exception& e) {
    plan_.Clear();
    r.failed = absl::InternalError(StrCat("forward pass failed: ", e.what()));
    r.done->store(true);
  }
  return r;
}

absl::StatusOr<EngineOutput> Engine::Finish(const Running& r) {
  if (!r.failed.ok()) return r.failed;
  absl::StatusOr<const float*> rows = runtime_->Finish(r.ticket);
  if (!rows.ok()) {
    return absl::InternalError(StrCat("forward pass failed: ", rows.status().message()));
  }
  const RaggedBatch& input = r.item.batch;
  EngineOutput out;
  out.num_seqs = r.rows;
  if (is_scorer()) {
    out.dimensions = r.width;
    out.output_type = OutputType::kF32;
    out.data.resize(static_cast<size_t>(r.rows * r.width) * sizeof(float));
    std::memcpy(out.data.data(), *rows, out.data.size());
    if (info().sparse) {  // SPLADE: log(1 + ReLU(max logit)), the max of log(1 + ReLU(logit))
      float* v = reinterpret_cast<float*>(out.data.data());
      const bool twice = folder_->pooling.splade_double_log;
      for (int64_t i = 0; i < r.rows * r.width; ++i) {
        v[i] = std::log1p(std::max(v[i], 0.0f));
        if (twice) v[i] = std::log1p(v[i]);
      }
    }
    return out;
  }
  // Several pooling modes: each row's blocks side by side (sentence-transformers' concatenation).
  const float* pooled = *rows;
  int64_t h = r.width;
  std::vector<float> joined;
  if (r.blocks > 1) {
    joined.resize(static_cast<size_t>(r.rows * r.blocks * r.width));
    for (int64_t b = 0; b < r.blocks; ++b) {
      for (int64_t i = 0; i < r.rows; ++i) {
        std::memcpy(joined.data() + (i * r.blocks + b) * r.width,
                    pooled + (b * r.rows + i) * r.width,
                    static_cast<size_t>(r.width) * sizeof(float));
      }
    }
    pooled = joined.data();
    h = r.blocks * r.width;
  }
  // Dense modules, then format, on the host.
  std::vector<float> dense_a, dense_b;
  if (!dense_.empty() && !input.output.raw_hidden) {
    try {
      pooled =
          dense_.Apply(ExecContext{Device::kCpu, pool_.get()}, pooled, r.rows, dense_a, dense_b);
    } catch (const std::exception& e) {
      return absl::InternalError(StrCat("the Dense modules failed: ", e.what()));
    }
    h = dense_.out_features(h);
  }
  const int64_t dims = input.output.dimensions > 0 ? input.output.dimensions : h;
  if (dims > h) {
    return absl::InvalidArgumentError(
        StrCat("dimensions ", dims, " is larger than the model's ", h));
  }
  const Encoding encoding = input.output.output_type;
  out.dimensions = dims;
  out.output_type = encoding;
  const int64_t row_bytes = ops::EncodedRowBytes(encoding, dims);
  out.data.resize(static_cast<size_t>(r.rows * row_bytes));
  try {
    ops::FormatOutput(ExecContext{Device::kCpu, pool_.get()},
                      Tensor(pooled, DType::kF32, Device::kCpu, {r.rows, h}), dims,
                      input.output.normalize.value_or(folder_->pooling.normalize), encoding,
                      Tensor(out.data.data(), DType::kU8, Device::kCpu, {r.rows, row_bytes}));
  } catch (const std::exception& e) {
    return absl::InternalError(StrCat("formatting the output failed: ", e.what()));
  }
  return out;
}

void Engine::Deliver(Pending& item, absl::StatusOr<EngineOutput> out) {
  item.result.Fulfil(std::move(out));
  if (item.on_ready) item.on_ready();
}

}  // namespace quiver::engine
