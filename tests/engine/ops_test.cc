// Every op of engine/ops against a naive double-precision loop written here, on odd sizes (not
// multiples of the kernels' vector widths, tiles or panels), for every device this build has: the
// test is parameterized by device as CTranslate2's OpDeviceTest is, and ggml's test-backend-ops
// idea: the same inputs through each device's kernels against one reference. The CUDA
// instantiations skip where this build or host has no CUDA device; on a GPU host they run the
// same cases with f32 activations and with bf16 activations (what the CUDA models run), on bf16
// inputs (every random value is rounded to bf16, so the reference sees exactly what the kernels
// read). GEMMs and attention on CUDA take bf16 only; their f32 cases skip there. Tolerances are
// keyed by dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/attention/registry.h"
#include "engine/base/allocator.h"
#include "engine/base/half.h"
#include "engine/base/thread_pool.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/activation.h"
#include "engine/ops/attention.h"
#include "engine/ops/embedding.h"
#include "engine/ops/heads.h"
#include "engine/ops/linear.h"
#include "engine/ops/norm.h"
#include "engine/ops/output_format.h"
#include "engine/ops/pooling.h"
#include "engine/ops/rotary.h"
#ifdef QUIVER_WITH_CUDA
#include "engine/kernels/cuda/context.h"
#endif

namespace quiver::engine {

namespace {

// One instantiation: a device and the element type of the activations it runs.
struct OpParam {
  Device device;
  DType act;
};

// Test names and messages say "cpu_f32", "cuda_bf16", ... (found by argument-dependent lookup).
[[maybe_unused]] void PrintTo(const OpParam& p, std::ostream* os) {
  *os << DeviceName(p.device) << "_" << DTypeShortName(p.act);
}

using Doubles = std::vector<double>;

// Largest |got - want| allowed, relative to max(1, |want|): f32 kernels sum in another order than
// the double loop, and exp/erf/tanh come from libmvec (4 ulp). bf16: the output's own rounding
// (2^-9 relative) and bf16 intermediates (the GEMM's and attention's inputs to each other), on
// inputs that are exactly bf16.
double Tolerance(DType dtype) { return dtype == DType::kF32 ? 2e-5 : 2e-2; }

void ExpectNear(const std::vector<float>& got, const Doubles& want, DType dtype,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]) / std::max(1.0, std::abs(want[i]));
    if (!(err <= worst)) worst = err, worst_at = i;  // a NaN is the worst there is
    if (std::isnan(err)) break;
  }
  EXPECT_LE(worst, Tolerance(dtype))
      << what << ": element " << worst_at << " is " << got[worst_at] << ", want " << want[worst_at];
}

class OpTest : public ::testing::TestWithParam<OpParam> {
 protected:
  void SetUp() override {
    device_ = GetParam().device;
    act_ = GetParam().act;
    absl::StatusOr<Allocator*> allocator = AllocatorFor(device_);
    if (!allocator.ok()) GTEST_SKIP() << allocator.status();
    allocator_ = *allocator;
    pool_ = std::make_unique<ThreadPool>(2);
    ctx_ = ExecContext{device_, pool_.get()};
#ifdef QUIVER_WITH_CUDA
    if (device_ == Device::kCuda) {
      absl::StatusOr<std::unique_ptr<cuda::DeviceContext>> cuda = cuda::DeviceContext::Create();
      if (!cuda.ok()) GTEST_SKIP() << cuda.status();
      cuda_ = *std::move(cuda);
      ctx_.cuda = cuda_.get();
    }
#endif
  }

  void CheckAttention(int64_t head_dim);

  // An op that takes bf16 activations only on this device (CUDA GEMMs and attention).
  bool NeedsBf16() const { return device_ == Device::kCuda && act_ != DType::kBF16; }

