#include "engine/engine.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <new>

#include "common/strings.h"
#include "engine/graph_bucket.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace quiver::engine {
namespace {

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t exponent = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mantissa = x & 0x7FFFFF;
  if (((x >> 23) & 0xFF) == 0xFF) return static_cast<uint16_t>(sign | 0x7C00 | (mantissa ? 0x200 : 0));
  if (exponent >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00);  // overflow -> inf
  if (exponent <= 0) {
    if (exponent < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000;
    const int shift = 14 - exponent;
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // round to nearest even
  return static_cast<uint16_t>(half);
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
  absl::StatusOr<Weights> weights = Weights::Load(*e->folder_);
  if (!weights.ok()) return weights.status();
  e->weights_ = std::make_unique<Weights>(*std::move(weights));
  absl::StatusOr<std::unique_ptr<Model>> model =
      e->folder_->config.is_bert() ? MakeBertModel(*e->folder_, *e->weights_)
                                   : MakeQwen3Model(*e->folder_, *e->weights_, options.model);
  if (!model.ok()) return model.status();
  e->model_ = *std::move(model);
  if (!options.attention_backend.empty()) {
    absl::StatusOr<std::unique_ptr<AttentionBackend>> forced =
        MakeAttentionBackend(options.attention_backend);
    if (!forced.ok()) return forced.status();
    e->forced_attention_ = *std::move(forced);
  }
  for (std::string_view name : {"packed", "tiled", "flash"}) {
    e->table_attention_.emplace(name, *MakeAttentionBackend(name));
  }
  int threads = options.num_threads > 0 ? options.num_threads
                                        : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, threads);
  // BLAS runs single-threaded inside the pool's tasks (kernels/cpu/kernels.h).
  openblas_set_num_threads(1);
  e->pool_ = std::make_unique<ThreadPool>(threads);
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

int64_t Engine::max_input_tokens() const { return folder_->config.max_input_tokens(); }

absl::Status Engine::Validate(const RaggedBatch& batch) const {
  absl::Status valid = ValidateBatch(
      batch, folder_->config.is_bert() ? folder_->config.bert().vocab_size
                                       : folder_->config.qwen3().vocab_size,
      folder_->config.is_bert() ? folder_->config.bert().type_vocab_size : 1, max_input_tokens());
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

absl::StatusOr<EngineOutput> Engine::Run(RaggedBatch batch) { return Submit(std::move(batch)).Wait(); }

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
  // Optional bucket padding: extra tokens form one trailing sequence, extra sequence slots are
  // empty; neither can reach a real sequence (attention stays inside each sequence).
  const RaggedBatch* batch = &input;
  RaggedBatch padded;
  if (options_.pad_to_buckets) {
    const GraphBucket bucket = BucketFor(input.num_tokens(), input.num_seqs());
    padded = input;
    const int64_t extra = bucket.tokens - input.num_tokens();
    if (extra > 0) {
      padded.token_ids.resize(static_cast<size_t>(bucket.tokens), 0);
      if (!padded.token_type_ids.empty()) padded.token_type_ids.resize(padded.token_ids.size(), 0);
      padded.cu_seqlens.push_back(static_cast<int32_t>(bucket.tokens));
    }
    while (padded.num_seqs() < bucket.seqs) padded.cu_seqlens.push_back(padded.cu_seqlens.back());
    batch = &padded;
  }
  // Plan once: positions and attention metadata, read-only for the whole layer loop.
  std::vector<int32_t>& positions = ws_.positions;
  positions.resize(static_cast<size_t>(batch->num_tokens()));
  for (int64_t s = 0; s < batch->num_seqs(); ++s) {
    for (int32_t t = batch->cu_seqlens[s]; t < batch->cu_seqlens[s + 1]; ++t) {
      positions[t] = t - batch->cu_seqlens[s];
    }
  }
  AttentionPlan plan;
  plan.cu_seqlens = batch->cu_seqlens.data();
  plan.num_seqs = batch->num_seqs();
  plan.max_seqlen = batch->max_seqlen();
  plan.num_heads = model_->num_heads();
  plan.num_kv_heads = model_->num_kv_heads();
  plan.head_dim = model_->head_dim();
  plan.causal = model_->causal();
  plan.scale = 1.0f / std::sqrt(static_cast<float>(plan.head_dim));
  const AttentionBackend* attention = forced_attention_.get();
  if (attention == nullptr) {
    attention =
        table_attention_.at(ChooseAttentionBackend(model_->family(), plan.max_seqlen)).get();
  }
  ForwardContext ctx{*batch, positions, plan, *attention, *pool_, ws_};
  std::vector<float>& hidden = ws_.hidden;
  model_->Forward(ctx, hidden);

  const int64_t real_seqs = input.num_seqs();
  const int64_t h = model_->hidden_size();
  if (is_scorer()) {
    std::vector<float> scores;
    model_->Score(ctx, hidden, scores);
    EngineOutput out;
    out.num_seqs = real_seqs;
    out.dimensions = model_->num_labels();
    out.output_type = OutputType::kF32;
    out.data.resize(static_cast<size_t>(real_seqs * out.dimensions) * sizeof(float));
    std::memcpy(out.data.data(), scores.data(), out.data.size());
    return out;
  }
  // Pooling per real sequence.
  Pooling mode = input.output.pooling;
  if (mode == Pooling::kModelDefault) {
    switch (folder_->pooling.mode) {
      case PoolingMode::kCls: mode = Pooling::kCls; break;
      case PoolingMode::kMean: mode = Pooling::kMean; break;
      case PoolingMode::kLastToken: mode = Pooling::kLastToken; break;
    }
  }
  // One row per sequence, or per span for late chunking (mean over the span's tokens).
  const bool by_spans = !input.span_bounds.empty();
  const int64_t rows = by_spans ? input.num_rows() : real_seqs;
  if (by_spans) mode = Pooling::kMean;
  std::vector<float>& pooled = ws_.pooled;
  pooled.assign(static_cast<size_t>(rows * h), 0.0f);
  for (int64_t s = 0; s < rows; ++s) {
    const int64_t begin = by_spans ? input.span_bounds[2 * s] : batch->cu_seqlens[s];
    const int64_t end = by_spans ? input.span_bounds[2 * s + 1] : batch->cu_seqlens[s + 1];
    float* dst = pooled.data() + s * h;
    if (mode == Pooling::kCls || mode == Pooling::kLastToken) {
      const float* src = hidden.data() + (mode == Pooling::kCls ? begin : end - 1) * h;
      std::copy(src, src + h, dst);
    } else {
      for (int64_t t = begin; t < end; ++t) {
        const float* src = hidden.data() + t * h;
        for (int64_t j = 0; j < h; ++j) dst[j] += src[j];
      }
      const float inv = 1.0f / static_cast<float>(end - begin);
      for (int64_t j = 0; j < h; ++j) dst[j] *= inv;
    }
  }
  return FormatOutput(pooled, rows, h, input.output, folder_->pooling.normalize);
}

absl::StatusOr<EngineOutput> FormatOutput(const std::vector<float>& pooled, int64_t num_seqs,
                                          int64_t hidden, const OutputOptions& options,
                                          bool model_normalizes) {
  const int64_t dims = options.dimensions > 0 ? options.dimensions : hidden;
  if (dims > hidden) {
    return absl::InvalidArgumentError(
        StrCat("dimensions ", dims, " is larger than the model's ", hidden));
  }
  const bool normalize = options.normalize.value_or(model_normalizes);
  EngineOutput out;
  out.num_seqs = num_seqs;
  out.dimensions = dims;
  out.output_type = options.output_type;
  const size_t row_bytes = options.output_type == OutputType::kF32    ? dims * 4
                           : options.output_type == OutputType::kF16  ? dims * 2
                           : options.output_type == OutputType::kInt8 ? dims
                                                                       : (dims + 7) / 8;
  out.data.assign(static_cast<size_t>(num_seqs) * row_bytes, 0);
  std::vector<float> row(static_cast<size_t>(dims));
  for (int64_t s = 0; s < num_seqs; ++s) {
    std::copy(pooled.begin() + s * hidden, pooled.begin() + s * hidden + dims, row.begin());
    if (normalize) {
      double norm = 0.0;
      for (float v : row) norm += static_cast<double>(v) * v;
      // sentence-transformers / torch.nn.functional.normalize: x / max(||x||, 1e-12)
      const float inv = 1.0f / static_cast<float>(std::max(std::sqrt(norm), 1e-12));
      for (float& v : row) v *= inv;
    }
    uint8_t* dst = out.data.data() + s * row_bytes;
    switch (options.output_type) {
      case OutputType::kF32:
        std::memcpy(dst, row.data(), row_bytes);
        break;
      case OutputType::kF16:
        for (int64_t j = 0; j < dims; ++j) {
          const uint16_t half = FloatToHalf(row[j]);
          std::memcpy(dst + 2 * j, &half, 2);
        }
        break;
      case OutputType::kInt8:
        for (int64_t j = 0; j < dims; ++j) {
          const float q = std::round(std::tanh(row[j]) * 127.0f);
          dst[j] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -128.0f, 127.0f)));
        }
        break;
      case OutputType::kBinary:
        for (int64_t j = 0; j < dims; ++j) {
          if (row[j] > 0.0f) dst[j / 8] |= static_cast<uint8_t>(0x80 >> (j % 8));
        }
        break;
    }
  }
  return out;
}

}  // namespace quiver::engine
