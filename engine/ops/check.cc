#include "engine/ops/check.h"

#include <stdexcept>
#include <utility>

#include "common/strings.h"

namespace quiver::engine::ops::internal {

void Fail(std::string_view op, const std::string& message) {
  throw std::invalid_argument(StrCat("ops::", op, ": ", message));
}

void Check(std::string_view op, std::string_view operand, const ExecContext& ctx, const Tensor& t,
           DType dtype, std::initializer_list<int64_t> dims) {
  bool ok = !t.empty() && t.dtype() == dtype && t.device() == ctx.device &&
            t.rank() == static_cast<int>(dims.size());
  int i = 0;
  for (int64_t d : dims) {
    if (ok && d >= 0 && t.dim(i) != d) ok = false;
    ++i;
  }
  if (ok) return;
  std::string want;
  for (int64_t d : dims) want += (want.empty() ? "" : ", ") + (d < 0 ? "*" : std::to_string(d));
  Fail(op, StrCat(operand, " is ", t.empty() ? std::string("empty") : t.Describe(), ", expected ",
                  DTypeShortName(dtype), " [", want, "] ", DeviceName(ctx.device)));
}

void CheckContiguous(std::string_view op, std::string_view operand, const ExecContext& ctx,
                     const Tensor& t, DType dtype, std::initializer_list<int64_t> dims) {
  Check(op, operand, ctx, t, dtype, dims);
  if (!t.contiguous()) Fail(op, StrCat(operand, " must be contiguous, is ", t.Describe()));
}

DType ActDType(std::string_view op, std::string_view operand, const ExecContext& ctx,
               const Tensor& t) {
  if (t.empty()) Fail(op, StrCat(operand, " is empty"));
  const bool ok =
      t.dtype() == DType::kF32 || (ctx.device == Device::kCuda && t.dtype() == DType::kBF16);
  if (!ok) {
    Fail(op, StrCat(operand, " is ", t.Describe(), "; activations on ", DeviceName(ctx.device),
                    " are ", ctx.device == Device::kCuda ? "bf16 or f32" : "f32"));
  }
  return t.dtype();
}

void CheckOptional(std::string_view op, std::string_view operand, const ExecContext& ctx,
                   const Tensor& t, DType dtype, std::initializer_list<int64_t> dims) {
  if (!t.empty()) Check(op, operand, ctx, t, dtype, dims);
}

void CheckDisjoint(std::string_view op, std::string_view a_name, const Tensor& a,
                   std::string_view b_name, const Tensor& b) {
  if (a.empty() || b.empty() || a.numel() == 0 || b.numel() == 0) return;
  auto range = [](const Tensor& t) {
    const char* begin = static_cast<const char*>(t.data<void>());
    const int64_t last = (t.dim(0) - 1) * t.row_stride() + t.row_size();
    return std::pair{begin, begin + static_cast<size_t>(last) * DTypeSizeBytes(t.dtype())};
  };
  const auto [a0, a1] = range(a);
  const auto [b0, b1] = range(b);
  if (a0 < b1 && b0 < a1) Fail(op, StrCat(a_name, " and ", b_name, " must not overlap"));
}

void NoKernel(std::string_view op, const ExecContext& ctx) {
  Fail(op, StrCat("no kernel for device ", DeviceName(ctx.device), " in this build"));
}

}  // namespace quiver::engine::ops::internal
