#include "engine/ops/activation.h"

#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"

namespace quiver::engine::ops {

void SiluMul(const ExecContext& ctx, const Tensor& gate_up, const Tensor& out) {
  internal::CheckContiguous("SiluMul", "gate_up", ctx, gate_up, DType::kF32, {-1, -1});
  const int64_t rows = gate_up.dim(0), inter = gate_up.dim(1) / 2;
  if (gate_up.dim(1) % 2 != 0) internal::Fail("SiluMul", "gate_up's width must be even");
  internal::CheckContiguous("SiluMul", "out", ctx, out, DType::kF32, {rows, inter});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::SiluMul(gate_up.f32(), out.f32(), rows, inter);
      return;
    case Device::kCuda:
      internal::NoKernel("SiluMul", ctx);
  }
}

void Gelu(const ExecContext& ctx, const Tensor& x, GeluForm form) {
  internal::CheckContiguous("Gelu", "x", ctx, x, DType::kF32, {-1, -1});
  switch (ctx.device) {
    case Device::kCpu:
      (form == GeluForm::kErf ? cpu::GeluErf : cpu::GeluTanh)(x.f32(), x.numel());
      return;
    case Device::kCuda:
      internal::NoKernel("Gelu", ctx);
  }
}

void Tanh(const ExecContext& ctx, const Tensor& x) {
  internal::CheckContiguous("Tanh", "x", ctx, x, DType::kF32, {-1, -1});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::Tanh(x.f32(), x.numel());
      return;
    case Device::kCuda:
      internal::NoKernel("Tanh", ctx);
  }
}

}  // namespace quiver::engine::ops
