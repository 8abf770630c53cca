// An attention backend: one implementation of ragged attention on one device. Backends are made
// by the registry (attention/registry.h) by (device, name) and chosen per model family and
// sequence length by the table (attention/table.h), or forced with --attention-backend.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/base/attention_plan.h"
#include "engine/base/exec_context.h"

namespace quiver::engine {

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string_view name() const = 0;
  virtual Device device() const = 0;
  // out[t, h * head_dim + d] for each token t of each sequence of `plan`: softmax(q kᵀ · scale)
  // v within the sequence (causal: keys up to t). q has row stride q_stride floats (heads
  // packed), k and v row stride kv_stride; out has num_heads * head_dim floats per row. All
  // pointers are in `device()` memory; ctx.device is that device. Shapes are checked by the
  // caller (ops/attention.h).
  virtual void Run(const ExecContext& ctx, const AttentionPlan& plan, const float* q,
                   int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                   float* out) const = 0;
};

}  // namespace quiver::engine