  // Random values (seeded; never all zeros), as floats and as the doubles the reference reads;
  // for bf16 activations rounded to bf16, so that uploading them loses nothing.
  std::vector<float> Random(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) {
      x = dist(rng_);
      if (act_ == DType::kBF16) x = Bf16ToFloat(FloatToBf16(x));
    }
    return v;
  }
  static Doubles D(const std::vector<float>& v) { return Doubles(v.begin(), v.end()); }

  // A device tensor holding `host` (kept alive by the fixture).
  Tensor Upload(const void* host, size_t bytes, DType dtype, std::initializer_list<int64_t> shape) {
    buffers_.emplace_back(*allocator_, std::max<size_t>(bytes, 1));
    allocator_->CopyFromHost(buffers_.back().data(), host, bytes);
    return buffers_.back().View(dtype, shape);
  }
  Tensor F32(const std::vector<float>& host, std::initializer_list<int64_t> shape) {
    return Upload(host.data(), host.size() * 4, DType::kF32, shape);
  }
  Tensor I32(const std::vector<int32_t>& host, std::initializer_list<int64_t> shape) {
    return Upload(host.data(), host.size() * 4, DType::kI32, shape);
  }
  // `host` in the activation type (bf16: exact, since Random already rounded it).
  Tensor Act(const std::vector<float>& host, std::initializer_list<int64_t> shape) {
    if (act_ == DType::kF32) return F32(host, shape);
    std::vector<uint16_t> bf16(host.size());
    for (size_t i = 0; i < host.size(); ++i) bf16[i] = FloatToBf16(host[i]);
    return Upload(bf16.data(), bf16.size() * 2, DType::kBF16, shape);
  }
  Tensor Output(std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return F32(std::vector<float>(static_cast<size_t>(n), -7.0f), shape);  // garbage, not zeros
  }
  // An output of the activation type, filled with garbage (a NaN for bf16: an element the
  // kernel did not write shows).
  Tensor ActOutput(std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (act_ == DType::kF32) return Output(shape);
    const std::vector<uint16_t> nan(static_cast<size_t>(n), 0x7FC1);
    return Upload(nan.data(), nan.size() * 2, DType::kBF16, shape);
  }
  // A device tensor's elements as floats (f32 or bf16, contiguous).
  std::vector<float> Download(const Tensor& t) {
    std::vector<float> host(static_cast<size_t>(t.numel()));
    if (t.dtype() == DType::kBF16) {
      std::vector<uint16_t> bf16(host.size());
      allocator_->CopyToHost(bf16.data(), t.data<void>(), bf16.size() * 2);
      for (size_t i = 0; i < host.size(); ++i) host[i] = Bf16ToFloat(bf16[i]);
    } else {
      allocator_->CopyToHost(host.data(), t.f32(), host.size() * 4);
    }
    return host;
  }

  Device device_ = Device::kCpu;
  DType act_ = DType::kF32;
  Allocator* allocator_ = nullptr;
  std::unique_ptr<ThreadPool> pool_;
#ifdef QUIVER_WITH_CUDA
  std::unique_ptr<cuda::DeviceContext> cuda_;
#endif
  ExecContext ctx_;
  std::mt19937 rng_{1234};
  std::vector<Buffer> buffers_;
};

// ---- references -------------------------------------------------------------------------------

void LayerNormRef(double* row, const std::vector<float>& g, const std::vector<float>& b, int64_t n,
                  double eps) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < n; ++j) mean += row[j];
  mean /= n;
  for (int64_t j = 0; j < n; ++j) var += (row[j] - mean) * (row[j] - mean);
  var /= n;
  for (int64_t j = 0; j < n; ++j) row[j] = (row[j] - mean) / std::sqrt(var + eps) * g[j] + b[j];
}

void RmsNormRef(double* row, const float* g, int64_t n, double eps) {
  double ms = 0;
  for (int64_t j = 0; j < n; ++j) ms += row[j] * row[j];
  const double inv = 1.0 / std::sqrt(ms / n + eps);
  for (int64_t j = 0; j < n; ++j) row[j] = row[j] * inv * g[j];
}

double GeluErfRef(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double GeluTanhRef(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// y[m, n] = x[m, k] · w[n, k]ᵀ + bias
Doubles LinearRef(const std::vector<float>& x, const std::vector<float>& w,
                  const std::vector<float>& bias, int64_t m, int64_t n, int64_t k) {
  Doubles y(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double s = bias.empty() ? 0.0 : bias[c];
      for (int64_t i = 0; i < k; ++i) s += double(x[r * k + i]) * w[c * k + i];
      y[r * n + c] = s;
    }
  }
  return y;
}

// ---- Embedding --------------------------------------------------------------------------------

TEST_P(OpTest, EmbeddingGathersAddsAndNormalizes) {
  const int64_t vocab = 29, positions = 17, types = 3, hidden = 37, tokens = 13;
  const std::vector<float> word = Random(vocab * hidden), pos = Random(positions * hidden),
                           type = Random(types * hidden), g = Random(hidden), b = Random(hidden);
  std::vector<int32_t> ids(tokens), pos_ids(tokens), type_ids(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    ids[t] = int32_t((t * 7 + 3) % vocab);
    pos_ids[t] = int32_t(t % 11);
    type_ids[t] = int32_t(t % types);
  }
  const int64_t offset = 2;  // RoBERTa-style: rows from the offset on
  const Tensor word_t = Act(word, {vocab, hidden});
  const Tensor pos_t = Act(pos, {positions, hidden}).Rows(offset, positions);
  const Tensor type_t = Act(type, {types, hidden});
  const Tensor ids_t = I32(ids, {tokens}), pos_ids_t = I32(pos_ids, {tokens}),
               type_ids_t = I32(type_ids, {tokens});
  const float eps = 1e-12f;
  for (int variant = 0; variant < 3; ++variant) {
    // 0: gather only; 1: word + position + type, normed; 2: word + position, types all zero.
    ops::EmbeddingTables tables{word_t};
    if (variant > 0) {
      tables.position = pos_t;
      tables.type = type_t;
      tables.gamma = F32(g, {hidden});
      tables.beta = F32(b, {hidden});
      tables.eps = eps;
    }
    const Tensor out = ActOutput({tokens, hidden});
    ops::Embedding(ctx_, ids_t, variant > 0 ? pos_ids_t : Tensor(),
                   variant == 1 ? type_ids_t : Tensor(), tables, out);
    Doubles want(static_cast<size_t>(tokens * hidden));
    for (int64_t t = 0; t < tokens; ++t) {
      double* row = want.data() + t * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        row[j] = word[ids[t] * hidden + j];
        if (variant > 0) {
          row[j] += pos[(pos_ids[t] + offset) * hidden + j];
          row[j] += type[(variant == 1 ? type_ids[t] : 0) * hidden + j];
        }
      }
      if (variant > 0) LayerNormRef(row, g, b, hidden, eps);
    }
    ExpectNear(Download(out), want, act_, "variant " + std::to_string(variant));
  }
}

