#include "engine/ops/attention.h"

#include "common/strings.h"
#include "engine/ops/check.h"

namespace quiver::engine::ops {

void Attention(const ExecContext& ctx, const AttentionBackend& backend, const AttentionPlan& plan,
               const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out) {
  if (backend.device() != ctx.device) {
    internal::Fail("Attention",
                   StrCat("backend '", backend.name(), "' runs on ", DeviceName(backend.device()),
                          ", the call on ", DeviceName(ctx.device)));
  }
  if (plan.num_kv_heads <= 0 || plan.num_heads % plan.num_kv_heads != 0) {
    internal::Fail("Attention", StrCat(plan.num_heads, " query heads cannot share ",
                                       plan.num_kv_heads, " kv heads"));
  }
  if (plan.has_masks() && !backend.SupportsMasks()) {
    internal::Fail("Attention", StrCat("backend '", backend.name(),
                                       "' runs no sliding window or position bias, which this "
                                       "model's attention needs"));
  }
  const int64_t num_tokens = plan.num_seqs > 0 ? plan.cu_seqlens[plan.num_seqs] : 0;
  const int64_t q_width = plan.num_heads * plan.head_dim;
  const int64_t kv_width = plan.num_kv_heads * plan.head_dim;
  if (ctx.device != Device::kCpu && plan.device_cu_seqlens == nullptr) {
    internal::Fail("Attention", "the plan has no device copy of cu_seqlens");
  }
  const DType dtype = backend.dtype();
  internal::Check("Attention", "q", ctx, q, dtype, {num_tokens, q_width});
  internal::Check("Attention", "k", ctx, k, dtype, {num_tokens, kv_width});
  internal::Check("Attention", "v", ctx, v, dtype, {num_tokens, kv_width});
  if (k.row_stride() != v.row_stride()) {
    internal::Fail("Attention", StrCat("k and v must share a row stride (", k.row_stride(), " and ",
                                       v.row_stride(), ")"));
  }
  internal::CheckContiguous("Attention", "out", ctx, out, dtype, {num_tokens, q_width});
  internal::CheckDisjoint("Attention", "out", out, "q", q);
  internal::CheckDisjoint("Attention", "out", out, "k", k);
  internal::CheckDisjoint("Attention", "out", out, "v", v);
  backend.Run(ctx, plan, q, k, v, out);
}

}  // namespace quiver::engine::ops
