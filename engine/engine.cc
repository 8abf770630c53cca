#include "engine/engine.h"

#include <cstring>
#include <new>

#include "common/status.h"
#include "common/strings.h"
#include "engine/attention/registry.h"
#include "engine/attention/table.h"
#include "engine/ops/output_format.h"
#include "engine/ops/pooling.h"

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
  }
  return ops::PoolMode::kCls;
}

// A host i32 [size / 2, 2] view of (begin, end) pairs.
Tensor Bounds(const std::vector<int32_t>& pairs) {
  return Tensor(pairs.data(), DType::kI32, Device::kCpu,
                {static_cast<int64_t>(pairs.size() / 2), 2});
}

Tensor HostI32(const std::vector<int32_t>& values) {
  if (values.empty()) return {};
  return Tensor(values.data(), DType::kI32, Device::kCpu, {static_cast<int64_t>(values.size())});
}

}  // namespace

bool LazyResult::Ready() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

const absl::StatusOr<EngineOutput>& LazyResult::Wait() const {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->result;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& model_dir,
                                                     const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  absl::StatusOr<ModelFolder> folder = LoadModelFolder(model_dir);
  if (!folder.ok()) return folder.status();
  e->folder_ = std::make_unique<ModelFolder>(*std::move(folder));
  const ModelFolder& f = *e->folder_;
  const Device device = Device::kCpu;
  e->weights_ =
      std::make_unique<WeightLoader>(f.weights, f.architecture, std::string(f.entry->module_prefix),
                                     WeightLoader::Mode::kPrepare, device);
  absl::StatusOr<std::unique_ptr<Model>> model =
      f.entry->factory({f.architecture, f.config, *e->weights_, options.model});
  if (!model.ok()) return WithContext(model.status(), model_dir);
  e->model_ = *std::move(model);
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
  int threads = options.num_threads > 0 ? options.num_threads
                                        : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, threads);
  e->pool_ = std::make_unique<ThreadPool>(threads);
  e->exec_ = ExecContext{device, e->pool_.get()};
  QUIVER_ASSIGN_OR_RETURN(Allocator * allocator, AllocatorFor(device));
  e->allocator_ = allocator;
  e->model_ws_ = std::make_unique<Workspace>(*allocator);
  e->engine_ws_ = std::make_unique<Workspace>(*allocator);
  e->compute_thread_ = std::thread([engine = e.get()] { engine->ComputeLoop(); });
  return e;
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (compute_thread_.joinable()) compute_thread_.join();
}

absl::Status Engine::Validate(const RaggedBatch& batch) const {
  absl::Status valid =
      ValidateBatch(batch, info().vocab_size, info().type_vocab_size, max_input_tokens());
  if (valid.ok() && batch.output.dimensions > hidden_size() && !is_scorer()) {
    valid = absl::InvalidArgumentError(StrCat("dimensions ", batch.output.dimensions,
                                              " is larger than the model's ", hidden_size()));
  }
  return valid;
}

LazyResult Engine::Submit(RaggedBatch batch, std::function<void()> on_ready) {
  LazyResult result;
  // A batch that fails the checks is still answered on the compute thread, in order: on_ready
  // never runs inside Submit, where the caller may hold the lock that on_ready takes.
  absl::Status valid = Validate(batch);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(batch), result, std::move(on_ready), std::move(valid)});
  }
  cv_.notify_one();
  return result;
}

absl::StatusOr<EngineOutput> Engine::Run(RaggedBatch batch) {
  return Submit(std::move(batch)).Wait();
}

void Engine::ComputeLoop() {
  while (true) {
    Pending item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::StatusOr<EngineOutput> out = absl::UnknownError("not run");
    try {
      if (item.valid.ok()) {
        out = Execute(item.batch);
      } else {
        out = item.valid;
      }
    } catch (const std::bad_alloc&) {  // the batch fails, the engine goes on
      out = absl::ResourceExhaustedError(
          StrCat("out of memory running a batch of ", item.batch.num_tokens(), " tokens"));
    } catch (const std::exception& e) {
      out = absl::InternalError(StrCat("forward pass failed: ", e.what()));
    }
    // Nothing queued behind this batch: the pool's workers sleep now, leaving the cores to the
    // threads that deliver the result.
    bool idle;
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle = queue_.empty();
    }
    if (idle) pool_->Rest();
    LazyResult::State& state = *item.result.state_;
    {
      std::lock_guard<std::mutex> lock(state.mu);
      state.result = std::move(out);
      state.done = true;
    }
    state.cv.notify_all();
    if (item.on_ready) item.on_ready();
  }
}

absl::StatusOr<EngineOutput> Engine::Execute(const RaggedBatch& input) {
  // Plan: once per batch, read-only for the whole layer loop.
  BuildPlan(input, options_.pad_to_buckets, info(), plan_);
  const AttentionBackend* attention = forced_attention_.get();
  if (attention == nullptr) {
    attention =
        table_attention_
            .at(ChooseAttentionBackend(exec_.device, info().family, plan_.attention.max_seqlen))
            .get();
  }
  const RaggedBatch& batch = *plan_.batch;
  const ForwardContext ctx{exec_,
                           HostI32(batch.token_ids),
                           HostI32(batch.token_type_ids),
                           HostI32(plan_.positions),
                           Bounds(plan_.seq_bounds),
                           plan_.attention,
                           *attention,
                           *model_ws_};
  // Forward.
  const Tensor hidden = model_->Forward(ctx);

  EngineOutput out;
  if (is_scorer()) {
    out.num_seqs = plan_.num_real_seqs;
    out.dimensions = info().num_labels;
    out.output_type = OutputType::kF32;
    const Tensor scores = engine_ws_->F32(kScores, {out.num_seqs, out.dimensions});
    model_->Score(ctx, hidden, scores);
    out.data.resize(static_cast<size_t>(scores.numel()) * sizeof(float));
    allocator_->CopyToHost(out.data.data(), scores.f32(), out.data.size());
    plan_.Clear();
    return out;
  }
  // Pool: one row per sequence, or per span for late chunking (mean over the span's tokens).
  ops::PoolMode mode = input.output.pooling == Pooling::kModelDefault
                           ? ToOpPooling(folder_->pooling.mode)
                           : ToOpPooling(input.output.pooling);
  if (!input.span_bounds.empty()) mode = ops::PoolMode::kMean;
  const Tensor bounds = Bounds(plan_.row_bounds);
  const int64_t rows = bounds.dim(0), h = info().hidden_size;
  const Tensor pooled = engine_ws_->F32(kPooled, {rows, h});
  ops::Pool(exec_, hidden, bounds, mode, pooled);
  // Format.
  const int64_t dims = input.output.dimensions > 0 ? input.output.dimensions : h;
  if (dims > h) {
    return absl::InvalidArgumentError(
        StrCat("dimensions ", dims, " is larger than the model's ", h));
  }
  const Encoding encoding = input.output.output_type;
  out.num_seqs = rows;
  out.dimensions = dims;
  out.output_type = input.output.output_type;
  const int64_t row_bytes = ops::EncodedRowBytes(encoding, dims);
  out.data.resize(static_cast<size_t>(rows * row_bytes));
  ops::FormatOutput(exec_, pooled, dims,
                    input.output.normalize.value_or(folder_->pooling.normalize), encoding,
                    Tensor(out.data.data(), DType::kU8, Device::kCpu, {rows, row_bytes}));
  plan_.Clear();
  return out;
}

}  // namespace quiver::engine
