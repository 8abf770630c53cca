// The CUDA backend's own kernels (everything that is not a GEMM or attention): launchers callable
// from host code, each enqueuing its kernel(s) on `stream` and returning the launch error
// (cudaGetLastError). Sizes are checked by the ops layer (engine/ops), not here.
//
// Element types: activations ("act") are bf16 or f32 (`DType::kBF16` / `DType::kF32`, the same
// kernel templated on both); the residual stream, norm weights, pooled rows and scores are f32;
// every sum, mean and variance accumulates in f32. All pointers are device memory unless said
// otherwise. Row strides are in elements. Every launcher accepts zero rows (enqueues nothing).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/base/dtype.h"
#include "engine/base/op_types.h"

namespace quiver::engine::cuda {

enum class NormKind { kNone, kLayerNorm, kRmsNorm };

// Embedding gather + sum + norm, one token per block row:
//   sum[t]  = word[ids[t]] (+ position[positions[t]]) (+ type[type_ids[t]]) (type_ids null: row 0
//             of `type` when `type` is given)
//   normed  = norm(sum) with gamma (+ beta for LayerNorm), eps
// Outputs (each optional, null for none): sum_f32 f32 [T, H]; normed_f32 f32 [T, H];
// normed act [T, H] (for kNone: the sum in act dtype). Tables are `table_dtype` (bf16 or f32),
// row length `hidden`, contiguous rows.
struct EmbeddingArgs {
  const int32_t* ids = nullptr;
  const int32_t* positions = nullptr;  // null: no position table
  const int32_t* type_ids = nullptr;
  const void* word = nullptr;
  const void* position = nullptr;
  const void* type = nullptr;
  DType table_dtype = DType::kBF16;
  NormKind norm = NormKind::kNone;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float eps = 0.0f;
  int64_t num_tokens = 0;
  int64_t hidden = 0;
  float* sum_f32 = nullptr;
  float* normed_f32 = nullptr;
  void* normed = nullptr;
  DType act = DType::kBF16;
};
cudaError_t Embedding(const EmbeddingArgs& args, cudaStream_t stream);

// residual f32 [T, H] += add (act, row stride add_stride; null: nothing added) (+ bias f32 [H],
// optional); then normed act [T, H] (optional) = norm(residual); with `store_normed_in_residual`
// (post-LN: BERT) the residual becomes the normed f32 row too. LayerNorm reads beta (may be
// null: zero).
struct AddNormArgs {
  float* residual = nullptr;
  const void* add = nullptr;
  int64_t add_stride = 0;
  const float* bias = nullptr;
  NormKind norm = NormKind::kRmsNorm;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float eps = 0.0f;
  bool store_normed_in_residual = false;
  void* normed = nullptr;
  int64_t normed_stride = 0;
  int64_t num_tokens = 0;
  int64_t hidden = 0;
  DType act = DType::kBF16;
};
cudaError_t AddNorm(const AddNormArgs& args, cudaStream_t stream);

// Plain norm over act rows: out (act, out_stride; may equal x) = norm(x) with gamma (+ beta).
cudaError_t Norm(const void* x, int64_t x_stride, NormKind norm, const float* gamma,
                 const float* beta, float eps, void* out, int64_t out_stride, int64_t rows,
                 int64_t n, DType act, cudaStream_t stream);

// Qwen3's per-head q/k RMSNorm and rotary, in place on act x [T, heads · head_dim] (row stride
// x_stride; q or k inside the fused qkv), one pass: for each head slice, RMSNorm with gamma
// f32 [head_dim] (null: no norm) then rotary at positions[t] (i32 [T]; null: no rotary) with
// inv_freq[i] = 1 / theta^(2i / head_dim) computed in f32 as transformers does.
struct HeadNormRotaryArgs {
  void* x = nullptr;
  int64_t x_stride = 0;
  int64_t num_tokens = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  const float* gamma = nullptr;
  float eps = 0.0f;
  const int32_t* positions = nullptr;
  double theta = 10000.0;
  RotaryLayout layout = RotaryLayout::kNeox;
  DType act = DType::kBF16;
};
cudaError_t HeadNormRotary(const HeadNormRotaryArgs& args, cudaStream_t stream);

// out act [T, inter] (row stride out_stride) = silu(gate_up[:, :inter]) · gate_up[:, inter:]
// (gate_up act, row stride gu_stride).
cudaError_t SiluMul(const void* gate_up, int64_t gu_stride, void* out, int64_t out_stride,
                    int64_t num_tokens, int64_t inter, DType act, cudaStream_t stream);

// In place on act x [rows, n] (row stride x_stride): (x + bias, bias f32 [n] optional) then the
// activation. kGelu* use the exact erf form / the tanh approximation; kTanh is tanh, kRelu max(x,
// 0).
enum class Activation { kIdentity, kGeluErf, kGeluTanh, kTanh, kRelu };
// out act [T, inter] = activation(gate_up[:, :inter]) · gate_up[:, inter:] (GeGLU with kGeluErf
// or kGeluTanh), row strides gu_stride and out_stride.
cudaError_t GatedActivation(const void* gate_up, int64_t gu_stride, void* out, int64_t out_stride,
                            int64_t num_tokens, int64_t inter, Activation activation, DType act,
                            cudaStream_t stream);
cudaError_t BiasActivation(void* x, int64_t x_stride, const float* bias, Activation activation,
                           int64_t rows, int64_t n, DType act, cudaStream_t stream);

// out f32 [num_rows, H] from hidden (act, row stride hidden_stride) over token ranges
// bounds i32 [num_rows, bounds_width] (device; non-empty (begin, end) ranges and, with width 3,
// the weighted mean's origin as cpu::Pool): CLS (first), mean (summed in token order, f32), last
// token, max.
cudaError_t Pool(const void* hidden, int64_t hidden_stride, const int32_t* bounds,
                 int64_t bounds_width, int64_t num_rows, int64_t hidden_size, PoolMode mode,
                 DType act, float* out, cudaStream_t stream);

// out f32 [m] = the max over rows of x (act, contiguous [rows, m]), and over out itself when
// accumulate (std::max order as the CPU).
cudaError_t MaxRows(const void* x, int64_t rows, int64_t m, DType act, float* out, bool accumulate,
                    cudaStream_t stream);

// scores f32 [rows] = pooled[r] · yes - pooled[r] · no (pooled f32 [rows, H]; yes, no f32 [H]).
cudaError_t LogitDifference(const float* pooled, int64_t rows, int64_t hidden, const float* yes,
                            const float* no, float* scores, cudaStream_t stream);

// Element conversions (n elements, contiguous): f32 -> bf16 (round to nearest even) and back.
cudaError_t F32ToBf16(const float* in, void* out, int64_t n, cudaStream_t stream);
cudaError_t Bf16ToF32(const void* in, float* out, int64_t n, cudaStream_t stream);

// Strided copy of a [rows, n] matrix between element types (f32/bf16 both ways or same type).
cudaError_t CopyRows(const void* in, int64_t in_stride, DType in_dtype, void* out,
                     int64_t out_stride, DType out_dtype, int64_t rows, int64_t n,
                     cudaStream_t stream);

// ---- test references (on-GPU, f32, naive: one thread per output; never on the serving path) ----

// y f32 [M, N] (row stride ldy) = x [M, K] · w [N, K]ᵀ (+ bias f32 [N]); x and w are f32 or bf16
// (x_dtype / w_dtype), row strides ldx / ldw. Sums in f32 in k order.
cudaError_t ReferenceGemm(const void* x, int64_t ldx, DType x_dtype, const void* w, int64_t ldw,
                          DType w_dtype, const float* bias, float* y, int64_t ldy, int64_t m,
                          int64_t n, int64_t k, cudaStream_t stream);

}  // namespace quiver::engine::cuda
