// SiluMul, BiasActivation, CopyRows, F32ToBf16 and Bf16ToF32 (kernels.h): elementwise over a
// [rows, n] matrix cut into 8-element chunks (a row's last chunk may be partial), one chunk per
// thread per step of a grid-stride loop: 256-thread blocks, as many as the chunks need up to
// 65536 (enough to fill an H200 several times over; beyond it threads loop). Chunks move as 16-byte
// vectors when every pointer and row stride is 16-byte aligned, element by element otherwise.
// Math in f32 with the accurate libm functions (expf, erff, tanhf: no fast-math intrinsics).
#include <cstdint>
#include <type_traits>

#include "engine/kernels/cuda/kernels.h"
#include "engine/kernels/cuda/kernels_common.cuh"

namespace quiver::engine::cuda {
namespace {

using detail::Aligned16;
using detail::CeilDiv;
using detail::ChunkCount;
using detail::CopyChunkBits;
using detail::DispatchAct;
using detail::kChunk;
using detail::LoadChunk;
using detail::LoadChunkOr;
using detail::RowsAligned16;
using detail::StoreChunk;

constexpr int kElementwiseThreads = 256;
constexpr int64_t kElementwiseMaxBlocks = 65536;

// Blocks for `chunks` chunks: one chunk per thread, capped (the kernels loop past the cap).
unsigned ElementwiseBlocks(int64_t chunks) {
  const int64_t blocks = CeilDiv(chunks, kElementwiseThreads);
  return static_cast<unsigned>(blocks < kElementwiseMaxBlocks ? blocks : kElementwiseMaxBlocks);
}

// The grid-stride walk over the chunks of a [rows, n] matrix: fn(row, j, count) for the chunk at
// column j (count elements) of each row, every chunk once.
template <typename Fn>
__device__ __forceinline__ void ForEachChunk(int64_t rows, int64_t n, Fn fn) {
  const int64_t chunks_per_row = CeilDiv(n, kChunk);
  const int64_t chunks = rows * chunks_per_row;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < chunks;
       index += step) {
    const int64_t row = index / chunks_per_row;
    const int64_t j = (index - row * chunks_per_row) * kChunk;
    fn(row, j, ChunkCount(n, j));
  }
}

// out[r, j] = silu(g) · u with g = gate_up[r, j], u = gate_up[r, inter + j]; silu(g) = g / (1 +
// e^-g), the CPU's expression.
template <typename TAct>
__global__ void __launch_bounds__(kElementwiseThreads)
    SiluMulKernel(const TAct* gate_up, int64_t gu_stride, TAct* out, int64_t out_stride,
                  int64_t rows, int64_t inter, bool vector) {
  ForEachChunk(rows, inter, [&](int64_t r, int64_t j, int count) {
    const TAct* gate = gate_up + r * gu_stride;
    float g[kChunk], u[kChunk], y[kChunk];
    LoadChunk(gate + j, count, vector, g);
    LoadChunk(gate + inter + j, count, vector, u);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    StoreChunk(out + r * out_stride + j, count, vector, y);
  });
}

// v = activation(v) for one chunk, written as engine/kernels/cpu/vec.h computes it.
__device__ __forceinline__ void ActivateChunk(Activation activation, float (&v)[kChunk]) {
  switch (activation) {
    case Activation::kIdentity:
      return;
    case Activation::kGeluErf:  // 0.5 x (1 + erf(x / √2))
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        v[i] = 0.5f * v[i] * (1.0f + erff(v[i] * 0.70710678118654752f));
      }
      return;
    case Activation::kGeluTanh:  // 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const float cube = v[i] * v[i] * v[i];
        const float inner = 0.7978845608028654f * fmaf(0.044715f, cube, v[i]);
        v[i] = 0.5f * v[i] * (1.0f + tanhf(inner));
      }
      return;
    case Activation::kTanh:
#pragma unroll
      for (int i = 0; i < kChunk; ++i) v[i] = tanhf(v[i]);
      return;
    case Activation::kRelu:
#pragma unroll
      for (int i = 0; i < kChunk; ++i) v[i] = fmaxf(v[i], 0.0f);
      return;
  }
}

