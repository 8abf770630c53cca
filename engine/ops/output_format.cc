#include "engine/ops/output_format.h"

#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"

namespace quiver::engine::ops {
int64_t EncodedRowBytes(Encoding encoding, int64_t dimensions) {
  return cpu::EncodedRowBytes(encoding, dimensions);
}

void FormatOutput(const ExecContext& ctx, const Tensor& pooled, int64_t dimensions, bool normalize,
                  Encoding encoding, const Tensor& out) {
  internal::Check("FormatOutput", "pooled", ctx, pooled, DType::kF32, {-1, -1});
  const int64_t rows = pooled.dim(0);
  if (dimensions <= 0 || dimensions > pooled.dim(1)) {
    internal::Fail("FormatOutput",
                   StrCat("dimensions ", dimensions, " outside [1, ", pooled.dim(1), "]"));
  }
  const ExecContext host{Device::kCpu, nullptr};
  internal::CheckContiguous("FormatOutput", "out", host, out, DType::kU8,
                            {rows, EncodedRowBytes(encoding, dimensions)});
  switch (ctx.device) {
    case Device::kCpu:
      cpu::EncodeRows(pooled.f32(), pooled.row_stride(), rows, dimensions, normalize, encoding,
                      out.data<uint8_t>());
      return;
    case Device::kCuda:
      internal::NoKernel("FormatOutput", ctx);
  }
}

}  // namespace quiver::engine::ops
