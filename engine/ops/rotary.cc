#include "engine/ops/rotary.h"

#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"
#ifdef QUIVER_WITH_CUDA
#include "engine/kernels/cuda/kernels.h"
#include "engine/ops/cuda.h"
#endif

namespace quiver::engine::ops {

void Rotary(const ExecContext& ctx, const Tensor& x, const Tensor& positions, int64_t heads,
            int64_t head_dim, double theta, RotaryLayout layout) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    internal::Fail("Rotary", StrCat("head_dim ", head_dim, " must be even and positive"));
  }
  const DType act = internal::ActDType("Rotary", "x", ctx, x);
  internal::Check("Rotary", "x", ctx, x, act, {-1, heads * head_dim});
  internal::CheckContiguous("Rotary", "positions", ctx, positions, DType::kI32, {x.dim(0)});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::Rotary(x.f32(), positions.i32(), x.dim(0), heads, head_dim, x.row_stride(), theta,
                  layout);
      return;
    case Device::kCuda: {
#ifdef QUIVER_WITH_CUDA
      cuda::HeadNormRotaryArgs a;
      a.x = x.data<void>();
      a.x_stride = x.row_stride();
      a.num_tokens = x.dim(0);
      a.heads = heads;
      a.head_dim = head_dim;
      a.positions = positions.i32();
      a.theta = theta;
      a.layout = layout;
      a.act = act;
      internal::CheckLaunch("Rotary", cuda::HeadNormRotary(a, internal::StreamOf("Rotary", ctx)));
      return;
#endif
      internal::NoKernel("Rotary", ctx);
    }
  }
}

}  // namespace quiver::engine::ops
