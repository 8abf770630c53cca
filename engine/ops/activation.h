// Activations, f32, contiguous.
//
//   SiluMul  out [num_tokens, inter] = silu(gate_up[:, :inter]) · gate_up[:, inter:] for the
//            fused gate/up projection [num_tokens, 2 · inter] of a gated MLP
//   GeluMul  the same with gelu (GeGLU)
//   Gelu     in place, erf form or tanh approximation (also fused into Linear's epilogue)
//   Tanh     in place
//   Relu     in place (DistilBERT's classifier, its FFN when activation is "relu")
//   Convert  out [rows, n] = in [rows, n] in out's element type (CUDA: f32 <-> bf16, rounding to
//            nearest even; the CPU has f32 only, where it is a copy); in may have any row stride
#pragma once

#include "engine/base/exec_context.h"
#include "engine/base/tensor.h"

namespace quiver::engine::ops {

void SiluMul(const ExecContext& ctx, const Tensor& gate_up, const Tensor& out);

enum class GeluForm { kErf, kTanh };
// out [num_tokens, inter] = gelu(gate_up[:, :inter]) · gate_up[:, inter:] (GeGLU: ModernBERT).
void GeluMul(const ExecContext& ctx, const Tensor& gate_up, const Tensor& out, GeluForm form);
void Gelu(const ExecContext& ctx, const Tensor& x, GeluForm form);
void Tanh(const ExecContext& ctx, const Tensor& x);
void Relu(const ExecContext& ctx, const Tensor& x);
void Convert(const ExecContext& ctx, const Tensor& in, const Tensor& out);

}  // namespace quiver::engine::ops