// ---- Linear -----------------------------------------------------------------------------------

TEST_P(OpTest, LinearWithEveryEpilogue) {
  if (NeedsBf16()) GTEST_SKIP() << "CUDA GEMMs take bf16 activations";
  const int64_t in = 37, out_features = 53;
  const std::vector<float> w = Random(out_features * in), bias = Random(out_features);
  const Tensor bias_t = F32(bias, {out_features});
  const ops::LinearWeights with_bias = ops::PrepareLinear(
      device_, Tensor(w.data(), DType::kF32, Device::kCpu, {out_features, in}), bias_t);
  const ops::LinearWeights no_bias = ops::PrepareLinear(
      device_, Tensor(w.data(), DType::kF32, Device::kCpu, {out_features, in}), {});
  for (int64_t tokens : {1, 7, 300}) {  // 300: more than one block of 256 rows
    const std::vector<float> x = Random(tokens * in), residual = Random(tokens * out_features);
    const Tensor x_t = Act(x, {tokens, in}), residual_t = Act(residual, {tokens, out_features});
    for (ops::Epilogue epilogue : {ops::Epilogue::kNone, ops::Epilogue::kGeluErf,
                                   ops::Epilogue::kGeluTanh, ops::Epilogue::kResidual}) {
      for (bool use_bias : {true, false}) {
        const Tensor y = ActOutput({tokens, out_features});
        ops::Linear(ctx_, x_t, use_bias ? with_bias : no_bias, y, epilogue, residual_t);
        Doubles want =
            LinearRef(x, w, use_bias ? bias : std::vector<float>(), tokens, out_features, in);
        for (size_t i = 0; i < want.size(); ++i) {
          if (epilogue == ops::Epilogue::kGeluErf) want[i] = GeluErfRef(want[i]);
          if (epilogue == ops::Epilogue::kGeluTanh) want[i] = GeluTanhRef(want[i]);
          if (epilogue == ops::Epilogue::kResidual) want[i] += residual[i];
        }
        ExpectNear(Download(y), want, act_,
                   "tokens " + std::to_string(tokens) + " epilogue " +
                       std::to_string(int(epilogue)) + " bias " + std::to_string(use_bias));
      }
    }
  }
}

// BERT's post-LN layer as one op against its two steps through the ops (QkvAttention, then
// FeedForwardAddLayerNorm with the output projection first), bit for bit: with int8 weights and
// many short sequences the op runs the layer per sequence (the kernel's own test compares those
// bits on every path; this one the op's arguments: which bias, norm and workspace goes where),
// with f32 weights it is the two steps. The CPU's: elsewhere the op is the two steps.
TEST_P(OpTest, PostLnLayerIsItsTwoSteps) {
  if (device_ != Device::kCpu) GTEST_SKIP() << "the per-sequence layer is the CPU's";
  const int64_t heads = 4, d = 16, hidden = heads * d, inter = 160, width = 3 * hidden;
  const std::vector<int32_t> lengths = {37, 128, 5, 64, 90, 0, 1, 77, 100, 3, 50, 60, 33, 20, 120};
  std::vector<int32_t> cu = {0};
  for (int32_t len : lengths) cu.push_back(cu.back() + len);
  const int64_t tokens = cu.back();
  AttentionPlan plan;
  plan.cu_seqlens = cu.data();
  plan.num_seqs = static_cast<int64_t>(lengths.size());
  plan.max_seqlen = 128;
  plan.num_heads = heads;
  plan.num_kv_heads = heads;
  plan.head_dim = d;
  plan.scale = 0.25f;
  const std::vector<float> wq = Random(width * hidden, 0.2f), wo = Random(hidden * hidden, 0.2f),
                           wu = Random(inter * hidden, 0.2f), wd = Random(hidden * inter, 0.1f),
                           x = Random(tokens * hidden);
  const Tensor bq = F32(Random(width), {width}), bo = F32(Random(hidden), {hidden}),
               bu = F32(Random(inter), {inter}), bd = F32(Random(hidden), {hidden}),
               g1 = F32(Random(hidden), {hidden}), b1 = F32(Random(hidden), {hidden}),
               g2 = F32(Random(hidden), {hidden}), b2 = F32(Random(hidden), {hidden});
  auto backend = MakeAttentionBackend(device_, "flash");
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (ops::WeightPrecision precision : {ops::WeightPrecision::kInt8, ops::WeightPrecision::kF32}) {
    const auto prepare = [&](const std::vector<float>& w, int64_t n, int64_t k, const Tensor& b) {
      return ops::PrepareLinear(device_, Tensor(w.data(), DType::kF32, Device::kCpu, {n, k}), b,
                                precision);
    };
    const ops::LinearWeights qkv_w = prepare(wq, width, hidden, bq),
                             o_w = prepare(wo, hidden, hidden, bo),
                             up_w = prepare(wu, inter, hidden, bu),
                             down_w = prepare(wd, hidden, inter, bd);
    const Tensor qkv = Output({tokens, width}), attended = Output({tokens, hidden}),
                 inter_t = Output({tokens, inter}), scratch = Output({tokens, hidden});
    const Tensor steps = F32(x, {tokens, hidden}), layer = F32(x, {tokens, hidden});
    ops::QkvAttention(ctx_, steps, qkv_w, qkv, **backend, plan, attended);
    const ops::AttentionOutputArgs first{attended, &o_w, g1, b1};
    ops::FeedForwardAddLayerNorm(ctx_, steps, up_w, ops::Epilogue::kGeluErf, down_w, steps, g2, b2,
                                 1e-12f, inter_t, scratch, {}, &first);
    const ops::PostLnLayerArgs args{&qkv_w,  &o_w, g1, b1, &up_w, ops::Epilogue::kGeluErf,
                                    &down_w, g2,   b2};
    ops::PostLnLayer(ctx_, layer, args, **backend, plan, 1e-12f, qkv, attended, inter_t, scratch);
    const std::vector<float> want = Download(steps), got = Download(layer);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << "precision " << static_cast<int>(precision);
  }
  // The int8 case above ran per sequence: the plan is one the kernel takes on two threads.
  EXPECT_TRUE(cpu::PostLnLayerBySequenceFits(*pool_, plan, width));
}

