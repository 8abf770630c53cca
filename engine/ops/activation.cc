#include "engine/ops/activation.h"

#include <cstring>

#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"
#ifdef QUIVER_WITH_CUDA
#include "engine/kernels/cuda/kernels.h"
#include "engine/ops/cuda.h"
#endif

namespace quiver::engine::ops {

void SiluMul(const ExecContext& ctx, const Tensor& gate_up, const Tensor& out) {
  const DType act = internal::ActDType("SiluMul", "gate_up", ctx, gate_up);
  internal::CheckContiguous("SiluMul", "gate_up", ctx, gate_up, act, {-1, -1});
  const int64_t rows = gate_up.dim(0), inter = gate_up.dim(1) / 2;
  if (gate_up.dim(1) % 2 != 0) internal::Fail("SiluMul", "gate_up's width must be even");
  internal::CheckContiguous("SiluMul", "out", ctx, out, act, {rows, inter});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::SiluMul(gate_up.f32(), out.f32(), rows, inter);
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch(
          "SiluMul", cuda::SiluMul(gate_up.data<void>(), 2 * inter, out.data<void>(), inter, rows,
                                   inter, act, internal::StreamOf("SiluMul", ctx)));
      return;
#endif
      internal::NoKernel("SiluMul", ctx);
  }
}

void GeluMul(const ExecContext& ctx, const Tensor& gate_up, const Tensor& out, GeluForm form) {
  const DType act = internal::ActDType("GeluMul", "gate_up", ctx, gate_up);
  internal::CheckContiguous("GeluMul", "gate_up", ctx, gate_up, act, {-1, -1});
  const int64_t rows = gate_up.dim(0), inter = gate_up.dim(1) / 2;
  if (gate_up.dim(1) % 2 != 0) internal::Fail("GeluMul", "gate_up's width must be even");
  internal::CheckContiguous("GeluMul", "out", ctx, out, act, {rows, inter});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::GeluMul(gate_up.f32(), out.f32(), rows, inter, form == GeluForm::kTanh);
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch(
          "GeluMul",
          cuda::GatedActivation(
              gate_up.data<void>(), 2 * inter, out.data<void>(), inter, rows, inter,
              form == GeluForm::kErf ? cuda::Activation::kGeluErf : cuda::Activation::kGeluTanh,
              act, internal::StreamOf("GeluMul", ctx)));
      return;
#endif
      internal::NoKernel("GeluMul", ctx);
  }
}

void Gelu(const ExecContext& ctx, const Tensor& x, GeluForm form) {
  const DType act = internal::ActDType("Gelu", "x", ctx, x);
  internal::CheckContiguous("Gelu", "x", ctx, x, act, {-1, -1});
  switch (ctx.device) {
    case Device::kCpu:
      (form == GeluForm::kErf ? cpu::GeluErf : cpu::GeluTanh)(x.f32(), x.numel());
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch(
          "Gelu", cuda::BiasActivation(x.data<void>(), x.dim(1), nullptr,
                                       form == GeluForm::kErf ? cuda::Activation::kGeluErf
                                                              : cuda::Activation::kGeluTanh,
                                       x.dim(0), x.dim(1), act, internal::StreamOf("Gelu", ctx)));
      return;
#endif
      internal::NoKernel("Gelu", ctx);
  }
}

void Tanh(const ExecContext& ctx, const Tensor& x) {
  const DType act = internal::ActDType("Tanh", "x", ctx, x);
  internal::CheckContiguous("Tanh", "x", ctx, x, act, {-1, -1});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::Tanh(x.f32(), x.numel());
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch(
          "Tanh", cuda::BiasActivation(x.data<void>(), x.dim(1), nullptr, cuda::Activation::kTanh,
                                       x.dim(0), x.dim(1), act, internal::StreamOf("Tanh", ctx)));
      return;
#endif
      internal::NoKernel("Tanh", ctx);
  }
}

void Relu(const ExecContext& ctx, const Tensor& x) {
  const DType act = internal::ActDType("Relu", "x", ctx, x);
  internal::CheckContiguous("Relu", "x", ctx, x, act, {-1, -1});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::Relu(x.f32(), x.numel());
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch(
          "Relu", cuda::BiasActivation(x.data<void>(), x.dim(1), nullptr, cuda::Activation::kRelu,
                                       x.dim(0), x.dim(1), act, internal::StreamOf("Relu", ctx)));
      return;
#endif
      internal::NoKernel("Relu", ctx);
  }
}

void Convert(const ExecContext& ctx, const Tensor& in, const Tensor& out) {
  const DType in_dtype = internal::ActDType("Convert", "in", ctx, in);
  internal::Check("Convert", "in", ctx, in, in_dtype, {-1, -1});
  const int64_t rows = in.dim(0), n = in.dim(1);
  const DType out_dtype = internal::ActDType("Convert", "out", ctx, out);
  internal::CheckContiguous("Convert", "out", ctx, out, out_dtype, {rows, n});
  internal::CheckDisjoint("Convert", "in", in, "out", out);
  switch (ctx.device) {
    case Device::kCpu:
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(out.f32() + r * n, in.f32() + r * in.row_stride(), sizeof(float) * n);
      }
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch(
          "Convert", cuda::CopyRows(in.data<void>(), in.row_stride(), in_dtype, out.data<void>(), n,
                                    out_dtype, rows, n, internal::StreamOf("Convert", ctx)));
      return;
#endif
      internal::NoKernel("Convert", ctx);
  }
}

}  // namespace quiver::engine::ops
