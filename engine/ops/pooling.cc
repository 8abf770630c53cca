#include "engine/ops/pooling.h"

#include <cstring>
#include <string_view>

#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"
#ifdef QUIVER_WITH_CUDA
#include "engine/kernels/cuda/kernels.h"
#include "engine/ops/cuda.h"
#endif

namespace quiver::engine::ops {

void Pool(const ExecContext& ctx, const Tensor& hidden, const Tensor& bounds, PoolMode mode,
          const Tensor& out, const Tensor& device_bounds) {
  const DType act = internal::ActDType("Pool", "hidden", ctx, hidden);
  internal::Check("Pool", "hidden", ctx, hidden, act, {-1, -1});
  const ExecContext host{Device::kCpu, nullptr};
  const int64_t width = bounds.rank() == 2 ? bounds.dim(1) : 0;
  if (width != 2 && width != 3) {
    internal::Fail("Pool",
                   "bounds must be [rows, 2] (begin, end) or [rows, 3] (begin, end, origin)");
  }
  internal::CheckContiguous("Pool", "bounds", host, bounds, DType::kI32, {-1, width});
  const int64_t rows = bounds.dim(0), n = hidden.dim(1);
  internal::CheckContiguous("Pool", "out", ctx, out, DType::kF32, {rows, n});
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t begin = bounds.i32()[width * r], end = bounds.i32()[width * r + 1];
    if (begin < 0 || end <= begin || end > hidden.dim(0)) {
      internal::Fail(
          "Pool", StrCat("row ", r, " spans tokens [", begin, ", ", end, ") of ", hidden.dim(0)));
    }
    if (width == 3) {
      const int32_t origin = bounds.i32()[width * r + 2];
      if (origin < 0 || origin > begin) {
        internal::Fail("Pool",
                       StrCat("row ", r, ": origin ", origin, " is not in [0, ", begin, "]"));
      }
    }
  }
  if (ctx.device != Device::kCpu) {
    internal::CheckContiguous("Pool", "device_bounds", ctx, device_bounds, DType::kI32,
                              {rows, width});
  }
  switch (ctx.device) {
    case Device::kCpu:
      internal::CheckContiguous("Pool", "hidden", ctx, hidden, act, {-1, -1});
      cpu::Pool(hidden.f32(), bounds.i32(), width, rows, n, mode, out.f32());
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch(
          "Pool", cuda::Pool(hidden.data<void>(), hidden.row_stride(), device_bounds.i32(), width,
                             rows, n, mode, act, out.f32(), internal::StreamOf("Pool", ctx)));
      return;
#endif
      internal::NoKernel("Pool", ctx);
  }
}

void MaxRows(const ExecContext& ctx, const Tensor& x, const Tensor& out, bool accumulate) {
  const DType act = internal::ActDType("MaxRows", "x", ctx, x);
  internal::CheckContiguous("MaxRows", "x", ctx, x, act, {-1, -1});
  const int64_t rows = x.dim(0), m = x.dim(1);
  if (rows <= 0) internal::Fail("MaxRows", "x has no rows");
  internal::CheckContiguous("MaxRows", "out", ctx, out, DType::kF32, {1, m});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::MaxRows(x.f32(), rows, m, out.f32(), accumulate);
      return;
    case Device::kCuda:
#ifdef QUIVER_WITH_CUDA
      internal::CheckLaunch("MaxRows",
                            cuda::MaxRows(x.data<void>(), rows, m, act, out.f32(), accumulate,
                                          internal::StreamOf("MaxRows", ctx)));
      return;
#endif
      internal::NoKernel("MaxRows", ctx);
  }
}

namespace {

// The checks GatherRows and ScatterRows share: `many` has every row `rows` names, `few` one per
// entry, both f32 and contiguous on the CPU.
void CheckRows(std::string_view op, const ExecContext& ctx, const Tensor& many, const Tensor& rows,
               const Tensor& few) {
  if (ctx.device != Device::kCpu) internal::NoKernel(op, ctx);
  internal::CheckContiguous(op, "rows", ctx, rows, DType::kI32, {-1});
  internal::CheckContiguous(op, "all rows", ctx, many, DType::kF32, {-1, -1});
  internal::CheckContiguous(op, "picked rows", ctx, few, DType::kF32, {rows.dim(0), many.dim(1)});
  internal::CheckDisjoint(op, "all rows", many, "picked rows", few);
  for (int64_t i = 0; i < rows.dim(0); ++i) {
    if (rows.i32()[i] < 0 || rows.i32()[i] >= many.dim(0)) {
      internal::Fail(op, StrCat("row ", rows.i32()[i], " is not in [0, ", many.dim(0), ")"));
    }
  }
}

}  // namespace

void GatherRows(const ExecContext& ctx, const Tensor& x, const Tensor& rows, const Tensor& out) {
  CheckRows("GatherRows", ctx, x, rows, out);
  const int64_t m = x.dim(1);
  for (int64_t i = 0; i < rows.dim(0); ++i) {
    std::memcpy(out.f32() + i * m, x.f32() + rows.i32()[i] * m,
                static_cast<size_t>(m) * sizeof(float));
  }
}

void ScatterRows(const ExecContext& ctx, const Tensor& x, const Tensor& rows, const Tensor& out) {
  CheckRows("ScatterRows", ctx, out, rows, x);
  const int64_t m = x.dim(1);
  for (int64_t i = 0; i < rows.dim(0); ++i) {
    std::memcpy(out.f32() + rows.i32()[i] * m, x.f32() + i * m,
                static_cast<size_t>(m) * sizeof(float));
  }
}

}  // namespace quiver::engine::ops