TEST_P(OpTest, LinearAddLayerNormFusesTheResidualAndNorm) {
  if (NeedsBf16()) GTEST_SKIP() << "CUDA GEMMs take bf16 activations";
  const int64_t in = 41, n = 35;
  const std::vector<float> w = Random(n * in), bias = Random(n), g = Random(n), b = Random(n);
  const ops::LinearWeights weights = ops::PrepareLinear(
      device_, Tensor(w.data(), DType::kF32, Device::kCpu, {n, in}), F32(bias, {n}));
  for (int64_t tokens : {5, 300}) {
    const std::vector<float> x = Random(tokens * in), io = Random(tokens * n);
    const Tensor io_t = F32(io, {tokens, n});
    ops::LinearAddLayerNorm(ctx_, Act(x, {tokens, in}), weights, io_t, F32(g, {n}), F32(b, {n}),
                            1e-5f, Output({tokens, n}));
    Doubles want = LinearRef(x, w, bias, tokens, n, in);
    for (int64_t r = 0; r < tokens; ++r) {
      for (int64_t j = 0; j < n; ++j) want[r * n + j] += io[r * n + j];
      LayerNormRef(want.data() + r * n, g, b, n, 1e-5);
    }
    ExpectNear(Download(io_t), want, act_, "tokens " + std::to_string(tokens));
  }
}

// ---- Norms ------------------------------------------------------------------------------------

TEST_P(OpTest, LayerNormAndAddLayerNorm) {
  const int64_t rows = 19, n = 45;
  const std::vector<float> x = Random(rows * n, 3.0f), add = Random(rows * n), g = Random(n),
                           b = Random(n);
  Doubles want = D(x);
  for (int64_t r = 0; r < rows; ++r) LayerNormRef(want.data() + r * n, g, b, n, 1e-6);
  const Tensor out = ActOutput({rows, n});
  ops::LayerNorm(ctx_, Act(x, {rows, n}), F32(g, {n}), F32(b, {n}), 1e-6f, out);
  ExpectNear(Download(out), want, act_, "LayerNorm");
  const Tensor in_place = Act(x, {rows, n});
  ops::LayerNorm(ctx_, in_place, F32(g, {n}), F32(b, {n}), 1e-6f, in_place);
  ExpectNear(Download(in_place), want, act_, "LayerNorm in place");

  Doubles sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = double(x[i]) + add[i];
  for (int64_t r = 0; r < rows; ++r) LayerNormRef(sum.data() + r * n, g, b, n, 1e-6);
  const Tensor io = F32(x, {rows, n});
  ops::AddLayerNorm(ctx_, io, Act(add, {rows, n}), F32(g, {n}), F32(b, {n}), 1e-6f);
  ExpectNear(Download(io), sum, act_, "AddLayerNorm");
}

