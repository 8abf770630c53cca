#include "engine/ops/linear.h"

#include <type_traits>

#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/attention.h"
#include "engine/ops/check.h"
#ifdef QUIVER_WITH_CUDA
#include <vector>

#include "engine/base/half.h"
#include "engine/kernels/cuda/blaslt.h"
#include "engine/kernels/cuda/kernels.h"
#include "engine/kernels/cuda/memory.h"
#include "engine/kernels/cuda/status.h"
#include "engine/ops/cuda.h"
#endif

namespace quiver::engine::ops {
namespace {

using internal::Check;
using internal::CheckContiguous;
using internal::CheckOptional;

struct CpuPackedLinear final : PreparedLinear {
  CpuPackedLinear(const float* w, int64_t n, int64_t k) : packed(w, n, k) {}
  cpu::PackedWeights packed;
};

struct CpuInt8Linear final : PreparedLinear {
  CpuInt8Linear(const float* w, int64_t n, int64_t k) : quantized(w, n, k) {}
  cpu::QuantizedWeights quantized;
};

struct CpuBf16Linear final : PreparedLinear {
  CpuBf16Linear(const float* w, int64_t n, int64_t k) : bf16(w, n, k) {}
  cpu::Bf16Weights bf16;
};

const cpu::Bf16Weights& CpuBf16(const LinearWeights& w) {
  return static_cast<const CpuBf16Linear&>(*w.prepared).bf16;
}

const cpu::PackedWeights& CpuPacked(const LinearWeights& w) {
  return static_cast<const CpuPackedLinear&>(*w.prepared).packed;
}

const cpu::QuantizedWeights& CpuQuantized(const LinearWeights& w) {
  return static_cast<const CpuInt8Linear&>(*w.prepared).quantized;
}

#ifdef QUIVER_WITH_CUDA
// CUDA: the weight in bf16 [out, in], uploaded once (cuBLASLt reads it as is), and the bias in
// bf16 for bf16 outputs (the f32 bias tensor serves f32 outputs).
struct CudaLinear final : PreparedLinear {
  cuda::DeviceBuffer weight;
  cuda::DeviceBuffer bias_bf16;
};

std::shared_ptr<const PreparedLinear> PrepareCuda(const Tensor& weight, const Tensor& bias) {
  auto prepared = std::make_shared<CudaLinear>();
  const int64_t n = weight.dim(0), k = weight.dim(1);
  std::vector<uint16_t> host(static_cast<size_t>(n * k));
  for (size_t i = 0; i < host.size(); ++i) host[i] = FloatToBf16(weight.f32()[i]);
  auto check = [](const absl::Status& s) { internal::CheckStatus("PrepareLinear", s); };
  absl::StatusOr<cuda::DeviceBuffer> w = cuda::DeviceBuffer::Allocate(host.size() * 2);
  check(w.status());
  prepared->weight = *std::move(w);
  check(cuda::CudaStatus(
      cudaMemcpy(prepared->weight.data(), host.data(), host.size() * 2, cudaMemcpyHostToDevice),
      "cudaMemcpy (weight upload)"));
  // From pageable memory cudaMemcpy may return before the copy landed, and the compute streams
  // do not wait for the legacy stream: wait here (load time, not the serving path).
  check(cuda::CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  if (!bias.empty()) {
    absl::StatusOr<cuda::DeviceBuffer> b = cuda::DeviceBuffer::Allocate(size_t(n) * 2);
    check(b.status());
    prepared->bias_bf16 = *std::move(b);
    // The legacy default stream, then a wait: load time, not the serving path.
    internal::CheckLaunch("PrepareLinear",
                          cuda::F32ToBf16(bias.f32(), prepared->bias_bf16.data(), n, nullptr));
    check(cuda::CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  }
  return prepared;
}

const CudaLinear& CudaPrepared(const LinearWeights& w) {
  return static_cast<const CudaLinear&>(*w.prepared);
}

// y (bf16 or f32) = epilogue(x · Wᵀ + bias) (+ c, of y's type) for bf16 x, on ctx's stream.
// cuBLASLt fuses the bias and the tanh GELU; erf GELU (BERT's exact "gelu") runs as its own
// kernel after the product, since cuBLASLt has no erf form.
void CudaLinearRun(std::string_view op, const ExecContext& ctx, const Tensor& x,
                   const LinearWeights& w, const Tensor& y, Epilogue epilogue, const void* c) {
  if (x.dtype() != DType::kBF16) {
    internal::Fail(op, StrCat("x is ", x.Describe(), "; CUDA GEMMs take bf16 activations"));
  }
  const CudaLinear& p = CudaPrepared(w);
  cuda::DeviceContext& dc = internal::CudaOf(op, ctx);
  const bool y_f32 = y.dtype() == DType::kF32;
  const bool has_bias = !w.bias.empty();
  if (has_bias && !y_f32 && p.bias_bf16.data() == nullptr) {
    internal::Fail(op,
                   "the bias was set after PrepareLinear: its bf16 copy is missing (give it "
                   "to PrepareLinear)");
  }
  cuda::GemmArgs g;
  g.x = x.data<void>();
  g.w = p.weight.data();
  g.bias =
      has_bias ? (y_f32 ? static_cast<const void*>(w.bias.f32()) : p.bias_bf16.data()) : nullptr;
  g.c = c;
  g.y = y.data<void>();
  g.y_f32 = y_f32;
  g.m = x.dim(0);
  g.n = w.out_features;
  g.k = w.in_features;
  g.ldx = g.k;
  g.ldw = g.k;
  g.ldy = g.n;
  g.epilogue = has_bias ? cuda::GemmEpilogue::kBias : cuda::GemmEpilogue::kNone;
  cuda::Activation after = cuda::Activation::kIdentity;
  if (epilogue == Epilogue::kGeluTanh) {
    if (has_bias) {
      g.epilogue = cuda::GemmEpilogue::kBiasGeluTanh;
    } else {
      after = cuda::Activation::kGeluTanh;
    }
  } else if (epilogue == Epilogue::kGeluErf) {
    after = cuda::Activation::kGeluErf;
  }
  internal::CheckStatus(op, dc.blas().Gemm(g, dc.stream()));
  if (after != cuda::Activation::kIdentity) {
    internal::CheckLaunch(op, cuda::BiasActivation(y.data<void>(), g.n, nullptr, after, g.m, g.n,
                                                   y.dtype(), dc.stream()));
  }
}
#endif

void CheckWeights(std::string_view op, const ExecContext& ctx, const LinearWeights& w) {
  if (w.device != ctx.device || !w.ready()) {
    internal::Fail(op, StrCat("weights [", w.out_features, ", ", w.in_features, "] are ",
                              w.ready() ? "for device " : "not prepared for device ",
                              DeviceName(w.device), ", the call runs on ", DeviceName(ctx.device)));
  }
}

}  // namespace

const char* WeightPrecisionName(WeightPrecision p) {
  switch (p) {
    case WeightPrecision::kInt8:
      return "int8";
    case WeightPrecision::kBf16:
      return "bf16";
    default:
      return "f32";
  }
}

bool WeightPrecisionSupported(Device device, WeightPrecision p) {
  if (p == WeightPrecision::kF32) return true;
  if (device != Device::kCpu) return false;
  return p == WeightPrecision::kInt8 || cpu::Bf16Supported();
}

bool Bf16AttentionProducts(Device device, WeightPrecision weights) {
  return device == Device::kCpu && weights != WeightPrecision::kF32 &&
         WeightPrecisionSupported(device, WeightPrecision::kBf16) && cpu::Bf16ProductsFast();
}

bool Int16AttentionProducts(Device device, WeightPrecision weights) {
  return device == Device::kCpu && weights != WeightPrecision::kF32 &&
         !Bf16AttentionProducts(device, weights) && cpu::Int16ProductsSupported();
}

LinearWeights PrepareLinear(Device device, Tensor weight, Tensor bias, WeightPrecision precision) {
  const ExecContext host{Device::kCpu, nullptr};
  Check("PrepareLinear", "weight", host, weight, DType::kF32, {-1, -1});
  LinearWeights w;
  w.out_features = weight.dim(0);
  w.in_features = weight.dim(1);
  w.device = device;
  CheckContiguous("PrepareLinear", "weight", host, weight, DType::kF32, {-1, -1});
  CheckOptional("PrepareLinear", "bias", ExecContext{device, nullptr}, bias, DType::kF32,
                {w.out_features});
  w.bias = bias;
  w.precision = precision;
  if (precision != WeightPrecision::kF32 && device != Device::kCpu) {
    internal::Fail("PrepareLinear",
                   StrCat(WeightPrecisionName(precision), " weights run on the CPU only, not on ",
                          DeviceName(device)));
  }
  if (precision == WeightPrecision::kInt8 && w.in_features > cpu::QuantizedWeights::kMaxDepth) {
    internal::Fail("PrepareLinear",
                   StrCat("int8 weights take at most ", cpu::QuantizedWeights::kMaxDepth,
                          " input features (their int32 sums would overflow); this layer has ",
                          w.in_features));
  }
  if (precision == WeightPrecision::kBf16 && !cpu::Bf16Supported()) {
    internal::Fail("PrepareLinear", "bf16 weights need AVX512_BF16 and the avx512 path or above");
  }
  switch (device) {
    case Device::kCpu:
      if (precision == WeightPrecision::kInt8) {
        w.prepared = std::make_shared<CpuInt8Linear>(weight.f32(), w.out_features, w.in_features);
      } else if (precision == WeightPrecision::kBf16) {
        w.prepared = std::make_shared<CpuBf16Linear>(weight.f32(), w.out_features, w.in_features);
      } else {
        w.prepared = std::make_shared<CpuPackedLinear>(weight.f32(), w.out_features, w.in_features);
      }
      return w;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      w.prepared = PrepareCuda(weight, bias);
      return w;
#endif
      internal::NoKernel("PrepareLinear", ExecContext{device, nullptr});
  }
  return w;
}

void Linear(const ExecContext& ctx, const Tensor& x, const LinearWeights& w, const Tensor& y,
            Epilogue epilogue, const Tensor& residual) {
  CheckWeights("Linear", ctx, w);
  // CPU: all f32. CUDA: x bf16; y (and residual) bf16 or f32.
  CheckContiguous("Linear", "x", ctx, x, internal::ActDType("Linear", "x", ctx, x),
                  {-1, w.in_features});
  const int64_t num_tokens = x.dim(0);
  const DType y_dtype = internal::ActDType("Linear", "y", ctx, y);
  CheckContiguous("Linear", "y", ctx, y, y_dtype, {num_tokens, w.out_features});
  internal::CheckDisjoint("Linear", "x", x, "y", y);
  if (epilogue == Epilogue::kResidual) {
    CheckContiguous("Linear", "residual", ctx, residual, y_dtype, {num_tokens, w.out_features});
    internal::CheckDisjoint("Linear", "residual", residual, "y", y);
  }
  const float* bias = w.bias.empty() ? nullptr : w.bias.f32();
  switch (ctx.device) {
    case Device::kCpu:
      if (w.precision == WeightPrecision::kInt8) {
        cpu::Linear(*ctx.pool, x.f32(), CpuQuantized(w), bias, y.f32(), num_tokens, epilogue,
                    residual.empty() ? nullptr : residual.f32());
      } else if (w.precision == WeightPrecision::kBf16) {
        cpu::Linear(*ctx.pool, x.f32(), CpuBf16(w), bias, y.f32(), num_tokens, epilogue,
                    residual.empty() ? nullptr : residual.f32());
      } else {
        cpu::Linear(*ctx.pool, x.f32(), CpuPacked(w), bias, y.f32(), num_tokens, epilogue,
                    residual.empty() ? nullptr : residual.f32());
      }
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      CudaLinearRun("Linear", ctx, x, w, y, epilogue,
                    epilogue == Epilogue::kResidual ? residual.data<void>() : nullptr);
      return;
#endif
      internal::NoKernel("Linear", ctx);
  }
}

void LinearAddLayerNorm(const ExecContext& ctx, const Tensor& x, const LinearWeights& w,
                        const Tensor& io, const Tensor& gamma, const Tensor& beta, float eps,
                        const Tensor& scratch, const Tensor& normed) {
  CheckWeights("LinearAddLayerNorm", ctx, w);
  // CUDA: x bf16 (the GEMM's input); io, scratch and the norm weights f32 as on the CPU.
  CheckContiguous("LinearAddLayerNorm", "x", ctx, x,
                  internal::ActDType("LinearAddLayerNorm", "x", ctx, x), {-1, w.in_features});
  const int64_t num_tokens = x.dim(0), n = w.out_features;
  CheckContiguous("LinearAddLayerNorm", "io", ctx, io, DType::kF32, {num_tokens, n});
  Check("LinearAddLayerNorm", "gamma", ctx, gamma, DType::kF32, {n});
  Check("LinearAddLayerNorm", "beta", ctx, beta, DType::kF32, {n});
  const DType scratch_dtype = internal::ActDType("LinearAddLayerNorm", "scratch", ctx, scratch);
  CheckContiguous("LinearAddLayerNorm", "scratch", ctx, scratch, scratch_dtype, {num_tokens, n});
  if (!normed.empty()) {
    if (ctx.device == Device::kCpu) {
      internal::Fail("LinearAddLayerNorm", "normed is a CUDA output (the CPU reads io itself)");
    }
    CheckContiguous("LinearAddLayerNorm", "normed", ctx, normed, scratch_dtype, {num_tokens, n});
    internal::CheckDisjoint("LinearAddLayerNorm", "normed", normed, "io", io);
  }
  internal::CheckDisjoint("LinearAddLayerNorm", "x", x, "io", io);
  internal::CheckDisjoint("LinearAddLayerNorm", "x", x, "scratch", scratch);
  internal::CheckDisjoint("LinearAddLayerNorm", "io", io, "scratch", scratch);
  switch (ctx.device) {
    case Device::kCpu:
      if (w.precision == WeightPrecision::kInt8) {
        cpu::LinearAddLayerNorm(*ctx.pool, x.f32(), CpuQuantized(w),
                                w.bias.empty() ? nullptr : w.bias.f32(), io.f32(), gamma.f32(),
                                beta.f32(), scratch.f32(), num_tokens, eps);
      } else if (w.precision == WeightPrecision::kBf16) {
        cpu::LinearAddLayerNorm(*ctx.pool, x.f32(), CpuBf16(w),
                                w.bias.empty() ? nullptr : w.bias.f32(), io.f32(), gamma.f32(),
                                beta.f32(), scratch.f32(), num_tokens, eps);
      } else {
        cpu::LinearAddLayerNorm(*ctx.pool, x.f32(), CpuPacked(w),
                                w.bias.empty() ? nullptr : w.bias.f32(), io.f32(), gamma.f32(),
                                beta.f32(), scratch.f32(), num_tokens, eps);
      }
      return;
    case Device::kCuda: {
#ifdef QUIVER_WITH_CUDA
      CudaLinearRun("LinearAddLayerNorm", ctx, x, w, scratch, Epilogue::kNone, nullptr);
      cuda::AddNormArgs a =
          internal::AddNormOver(io.f32(), scratch.data<void>(), cuda::NormKind::kLayerNorm,
                                gamma.f32(), beta.f32(), eps, num_tokens, n, scratch_dtype);
      a.store_normed_in_residual = true;
      a.normed = normed.empty() ? nullptr : normed.data<void>();
      internal::LaunchAddNorm("LinearAddLayerNorm", ctx, a);
      return;
#endif
      internal::NoKernel("LinearAddLayerNorm", ctx);
    }
  }
}

namespace {

// The checks Linear and LinearAddLayerNorm make of FeedForwardAddLayerNorm's fused form, once.
void CheckFeedForward(const ExecContext& ctx, const LinearWeights& up, const LinearWeights& down,
                      const Tensor& io, const Tensor& gamma, const Tensor& beta,
                      const Tensor& inter, const Tensor& scratch,
                      const AttentionOutputArgs* first) {
  CheckWeights("FeedForwardAddLayerNorm", ctx, up);
  CheckWeights("FeedForwardAddLayerNorm", ctx, down);
  const int64_t num_tokens = io.dim(0), n = down.out_features;
  if (up.in_features != n || down.in_features != up.out_features) {
    internal::Fail("FeedForwardAddLayerNorm",
                   StrCat("up [", up.out_features, ", ", up.in_features, "] and down [", n, ", ",
                          down.in_features, "] do not chain"));
  }
  CheckContiguous("FeedForwardAddLayerNorm", "io", ctx, io, DType::kF32, {num_tokens, n});
  CheckContiguous("FeedForwardAddLayerNorm", "inter", ctx, inter, DType::kF32,
                  {num_tokens, up.out_features});
  CheckContiguous("FeedForwardAddLayerNorm", "scratch", ctx, scratch, DType::kF32, {num_tokens, n});
  Check("FeedForwardAddLayerNorm", "gamma", ctx, gamma, DType::kF32, {n});
  Check("FeedForwardAddLayerNorm", "beta", ctx, beta, DType::kF32, {n});
  internal::CheckDisjoint("FeedForwardAddLayerNorm", "io", io, "inter", inter);
  internal::CheckDisjoint("FeedForwardAddLayerNorm", "io", io, "scratch", scratch);
  internal::CheckDisjoint("FeedForwardAddLayerNorm", "inter", inter, "scratch", scratch);
  if (first != nullptr) {
    const LinearWeights& o = *first->o;
    CheckWeights("FeedForwardAddLayerNorm", ctx, o);
    if (o.out_features != n) {
      internal::Fail("FeedForwardAddLayerNorm",
                     StrCat("first->o [", o.out_features, ", ", o.in_features, "] does not give [",
                            n, "] rows"));
    }
    CheckContiguous("FeedForwardAddLayerNorm", "first->attended", ctx, first->attended, DType::kF32,
                    {num_tokens, o.in_features});
    Check("FeedForwardAddLayerNorm", "first->gamma", ctx, first->gamma, DType::kF32, {n});
    Check("FeedForwardAddLayerNorm", "first->beta", ctx, first->beta, DType::kF32, {n});
    internal::CheckDisjoint("FeedForwardAddLayerNorm", "first->attended", first->attended, "io",
                            io);
    internal::CheckDisjoint("FeedForwardAddLayerNorm", "first->attended", first->attended,
                            "scratch", scratch);
    internal::CheckDisjoint("FeedForwardAddLayerNorm", "first->attended", first->attended, "inter",
                            inter);
  }
}

}  // namespace

void FeedForwardAddLayerNorm(const ExecContext& ctx, const Tensor& x, const LinearWeights& up,
                             Epilogue epilogue, const LinearWeights& down, const Tensor& io,
                             const Tensor& gamma, const Tensor& beta, float eps,
                             const Tensor& inter, const Tensor& scratch, const Tensor& normed,
                             const AttentionOutputArgs* first) {
  if (epilogue == Epilogue::kResidual) {
    internal::Fail("FeedForwardAddLayerNorm", "the up projection's epilogue cannot be kResidual");
  }
  if (first != nullptr && first->o == nullptr) {
    internal::Fail("FeedForwardAddLayerNorm", "first->o is null");
  }
  const WeightPrecision precision = up.precision;
  const bool fused =
      ctx.device == Device::kCpu && down.precision == precision && normed.empty() && up.ready() &&
      down.ready() && x.data<void>() == io.data<void>() &&
      (first == nullptr || (first->o->precision == precision && first->o->ready())) &&
      cpu::FeedForwardIsFused(*ctx.pool, x.dim(0));
  if (!fused) {
    if (first != nullptr) {
      LinearAddLayerNorm(ctx, first->attended, *first->o, io, first->gamma, first->beta, eps,
                         scratch, normed);
    }
    Linear(ctx, x, up, inter, epilogue);
    LinearAddLayerNorm(ctx, inter, down, io, gamma, beta, eps, scratch, normed);
    return;
  }
  CheckFeedForward(ctx, up, down, io, gamma, beta, inter, scratch, first);
  const int64_t num_tokens = io.dim(0);
  // The kernel for the weights' form, with the output projection's arguments in its terms.
  const auto run = [&](const auto& up_w, const auto& down_w, const auto* o_w) {
    using Weights = std::remove_cv_t<std::remove_reference_t<decltype(up_w)>>;
    cpu::AttentionOutputOf<Weights> attention_output{};
    if (first != nullptr) {
      attention_output = {first->attended.f32(), o_w,
                          first->o->bias.empty() ? nullptr : first->o->bias.f32(),
                          first->gamma.f32(), first->beta.f32()};
    }
    cpu::FeedForwardAddLayerNorm(
        *ctx.pool, io.f32(), up_w, up.bias.empty() ? nullptr : up.bias.f32(), epilogue, down_w,
        down.bias.empty() ? nullptr : down.bias.f32(), gamma.f32(), beta.f32(), num_tokens, eps,
        first != nullptr ? &attention_output : nullptr);
  };
  switch (precision) {
    case WeightPrecision::kInt8:
      run(CpuQuantized(up), CpuQuantized(down),
          first != nullptr ? &CpuQuantized(*first->o) : nullptr);
      return;
    case WeightPrecision::kBf16:
      run(CpuBf16(up), CpuBf16(down), first != nullptr ? &CpuBf16(*first->o) : nullptr);
      return;
    case WeightPrecision::kF32:
      run(CpuPacked(up), CpuPacked(down), first != nullptr ? &CpuPacked(*first->o) : nullptr);
      return;
  }
}

namespace {

// Whether w gives q, k and v columns for the plan (refused otherwise).
void CheckQkvWidth(const LinearWeights& w, const AttentionPlan& plan) {
  const int64_t q_width = plan.num_heads * plan.head_dim;
  const int64_t kv_width = plan.num_kv_heads * plan.head_dim;
  if (w.out_features != q_width + 2 * kv_width) {
    internal::Fail("QkvAttention",
                   StrCat("weights [", w.out_features, ", ", w.in_features, "] do not give q (",
                          q_width, ") and k, v (", kv_width, " each) columns"));
  }
}

// Whether the flash backend on the CPU takes the plan with w's weights (QkvAttention's fused
// forms).
bool CpuFlash(const ExecContext& ctx, const LinearWeights& w, const AttentionBackend& backend,
              const AttentionPlan& plan) {
  return ctx.device == Device::kCpu && w.ready() && backend.device() == Device::kCpu &&
         backend.name() == "flash" && plan.num_seqs > 0 && plan.num_kv_heads > 0 &&
         plan.num_heads % plan.num_kv_heads == 0;
}

// The checks Linear and Attention make of QkvAttention's fused forms, once.
void CheckQkvAttention(const ExecContext& ctx, const Tensor& x, const LinearWeights& w,
                       const Tensor& qkv, const AttentionPlan& plan, const Tensor& out) {
  CheckWeights("QkvAttention", ctx, w);
  const int64_t num_tokens = plan.cu_seqlens[plan.num_seqs];
  CheckContiguous("QkvAttention", "x", ctx, x, DType::kF32, {num_tokens, w.in_features});
  CheckContiguous("QkvAttention", "qkv", ctx, qkv, DType::kF32, {num_tokens, w.out_features});
  CheckContiguous("QkvAttention", "out", ctx, out, DType::kF32,
                  {num_tokens, plan.num_heads * plan.head_dim});
  internal::CheckDisjoint("QkvAttention", "x", x, "qkv", qkv);
  internal::CheckDisjoint("QkvAttention", "out", out, "qkv", qkv);
  internal::CheckDisjoint("QkvAttention", "out", out, "x", x);
}

}  // namespace

void QkvAttention(const ExecContext& ctx, const Tensor& x, const LinearWeights& w,
                  const Tensor& qkv, const AttentionBackend& backend, const AttentionPlan& plan,
                  const Tensor& out) {
  CheckQkvWidth(w, plan);
  const int64_t q_width = plan.num_heads * plan.head_dim;
  const int64_t kv_width = plan.num_kv_heads * plan.head_dim;
  const bool cpu_flash = CpuFlash(ctx, w, backend, plan);
  const bool fused = cpu_flash && cpu::QkvAttentionIsFused(*ctx.pool, plan);
  const bool by_heads = cpu_flash && !fused && w.precision == WeightPrecision::kF32 &&
                        cpu::QkvAttentionByHeadsFits(*ctx.pool, plan);
  if (!fused && !by_heads) {
    Linear(ctx, x, w, qkv);
    Attention(ctx, backend, plan, qkv.Columns(0, q_width), qkv.Columns(q_width, q_width + kv_width),
              qkv.Columns(q_width + kv_width, q_width + 2 * kv_width), out);
    return;
  }
  CheckQkvAttention(ctx, x, w, qkv, plan, out);
  const float* bias = w.bias.empty() ? nullptr : w.bias.f32();
  if (by_heads) {
    cpu::QkvAttentionByHeads(*ctx.pool, x.f32(), CpuPacked(w), bias, plan, out.f32());
    return;
  }
  switch (w.precision) {
    case WeightPrecision::kInt8:
      cpu::QkvAttention(*ctx.pool, x.f32(), CpuQuantized(w), bias, qkv.f32(), plan, out.f32());
      return;
    case WeightPrecision::kBf16:
      cpu::QkvAttention(*ctx.pool, x.f32(), CpuBf16(w), bias, qkv.f32(), plan, out.f32());
      return;
    case WeightPrecision::kF32:
      cpu::QkvAttention(*ctx.pool, x.f32(), CpuPacked(w), bias, qkv.f32(), plan, out.f32());
      return;
  }
}

void PostLnLayer(const ExecContext& ctx, const Tensor& x, const PostLnLayerArgs& l,
                 const AttentionBackend& backend, const AttentionPlan& plan, float eps,
                 const Tensor& qkv, const Tensor& attended, const Tensor& inter,
                 const Tensor& scratch) {
  const AttentionOutputArgs first{attended, l.o, l.ln1_gamma, l.ln1_beta};
  CheckQkvWidth(*l.qkv, plan);
  // int8 only: f32 and bf16 ran slower so (kernels/cpu/kernels.h, PostLnLayerBySequence).
  const auto int8 = [](const LinearWeights* w) {
    return w->precision == WeightPrecision::kInt8 && w->ready();
  };
  const bool fused = int8(l.qkv) && int8(l.o) && int8(l.up) && int8(l.down) &&
                     CpuFlash(ctx, *l.qkv, backend, plan) && l.epilogue != Epilogue::kResidual &&
                     cpu::PostLnLayerBySequenceFits(*ctx.pool, plan, l.qkv->out_features);
  if (!fused) {
    QkvAttention(ctx, x, *l.qkv, qkv, backend, plan, attended);
    FeedForwardAddLayerNorm(ctx, x, *l.up, l.epilogue, *l.down, x, l.ln2_gamma, l.ln2_beta, eps,
                            inter, scratch, {}, &first);
    return;
  }
  CheckQkvAttention(ctx, x, *l.qkv, qkv, plan, attended);
  CheckFeedForward(ctx, *l.up, *l.down, x, l.ln2_gamma, l.ln2_beta, inter, scratch, &first);
  const auto bias = [](const LinearWeights* w) {
    return w->bias.empty() ? nullptr : w->bias.f32();
  };
  const cpu::PostLnLayer layer{&CpuQuantized(*l.qkv),
                               bias(l.qkv),
                               &CpuQuantized(*l.o),
                               bias(l.o),
                               l.ln1_gamma.f32(),
                               l.ln1_beta.f32(),
                               &CpuQuantized(*l.up),
                               bias(l.up),
                               l.epilogue,
                               &CpuQuantized(*l.down),
                               bias(l.down),
                               l.ln2_gamma.f32(),
                               l.ln2_beta.f32()};
  cpu::PostLnLayerBySequence(*ctx.pool, x.f32(), layer, plan, eps);
}

}  // namespace quiver::engine::ops
