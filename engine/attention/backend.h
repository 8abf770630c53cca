// An attention backend: one implementation of ragged attention on one device. Backends are made
// by the registry (attention/registry.h) by (device, name) and chosen per model family and
// sequence length by the table (attention/table.h), or forced with --attention-backend.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/base/attention_plan.h"
#include "engine/base/exec_context.h"
#include "engine/base/tensor.h"

namespace quiver::engine {

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string_view name() const = 0;
  virtual Device device() const = 0;
  // The element type of q, k, v and out this backend runs (CPU: f32; CUDA: bf16).
  virtual DType dtype() const = 0;
  // Whether the backend runs this head_dim (CPU: any; CUDA kernels are instantiated per size).
  virtual bool Supports(int64_t head_dim) const { return head_dim > 0; }
  // Whether Run may be captured into a CUDA graph and replayed for other batches of the same
  // (token, sequence) bucket: true when every per-batch value reaches the kernels through the
  // plan's device arrays, and the host values (num_seqs, max_seqlen: the runtime passes the
  // bucket's token count) size the grids alone. A backend that plans per batch on the host says
  // false, and the CUDA runtime runs it eagerly.
  virtual bool Capturable() const { return false; }
  // Whether Run honours the plan's sliding window and relative position bias
  // (AttentionPlan::window, position_bias); ops::Attention refuses a plan with either otherwise.
  virtual bool SupportsMasks() const { return false; }
  // out[t, h * head_dim + d] for each token t of each sequence of `plan`: softmax(q kᵀ · scale)
  // v within the sequence (causal: keys up to t). q has any row stride (heads packed), k and v
  // one shared row stride; out is contiguous, num_heads * head_dim per row. All in `device()`
  // memory, of dtype(); ctx.device is that device. Shapes and types are checked by the caller
  // (ops/attention.h).
  virtual void Run(const ExecContext& ctx, const AttentionPlan& plan, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& out) const = 0;
};

}  // namespace quiver::engine