// In place: x[r, j] = activation(x[r, j] + bias[j]) (bias null: nothing added).
template <typename TAct>
__global__ void __launch_bounds__(kElementwiseThreads)
    BiasActivationKernel(TAct* x, int64_t x_stride, const float* bias, Activation activation,
                         int64_t rows, int64_t n, bool vector) {
  ForEachChunk(rows, n, [&](int64_t r, int64_t j, int count) {
    TAct* p = x + r * x_stride + j;
    float v[kChunk];
    LoadChunk(p, count, vector, v);
    if (bias != nullptr) {
      float b[kChunk];
      LoadChunkOr(bias, j, 0.0f, count, vector, b);
#pragma unroll
      for (int i = 0; i < kChunk; ++i) v[i] += b[i];
    }
    ActivateChunk(activation, v);
    StoreChunk(p, count, vector, v);
  });
}

// out[r, j] = in[r, j] converted (f32 -> bf16 rounds to nearest even; the same type is copied
// bit for bit).
template <typename TIn, typename TOut>
__global__ void __launch_bounds__(kElementwiseThreads)
    CopyRowsKernel(const TIn* in, int64_t in_stride, TOut* out, int64_t out_stride, int64_t rows,
                   int64_t n, bool vector) {
  ForEachChunk(rows, n, [&](int64_t r, int64_t j, int count) {
    const TIn* src = in + r * in_stride + j;
    TOut* dst = out + r * out_stride + j;
    if constexpr (std::is_same_v<TIn, TOut>) {
      CopyChunkBits(src, dst, count, vector);
    } else {
      float v[kChunk];
      LoadChunk(src, count, vector, v);
      StoreChunk(dst, count, vector, v);
    }
  });
}

template <typename TIn, typename TOut>
cudaError_t LaunchCopyRows(const void* in, int64_t in_stride, void* out, int64_t out_stride,
                           int64_t rows, int64_t n, bool vector, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  const unsigned blocks = ElementwiseBlocks(rows * CeilDiv(n, kChunk));
  CopyRowsKernel<TIn, TOut><<<blocks, kElementwiseThreads, 0, stream>>>(
      static_cast<const TIn*>(in), in_stride, static_cast<TOut*>(out), out_stride, rows, n, vector);
  return cudaGetLastError();
}

// out[r, j] = activation(g) · u with g = gate_up[r, j], u = gate_up[r, inter + j] (GeGLU with
// kGeluErf / kGeluTanh), as the CPU's GeluMul.
template <typename TAct>
__global__ void __launch_bounds__(kElementwiseThreads)
    GatedActivationKernel(const TAct* gate_up, int64_t gu_stride, TAct* out, int64_t out_stride,
                          int64_t rows, int64_t inter, Activation activation, bool vector) {
  ForEachChunk(rows, inter, [&](int64_t r, int64_t j, int count) {
    const TAct* gate = gate_up + r * gu_stride;
    float g[kChunk], u[kChunk];
    LoadChunk(gate + j, count, vector, g);
    LoadChunk(gate + inter + j, count, vector, u);
    ActivateChunk(activation, g);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) g[i] *= u[i];
    StoreChunk(out + r * out_stride + j, count, vector, g);
  });
}

bool ValidActivation(Activation activation) {
  return activation == Activation::kIdentity || activation == Activation::kGeluErf ||
         activation == Activation::kGeluTanh || activation == Activation::kTanh ||
         activation == Activation::kRelu;
}

}  // namespace

cudaError_t SiluMul(const void* gate_up, int64_t gu_stride, void* out, int64_t out_stride,
                    int64_t num_tokens, int64_t inter, DType act, cudaStream_t stream) {
  return DispatchAct(act, [&](auto act_tag) {
    using TAct = typename decltype(act_tag)::type;
    if (num_tokens <= 0 || inter <= 0) return cudaSuccess;
    // The up half starts `inter` elements into the row: aligned when inter is a multiple of 16
    // bytes.
    const bool vector = RowsAligned16(gate_up, gu_stride, sizeof(TAct)) &&
                        RowsAligned16(out, out_stride, sizeof(TAct)) &&
                        (inter * static_cast<int64_t>(sizeof(TAct))) % 16 == 0;
    const unsigned blocks = ElementwiseBlocks(num_tokens * CeilDiv(inter, kChunk));
    SiluMulKernel<TAct><<<blocks, kElementwiseThreads, 0, stream>>>(
        static_cast<const TAct*>(gate_up), gu_stride, static_cast<TAct*>(out), out_stride,
        num_tokens, inter, vector);
    return cudaGetLastError();
  });
}

