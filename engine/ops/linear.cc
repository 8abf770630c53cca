#include "engine/ops/linear.h"

#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"

namespace quiver::engine::ops {
namespace {

using internal::Check;
using internal::CheckContiguous;
using internal::CheckOptional;

struct CpuPackedLinear final : PreparedLinear {
  CpuPackedLinear(const float* w, int64_t n, int64_t k) : packed(w, n, k) {}
  cpu::PackedWeights packed;
};

const cpu::PackedWeights& CpuPacked(const LinearWeights& w) {
  return static_cast<const CpuPackedLinear&>(*w.prepared).packed;
}

void CheckWeights(std::string_view op, const ExecContext& ctx, const LinearWeights& w) {
  if (w.device != ctx.device || !w.ready()) {
    internal::Fail(op, StrCat("weights [", w.out_features, ", ", w.in_features, "] are ",
                              w.ready() ? "for device " : "not prepared for device ",
                              DeviceName(w.device), ", the call runs on ", DeviceName(ctx.device)));
  }
}

}  // namespace

LinearWeights PrepareLinear(Device device, Tensor weight, Tensor bias) {
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
  switch (device) {
    case Device::kCpu:
      w.prepared = std::make_shared<CpuPackedLinear>(weight.f32(), w.out_features, w.in_features);
      return w;
    case Device::kCuda:
      internal::NoKernel("PrepareLinear", ExecContext{device, nullptr});
  }
  return w;
}

void Linear(const ExecContext& ctx, const Tensor& x, const LinearWeights& w, const Tensor& y,
            Epilogue epilogue, const Tensor& residual) {
  CheckWeights("Linear", ctx, w);
  CheckContiguous("Linear", "x", ctx, x, DType::kF32, {-1, w.in_features});
  const int64_t num_tokens = x.dim(0);
  CheckContiguous("Linear", "y", ctx, y, DType::kF32, {num_tokens, w.out_features});
  internal::CheckDisjoint("Linear", "x", x, "y", y);
  if (epilogue == Epilogue::kResidual) {
    CheckContiguous("Linear", "residual", ctx, residual, DType::kF32, {num_tokens, w.out_features});
    internal::CheckDisjoint("Linear", "residual", residual, "y", y);
  }
  const float* bias = w.bias.empty() ? nullptr : w.bias.f32();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::Linear(*ctx.pool, x.f32(), CpuPacked(w), bias, y.f32(), num_tokens, epilogue,
                  residual.empty() ? nullptr : residual.f32());
      return;
    case Device::kCuda:
      internal::NoKernel("Linear", ctx);
  }
}

void LinearAddLayerNorm(const ExecContext& ctx, const Tensor& x, const LinearWeights& w,
                        const Tensor& io, const Tensor& gamma, const Tensor& beta, float eps,
                        const Tensor& scratch) {
  CheckWeights("LinearAddLayerNorm", ctx, w);
  CheckContiguous("LinearAddLayerNorm", "x", ctx, x, DType::kF32, {-1, w.in_features});
  const int64_t num_tokens = x.dim(0), n = w.out_features;
  CheckContiguous("LinearAddLayerNorm", "io", ctx, io, DType::kF32, {num_tokens, n});
  Check("LinearAddLayerNorm", "gamma", ctx, gamma, DType::kF32, {n});
  Check("LinearAddLayerNorm", "beta", ctx, beta, DType::kF32, {n});
  CheckContiguous("LinearAddLayerNorm", "scratch", ctx, scratch, DType::kF32, {num_tokens, n});
  internal::CheckDisjoint("LinearAddLayerNorm", "x", x, "io", io);
  internal::CheckDisjoint("LinearAddLayerNorm", "x", x, "scratch", scratch);
  internal::CheckDisjoint("LinearAddLayerNorm", "io", io, "scratch", scratch);
  switch (ctx.device) {
    case Device::kCpu:
      cpu::LinearAddLayerNorm(*ctx.pool, x.f32(), CpuPacked(w),
                              w.bias.empty() ? nullptr : w.bias.f32(), io.f32(), gamma.f32(),
                              beta.f32(), scratch.f32(), num_tokens, eps);
      return;
    case Device::kCuda:
      internal::NoKernel("LinearAddLayerNorm", ctx);
  }
}

}  // namespace quiver::engine::ops
