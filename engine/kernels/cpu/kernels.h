// CPU kernels: raw pointers and sizes, row-major f32, no tensors, no validation (the callers in
// models/ check shapes once per batch). Each is a plain loop the compiler vectorizes, or a call
// into BLAS; parallel ones take the thread pool.
#pragma once

#include <cstdint>

namespace quiver::engine {
class ThreadPool;
}

namespace quiver::engine::cpu {

// y[m, n] = x[m, k] · w[n, k]^T (+ bias[n] if non-null). w is a PyTorch Linear weight.
void Linear(const float* x, const float* w, const float* bias, float* y, int64_t m, int64_t n,
            int64_t k);

// In place over rows of width `n`: x = (x - mean) / sqrt(var + eps) * gamma + beta.
void LayerNorm(float* x, const float* gamma, const float* beta, int64_t rows, int64_t n,
               float eps);
// x = (x + residual) then LayerNorm, fused.
void AddLayerNorm(float* x, const float* residual, const float* gamma, const float* beta,
                  int64_t rows, int64_t n, float eps);
// out = x / sqrt(mean(x^2) + eps) * gamma (out may alias x).
void RmsNorm(const float* x, const float* gamma, float* out, int64_t rows, int64_t n, float eps);

void GeluErf(float* x, int64_t n);   // 0.5 x (1 + erf(x / sqrt 2))
void GeluTanh(float* x, int64_t n);  // tanh approximation (gelu_new / gelu_pytorch_tanh)
// out[r, j] = silu(gate_up[r, j]) * gate_up[r, inter + j] for a fused [rows, 2 * inter] input.
void SiluMul(const float* gate_up, float* out, int64_t rows, int64_t inter);
void Tanh(float* x, int64_t n);
void Add(float* x, const float* y, int64_t n);  // x += y

// Rotary position embedding, neox layout (rotate halves), in place on [num_tokens, heads,
// head_dim] rows with row stride `stride` floats; positions[num_tokens].
void Rotary(float* x, const int32_t* positions, int64_t num_tokens, int64_t heads,
            int64_t head_dim, int64_t stride, double theta);

}  // namespace quiver::engine::cpu