cudaError_t GatedActivation(const void* gate_up, int64_t gu_stride, void* out, int64_t out_stride,
                            int64_t num_tokens, int64_t inter, Activation activation, DType act,
                            cudaStream_t stream) {
  if (!ValidActivation(activation)) return cudaErrorInvalidValue;
  return DispatchAct(act, [&](auto act_tag) {
    using TAct = typename decltype(act_tag)::type;
    if (num_tokens <= 0 || inter <= 0) return cudaSuccess;
    const bool vector = RowsAligned16(gate_up, gu_stride, sizeof(TAct)) &&
                        RowsAligned16(out, out_stride, sizeof(TAct)) &&
                        (inter * static_cast<int64_t>(sizeof(TAct))) % 16 == 0;
    const unsigned blocks = ElementwiseBlocks(num_tokens * CeilDiv(inter, kChunk));
    GatedActivationKernel<TAct><<<blocks, kElementwiseThreads, 0, stream>>>(
        static_cast<const TAct*>(gate_up), gu_stride, static_cast<TAct*>(out), out_stride,
        num_tokens, inter, activation, vector);
    return cudaGetLastError();
  });
}

cudaError_t BiasActivation(void* x, int64_t x_stride, const float* bias, Activation activation,
                           int64_t rows, int64_t n, DType act, cudaStream_t stream) {
  if (!ValidActivation(activation)) return cudaErrorInvalidValue;
  return DispatchAct(act, [&](auto act_tag) {
    using TAct = typename decltype(act_tag)::type;
    if (rows <= 0 || n <= 0) return cudaSuccess;
    if (bias == nullptr && activation == Activation::kIdentity) return cudaSuccess;  // identity
    const bool vector = RowsAligned16(x, x_stride, sizeof(TAct)) && RowsAligned16(bias, 0, 4);
    const unsigned blocks = ElementwiseBlocks(rows * CeilDiv(n, kChunk));
    BiasActivationKernel<TAct><<<blocks, kElementwiseThreads, 0, stream>>>(
        static_cast<TAct*>(x), x_stride, bias, activation, rows, n, vector);
    return cudaGetLastError();
  });
}

// A single contiguous row: only the base pointers' alignment matters.
cudaError_t F32ToBf16(const float* in, void* out, int64_t n, cudaStream_t stream) {
  return LaunchCopyRows<float, __nv_bfloat16>(in, n, out, n, 1, n, Aligned16(in) && Aligned16(out),
                                              stream);
}

cudaError_t Bf16ToF32(const void* in, float* out, int64_t n, cudaStream_t stream) {
  return LaunchCopyRows<__nv_bfloat16, float>(in, n, out, n, 1, n, Aligned16(in) && Aligned16(out),
                                              stream);
}

cudaError_t CopyRows(const void* in, int64_t in_stride, DType in_dtype, void* out,
                     int64_t out_stride, DType out_dtype, int64_t rows, int64_t n,
                     cudaStream_t stream) {
  return DispatchAct(in_dtype, [&](auto in_tag) {
    return DispatchAct(out_dtype, [&](auto out_tag) {
      using TIn = typename decltype(in_tag)::type;
      using TOut = typename decltype(out_tag)::type;
      const bool vector =
          RowsAligned16(in, in_stride, sizeof(TIn)) && RowsAligned16(out, out_stride, sizeof(TOut));
      return LaunchCopyRows<TIn, TOut>(in, in_stride, out, out_stride, rows, n, vector, stream);
    });
  });
}

}  // namespace quiver::engine::cuda