TEST_P(OpTest, RmsNormAddRmsNormAndPerHeadNorm) {
  const int64_t rows = 23, n = 39;
  const std::vector<float> x = Random(rows * n, 2.0f), y = Random(rows * n), g = Random(n);
  Doubles want = D(x);
  for (int64_t r = 0; r < rows; ++r) RmsNormRef(want.data() + r * n, g.data(), n, 1e-6);
  const Tensor out = ActOutput({rows, n});
  ops::RmsNorm(ctx_, Act(x, {rows, n}), F32(g, {n}), 1e-6f, out);
  ExpectNear(Download(out), want, act_, "RmsNorm");

  Doubles residual(x.size());
  for (size_t i = 0; i < x.size(); ++i) residual[i] = double(x[i]) + y[i];
  Doubles normed = residual;
  for (int64_t r = 0; r < rows; ++r) RmsNormRef(normed.data() + r * n, g.data(), n, 1e-6);
  const Tensor residual_t = F32(x, {rows, n}), y_t = Act(y, {rows, n});
  ops::AddRmsNorm(ctx_, residual_t, y_t, F32(g, {n}), 1e-6f);
  ExpectNear(Download(residual_t), residual, act_, "AddRmsNorm residual");
  ExpectNear(Download(y_t), normed, act_, "AddRmsNorm output");

  // Per-head norm on the k columns of a fused [tokens, q + k + v] matrix: other columns untouched.
  const int64_t heads = 3, head_dim = 10, width = 7 * head_dim, tokens = 9;
  const std::vector<float> qkv = Random(tokens * width), hg = Random(head_dim);
  const Tensor qkv_t = Act(qkv, {tokens, width});
  ops::HeadRmsNorm(ctx_, qkv_t.Columns(2 * head_dim, 5 * head_dim), heads, F32(hg, {head_dim}),
                   1e-6f);
  Doubles head_want = D(qkv);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      RmsNormRef(head_want.data() + t * width + 2 * head_dim + h * head_dim, hg.data(), head_dim,
                 1e-6);
    }
  }
  ExpectNear(Download(qkv_t), head_want, act_, "HeadRmsNorm");
}

// ---- Rotary -----------------------------------------------------------------------------------

TEST_P(OpTest, RotaryNeoxAndGptJLayouts) {
  const int64_t tokens = 11, heads = 3, head_dim = 14, width = 5 * head_dim, offset = head_dim;
  const double theta = 10000.0;
  std::vector<int32_t> positions(tokens);
  for (int64_t t = 0; t < tokens; ++t) positions[t] = int32_t((t * 37) % 300);
  for (ops::RotaryLayout layout : {ops::RotaryLayout::kNeox, ops::RotaryLayout::kGptJ}) {
    const std::vector<float> x = Random(tokens * width);
    const Tensor x_t = Act(x, {tokens, width});
    ops::Rotary(ctx_, x_t.Columns(offset, offset + heads * head_dim), I32(positions, {tokens}),
                heads, head_dim, theta, layout);
    Doubles want = D(x);
    const int64_t half = head_dim / 2;
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        double* v = want.data() + t * width + offset + h * head_dim;
        const float* src = x.data() + t * width + offset + h * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          // The angle as transformers forms it: f32 inv_freq times the f32 position; its cosine
          // and sine in double.
          const float inv_freq = 1.0f / static_cast<float>(std::pow(theta, 2.0 * i / head_dim));
          const double angle = static_cast<float>(positions[t]) * inv_freq;
          const int64_t a = layout == ops::RotaryLayout::kNeox ? i : 2 * i;
          const int64_t b = layout == ops::RotaryLayout::kNeox ? i + half : 2 * i + 1;
          v[a] = src[a] * std::cos(angle) - src[b] * std::sin(angle);
          v[b] = src[b] * std::cos(angle) + src[a] * std::sin(angle);
        }
      }
    }
    ExpectNear(Download(x_t), want, act_, layout == ops::RotaryLayout::kNeox ? "neox" : "gpt-j");
  }
}

// ---- Activations ------------------------------------------------------------------------------

TEST_P(OpTest, SiluMulGeluAndTanh) {
  const int64_t rows = 13, inter = 27;
  const std::vector<float> gate_up = Random(rows * 2 * inter, 2.0f);
  const Tensor out = ActOutput({rows, inter});
  ops::SiluMul(ctx_, Act(gate_up, {rows, 2 * inter}), out);
  Doubles want(static_cast<size_t>(rows * inter));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < inter; ++j) {
      const double g = gate_up[r * 2 * inter + j], u = gate_up[r * 2 * inter + inter + j];
      want[r * inter + j] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  ExpectNear(Download(out), want, act_, "SiluMul");

  const std::vector<float> x = Random(rows * inter, 3.0f);
  for (ops::GeluForm form : {ops::GeluForm::kErf, ops::GeluForm::kTanh}) {
    const Tensor t = Act(x, {rows, inter});
    ops::Gelu(ctx_, t, form);
    Doubles gelu(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      gelu[i] = form == ops::GeluForm::kErf ? GeluErfRef(x[i]) : GeluTanhRef(x[i]);
    }
    ExpectNear(Download(t), gelu, act_, "Gelu");
  }
  const Tensor t = Act(x, {rows, inter});
  ops::Tanh(ctx_, t);
  Doubles tanh_want(x.size());
  for (size_t i = 0; i < x.size(); ++i) tanh_want[i] = std::tanh(double(x[i]));
  ExpectNear(Download(t), tanh_want, act_, "Tanh");
}

