#include "engine/ops/rotary.h"

#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"

namespace quiver::engine::ops {

void Rotary(const ExecContext& ctx, const Tensor& x, const Tensor& positions, int64_t heads,
            int64_t head_dim, double theta, RotaryLayout layout) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    internal::Fail("Rotary", StrCat("head_dim ", head_dim, " must be even and positive"));
  }
  internal::Check("Rotary", "x", ctx, x, DType::kF32, {-1, heads * head_dim});
  internal::CheckContiguous("Rotary", "positions", ctx, positions, DType::kI32, {x.dim(0)});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::Rotary(x.f32(), positions.i32(), x.dim(0), heads, head_dim, x.row_stride(), theta,
                  layout);
      return;
    case Device::kCuda:
      internal::NoKernel("Rotary", ctx);
  }
}

}  // namespace quiver::engine::ops
