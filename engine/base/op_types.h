// The small enums an op and its kernels share (what an epilogue, a rotary layout, a pooling or an
// output encoding is), declared once for every device: ops/ re-exports them, kernels switch on
// them.
#pragma once

namespace quiver::engine {

// What runs on each tile of a Linear right after its product, while it is in cache.
enum class Epilogue {
  kNone,      // y = x · Wᵀ + bias
  kGeluErf,   // y = gelu(x · Wᵀ + bias), erf form (BERT's "gelu")
  kGeluTanh,  // y = gelu(x · Wᵀ + bias), tanh approximation ("gelu_new", "gelu_pytorch_tanh")
  kResidual,  // y = (x · Wᵀ + bias) + residual
};

enum class RotaryLayout {
  kNeox,  // rotate halves, (x[i], x[i + head_dim / 2]): Llama, Qwen, NeoX
  kGptJ,  // rotate interleaved pairs, (x[2i], x[2i + 1]): GPT-J
};

// How a range of token rows becomes one row.
enum class PoolMode {
  kCls,           // the range's first token
  kMean,          // the mean of its tokens, summed in token order
  kLastToken,     // its last token
  kMax,           // the elementwise max over its tokens
  kMeanSqrtLen,   // the sum of its tokens over sqrt(their count)
  kWeightedMean,  // Σ (i + 1) · token_i / Σ (i + 1), i the token's index from the range's origin
};

// An output row's encoding: f32, f16 (round to nearest even), int8 (clamp(round(tanh(x) · 127)))
// or packed sign bits (most significant first, ceil(dimensions / 8) bytes).
enum class Encoding { kF32, kF16, kInt8, kBinary };

}  // namespace quiver::engine