// ---- Attention --------------------------------------------------------------------------------

// Every backend of the device, on every head_dim it supports of 24 (CPU: any), 32, 64, 128.
TEST_P(OpTest, AttentionEveryBackendCausalAndBidirectionalWithGroupedHeads) {
  if (NeedsBf16()) GTEST_SKIP() << "CUDA attention takes bf16 activations";
  for (int64_t head_dim : {24, 32, 64, 128}) {
    if (device_ == Device::kCpu && head_dim > 24) break;  // the CPU kernels take any head_dim
    CheckAttention(head_dim);
  }
}

void OpTest::CheckAttention(int64_t head_dim) {
  // A zero-length sequence among them (bucket padding makes those).
  const std::vector<int32_t> lengths = {1, 9, 0, 130, 37};
  std::vector<int32_t> cu = {0};
  for (int32_t len : lengths) cu.push_back(cu.back() + len);
  const int64_t tokens = cu.back(), heads = 6, kv_heads = 2;
  const int64_t q_width = heads * head_dim, kv_width = kv_heads * head_dim;
  const int64_t width = q_width + 2 * kv_width;
  const std::vector<float> qkv = Random(tokens * width, 1.5f);
  const Tensor qkv_t = Act(qkv, {tokens, width});
  const Tensor device_cu = I32(cu, {static_cast<int64_t>(cu.size())});
  for (bool causal : {false, true}) {
    AttentionPlan plan;
    plan.cu_seqlens = cu.data();
    plan.device_cu_seqlens = device_cu.i32();
    plan.num_seqs = static_cast<int64_t>(lengths.size());
    plan.max_seqlen = 130;
    plan.num_heads = heads;
    plan.num_kv_heads = kv_heads;
    plan.head_dim = head_dim;
    plan.causal = causal;
    plan.scale = 1.0f / std::sqrt(float(head_dim));
    Doubles want(static_cast<size_t>(tokens * q_width));
    for (size_t s = 0; s < lengths.size(); ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kvh = h / (heads / kv_heads);
        for (int32_t i = cu[s]; i < cu[s + 1]; ++i) {
          const int32_t last = causal ? i : cu[s + 1] - 1;
          Doubles p;
          double max_score = -1e300;
          for (int32_t j = cu[s]; j <= last; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < head_dim; ++d) {
              dot += double(qkv[i * width + h * head_dim + d]) *
                     qkv[j * width + q_width + kvh * head_dim + d];
            }
            p.push_back(dot * plan.scale);
            max_score = std::max(max_score, p.back());
          }
          double sum = 0;
          for (double& v : p) sum += (v = std::exp(v - max_score));
          for (int64_t d = 0; d < head_dim; ++d) {
            double o = 0;
            for (int32_t j = cu[s]; j <= last; ++j) {
              o += p[j - cu[s]] / sum * qkv[j * width + q_width + kv_width + kvh * head_dim + d];
            }
            want[i * q_width + h * head_dim + d] = o;
          }
        }
      }
    }
    const std::vector<std::string_view> names = AttentionBackendNames(device_);
    ASSERT_FALSE(names.empty());
    for (std::string_view name : names) {
      auto backend = MakeAttentionBackend(device_, name);
      ASSERT_TRUE(backend.ok()) << backend.status();
      if (!(*backend)->Supports(head_dim)) continue;
      const Tensor out = ActOutput({tokens, q_width});
      ops::Attention(ctx_, **backend, plan, qkv_t.Columns(0, q_width),
                     qkv_t.Columns(q_width, q_width + kv_width),
                     qkv_t.Columns(q_width + kv_width, width), out);
      ExpectNear(Download(out), want, act_,
                 std::string(name) + (causal ? " causal" : " bidirectional") + " head_dim " +
                     std::to_string(head_dim));
    }
  }
}

// ---- Pooling and heads ------------------------------------------------------------------------

