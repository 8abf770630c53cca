// Ragged attention through a backend of the registry (attention/registry.h), chosen by the
// engine per batch (attention/table.h) or forced.
//
//   q    f32 [num_tokens, num_heads · head_dim]     any row stride (a view into a fused qkv)
//   k, v f32 [num_tokens, num_kv_heads · head_dim]  one shared row stride
//   out  f32 [num_tokens, num_heads · head_dim]     contiguous
//
// Within each sequence of `plan`, causal or bidirectional as the plan says, grouped-query heads
// as plan.num_kv_heads says. The backend's device is ctx.device.
#pragma once

#include "engine/attention/backend.h"
#include "engine/base/attention_plan.h"
#include "engine/base/exec_context.h"
#include "engine/base/tensor.h"

namespace quiver::engine::ops {

void Attention(const ExecContext& ctx, const AttentionBackend& backend, const AttentionPlan& plan,
               const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out);

}  // namespace quiver::engine::ops
