// CPU kernels: raw pointers and sizes, row-major f32, no tensors, no validation (the callers in
// models/ check shapes once per batch). Loops are written for the vector units (x86-64-v3: AVX2
// and FMA, with glibc's vector exp/erf/tanh); parallel ones take the thread pool, and BLAS runs
// single-threaded inside the pool's tasks so that the two never compete for the cores.
#pragma once

#include <cstdint>

#include "engine/kernels/cpu/gemm.h"

namespace quiver::engine {
class ThreadPool;
}

namespace quiver::engine::cpu {

// y[m, n] = x[m, k] · w[n, k]^T (+ bias[n] if non-null), on the calling thread. w is a PyTorch
// Linear weight.
void Linear(const float* x, const float* w, const float* bias, float* y, int64_t m, int64_t n,
            int64_t k);

enum class Activation { kNone, kGeluErf, kGeluTanh };

// y[m, n] = act(x[m, k] · Wᵀ + bias) with W packed at load (gemm.h), spread over the pool in
// tiles; each tile's activation is applied by the thread that computed it, while the tile is
// still in its cache.
void Linear(ThreadPool& pool, const float* x, const PackedWeights& w, const float* bias,
            float* y, int64_t m, Activation act = Activation::kNone);

// io[m, n] = LayerNorm(io + x · Wᵀ + bias): a post-LN block's output projection, residual and
// LayerNorm fused per tile of whole rows. `scratch` holds at least [m, n] floats.
void LinearAddLayerNorm(ThreadPool& pool, const float* x, const PackedWeights& w,
                        const float* bias, float* io, const float* gamma, const float* beta,
                        float* scratch, int64_t m, float eps);

// x[m, n] = LayerNorm(word[ids] + position[positions] + type[type_ids]) (type may be null, and
// type_ids empty for all zeros): BERT's embedding layer, over the pool.
void EmbedLayerNorm(ThreadPool& pool, const int32_t* ids, const int32_t* positions,
                    const int32_t* type_ids, const float* word, const float* position,
                    const float* type, const float* gamma, const float* beta, float* x,
                    int64_t m, int64_t n, float eps);

// out = x / sqrt(mean(x^2) + eps) * gamma (out may alias x).
void RmsNorm(const float* x, const float* gamma, float* out, int64_t rows, int64_t n, float eps);

// out[r, j] = silu(gate_up[r, j]) * gate_up[r, inter + j] for a fused [rows, 2 * inter] input.
void SiluMul(const float* gate_up, float* out, int64_t rows, int64_t inter);
void Tanh(float* x, int64_t n);
void Add(float* x, const float* y, int64_t n);  // x += y

// Rotary position embedding, neox layout (rotate halves), in place on [num_tokens, heads,
// head_dim] rows with row stride `stride` floats; positions[num_tokens].
void Rotary(float* x, const int32_t* positions, int64_t num_tokens, int64_t heads,
            int64_t head_dim, int64_t stride, double theta);

}  // namespace quiver::engine::cpu