TEST_P(OpTest, PoolingClsMeanLastMaxAndSpans) {
  const int64_t tokens = 29, n = 21;
  const std::vector<float> hidden = Random(tokens * n);
  // Three sequences, then late-chunking spans inside them; as (begin, end) pairs, then as
  // (begin, end, origin) rows, where the last two leave out the first tokens of their sequence
  // (a prompt) and the weighted mean counts from the sequence's start.
  const std::vector<int32_t> pairs = {0, 1, 1, 12, 12, 29, 3, 9, 14, 15};
  const std::vector<int32_t> triples = {0, 1,  0,  1,  12, 1,  12, 29, 12, 3, 9,
                                        3, 14, 15, 14, 4,  12, 1,  20, 29, 12};
  for (const int64_t width : {2, 3}) {
    const std::vector<int32_t>& bounds = width == 2 ? pairs : triples;
    const int64_t rows = static_cast<int64_t>(bounds.size()) / width;
    const Tensor bounds_t(bounds.data(), DType::kI32, Device::kCpu, {rows, width});
    for (ops::PoolMode mode :
         {ops::PoolMode::kCls, ops::PoolMode::kMean, ops::PoolMode::kLastToken, ops::PoolMode::kMax,
          ops::PoolMode::kMeanSqrtLen, ops::PoolMode::kWeightedMean}) {
      const Tensor out = Output({rows, n});
      ops::Pool(ctx_, Act(hidden, {tokens, n}), bounds_t, mode, out, I32(bounds, {rows, width}));
      Doubles want(static_cast<size_t>(rows * n));
      for (int64_t r = 0; r < rows; ++r) {
        const int32_t begin = bounds[width * r], end = bounds[width * r + 1];
        const int32_t origin = width == 3 ? bounds[width * r + 2] : begin;
        double weights = 0;
        for (int32_t t = begin; t < end; ++t) weights += t - origin + 1;
        for (int64_t j = 0; j < n; ++j) {
          double v = mode == ops::PoolMode::kMax ? -1e300 : 0.0;
          for (int32_t t = begin; t < end; ++t) {
            const double x = hidden[t * n + j];
            const double len = end - begin;
            if (mode == ops::PoolMode::kMean) v += x / len;
            if (mode == ops::PoolMode::kMax) v = std::max(v, x);
            if (mode == ops::PoolMode::kMeanSqrtLen) v += x / std::sqrt(len);
            if (mode == ops::PoolMode::kWeightedMean) v += x * (t - origin + 1) / weights;
          }
          if (mode == ops::PoolMode::kCls) v = hidden[begin * n + j];
          if (mode == ops::PoolMode::kLastToken) v = hidden[(end - 1) * n + j];
          want[r * n + j] = v;
        }
      }
      ExpectNear(Download(out), want, act_,
                 "width " + std::to_string(width) + " mode " + std::to_string(int(mode)));
    }
  }
}

TEST_P(OpTest, ClassifierHeadAndLogitDifference) {
  if (NeedsBf16()) GTEST_SKIP() << "CUDA GEMMs take bf16 activations";
  const int64_t seqs = 5, hidden = 33, labels = 3;
  const std::vector<float> pooled = Random(seqs * hidden), dw = Random(hidden * hidden, 0.3f),
                           db = Random(hidden), ow = Random(labels * hidden), ob = Random(labels);
  const auto prepare = [&](const std::vector<float>& w, const std::vector<float>& b, int64_t out) {
    return ops::PrepareLinear(device_, Tensor(w.data(), DType::kF32, Device::kCpu, {out, hidden}),
                              F32(b, {out}));
  };
  const Tensor scores = Output({seqs, labels});
  ops::ClassifierHead(ctx_, Act(pooled, {seqs, hidden}), prepare(dw, db, hidden),
                      prepare(ow, ob, labels), ActOutput({seqs, hidden}), scores);
  Doubles dense = LinearRef(pooled, dw, db, seqs, hidden, hidden);
  std::vector<float> dense_f(dense.size());
  for (size_t i = 0; i < dense.size(); ++i) dense_f[i] = float(std::tanh(dense[i]));
  ExpectNear(Download(scores), LinearRef(dense_f, ow, ob, seqs, labels, hidden), act_,
             "ClassifierHead");

  const std::vector<float> yes = Random(hidden), no = Random(hidden);
  const Tensor diff = Output({seqs, 1});
  ops::LogitDifference(ctx_, F32(pooled, {seqs, hidden}), F32(yes, {hidden}), F32(no, {hidden}),
                       diff);
  Doubles want(static_cast<size_t>(seqs));
  for (int64_t s = 0; s < seqs; ++s) {
    for (int64_t j = 0; j < hidden; ++j) {
      want[s] += double(pooled[s * hidden + j]) * (double(yes[j]) - no[j]);
    }
  }
  ExpectNear(Download(diff), want, DType::kF32, "LogitDifference");
}

// ---- FormatOutput -----------------------------------------------------------------------------

TEST_P(OpTest, FormatOutputTruncatesNormalizesAndEncodes) {
  if (device_ != Device::kCpu) GTEST_SKIP() << "FormatOutput runs on the host for every device";
  const int64_t rows = 4, hidden = 30, dims = 19;
  const std::vector<float> pooled = Random(rows * hidden, 0.7f);
  const Tensor pooled_t = F32(pooled, {rows, hidden});
  for (bool normalize : {false, true}) {
    Doubles want(static_cast<size_t>(rows * dims));
    for (int64_t r = 0; r < rows; ++r) {
      double norm = 0;
      for (int64_t j = 0; j < dims; ++j)
        norm += double(pooled[r * hidden + j]) * pooled[r * hidden + j];
      for (int64_t j = 0; j < dims; ++j) {
        want[r * dims + j] = pooled[r * hidden + j] / (normalize ? std::sqrt(norm) : 1.0);
      }
    }
    for (ops::Encoding encoding :
         {ops::Encoding::kF32, ops::Encoding::kF16, ops::Encoding::kInt8, ops::Encoding::kBinary}) {
      const int64_t row_bytes = ops::EncodedRowBytes(encoding, dims);
      std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes), 0xAB);
      ops::FormatOutput(ctx_, pooled_t, dims, normalize, encoding,
                        Tensor(out.data(), DType::kU8, Device::kCpu, {rows, row_bytes}));
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = out.data() + r * row_bytes;
        for (int64_t j = 0; j < dims; ++j) {
          const double w = want[r * dims + j];
          switch (encoding) {
            case ops::Encoding::kF32: {
              float got;
              std::memcpy(&got, row + 4 * j, 4);
              EXPECT_NEAR(got, w, 2e-6 * std::max(1.0, std::abs(w)));
              break;
            }
            case ops::Encoding::kF16: {
              uint16_t h;
              std::memcpy(&h, row + 2 * j, 2);
              EXPECT_NEAR(HalfToFloat(h), w, std::abs(w) * std::ldexp(1.0, -11) + 1e-7);
              break;
            }
            case ops::Encoding::kInt8: {
              const double q = std::clamp(std::round(std::tanh(w) * 127.0), -128.0, 127.0);
              EXPECT_NEAR(static_cast<int8_t>(row[j]), q, 0.0) << w;
              break;
            }
            case ops::Encoding::kBinary:
              EXPECT_EQ((row[j / 8] >> (7 - j % 8)) & 1, w > 0 ? 1 : 0);
              break;
          }
        }
        if (encoding == ops::Encoding::kBinary) {
          EXPECT_EQ(row[row_bytes - 1] & ((1 << (8 * row_bytes - dims)) - 1), 0)
              << "padding bits past the last dimension are zero";
        }
      }
    }
  }
}

// ---- Checks -----------------------------------------------------------------------------------

TEST_P(OpTest, AShapeMismatchNamesTheOpTheOperandAndBothShapes) {
  const std::vector<float> w = Random(16 * 8);
  const ops::LinearWeights weights =
      ops::PrepareLinear(device_, Tensor(w.data(), DType::kF32, Device::kCpu, {16, 8}), {});
  try {
    ops::Linear(ctx_, Output({3, 9}), weights, Output({3, 16}));
    FAIL() << "a [3, 9] input to a [16, 8] Linear ran";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("ops::Linear"), std::string::npos) << message;
    EXPECT_NE(message.find("x is f32 [3, 9]"), std::string::npos) << message;
    EXPECT_NE(message.find("expected f32 [*, 8]"), std::string::npos) << message;
  }
}

// The last layer's rows that pooling reads (ForwardContext::output_rows): gathered, then
// scattered back over the same rows, the others untouched; a row outside the tensor is refused.
TEST(RowsOpsTest, GatherAndScatterRowsOnTheCpu) {
  ThreadPool pool(1);
  const ExecContext cpu{Device::kCpu, &pool};
  std::vector<float> all(5 * 3);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<float>(i);
  const std::vector<int32_t> rows = {4, 0, 2};
  const Tensor rows_t(rows.data(), DType::kI32, Device::kCpu, {3});
  std::vector<float> picked(3 * 3);
  ops::GatherRows(cpu, Tensor(all.data(), DType::kF32, Device::kCpu, {5, 3}), rows_t,
                  Tensor(picked.data(), DType::kF32, Device::kCpu, {3, 3}));
  EXPECT_EQ(picked, (std::vector<float>{12, 13, 14, 0, 1, 2, 6, 7, 8}));
  for (float& v : picked) v = -v - 1;
  std::vector<float> into(5 * 3, 100.0f);
  ops::ScatterRows(cpu, Tensor(picked.data(), DType::kF32, Device::kCpu, {3, 3}), rows_t,
                   Tensor(into.data(), DType::kF32, Device::kCpu, {5, 3}));
  EXPECT_EQ(into, (std::vector<float>{-1, -2, -3, 100, 100, 100, -7, -8, -9, 100, 100, 100, -13,
                                      -14, -15}));
  const std::vector<int32_t> outside = {1, 5};
  try {
    ops::GatherRows(cpu, Tensor(all.data(), DType::kF32, Device::kCpu, {5, 3}),
                    Tensor(outside.data(), DType::kI32, Device::kCpu, {2}),
                    Tensor(picked.data(), DType::kF32, Device::kCpu, {2, 3}));
    FAIL() << "row 5 of 5 was gathered";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("row 5 is not in [0, 5)"), std::string::npos) << e.what();
  }
}

std::string ParamName(const ::testing::TestParamInfo<OpParam>& info) {
  return std::string(DeviceName(info.param.device)) + "_" +
         std::string(DTypeShortName(info.param.act));
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, OpTest,
                         ::testing::Values(OpParam{Device::kCpu, DType::kF32},
                                           OpParam{Device::kCuda, DType::kF32},
                                           OpParam{Device::kCuda, DType::kBF16}),
                         ParamName);

}  // namespace
}  // namespace quiver::engine
