// Private to the .cu files of engine/kernels/cuda (never included elsewhere): what the kernels of
// kernels.h share. Element loads and stores through f32; rows walked in chunks of 8 elements, each
// chunk owned by one thread, loaded and stored with 16-byte vectors when the launcher found every
// pointer and row stride 16-byte aligned and element by element otherwise (the last chunk of a row
// may be partial: the scalar tail); warp and block sums in a fixed order; the act-dtype dispatch
// and launch helpers.
//
// Determinism: which thread owns which elements, and the order it adds them in, depend only on the
// sizes (never on alignment, the vector path or the batch around a row), so the same input gives
// the same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "engine/base/dtype.h"

namespace quiver::engine::cuda::detail {

inline constexpr int kWarpSize = 32;
// Elements per chunk: one 16-byte vector of bf16, two of f32.
inline constexpr int kChunk = 8;
// Warps in the largest block launched here (1024 threads): the size of a block-sum scratch.
inline constexpr int kMaxWarps = 32;
// Dynamic shared memory above this needs cudaFuncAttributeMaxDynamicSharedMemorySize (the default
// limit is 48 KiB including static shared memory; the margin covers the kernels' static arrays).
inline constexpr size_t kSmemOptInAboveBytes = 40 * 1024;

__host__ __device__ constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- host side ----

template <typename T>
struct TypeTag {
  using type = T;
};

// Runs fn(TypeTag<T>{}) with T = float for kF32, __nv_bfloat16 for kBF16 and returns its result;
// cudaErrorInvalidValue (nothing run) for any other dtype.
template <typename Fn>
cudaError_t DispatchAct(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(TypeTag<float>{});
    case DType::kBF16:
      return fn(TypeTag<__nv_bfloat16>{});
    default:
      return cudaErrorInvalidValue;
  }
}

inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether every row of a matrix at p (row stride `stride` elements of `element_bytes`) starts
// 16-byte aligned, so that every chunk (8 elements from a row start) can move as vectors. A null
// pointer (an absent operand) does not constrain.
inline bool RowsAligned16(const void* p, int64_t stride, size_t element_bytes) {
  return p == nullptr || (Aligned16(p) && (stride * static_cast<int64_t>(element_bytes)) % 16 == 0);
}

// Lets `kernel` use smem_bytes of dynamic shared memory (an opt-in above the default limit). On
// failure the error is returned and cleared from the thread's last error, so that a later
// cudaGetLastError does not report it a second time.
template <typename Kernel>
cudaError_t AllowDynamicSmem(Kernel* kernel, size_t smem_bytes) {
  if (smem_bytes <= kSmemOptInAboveBytes) return cudaSuccess;
  if (smem_bytes > static_cast<size_t>(INT_MAX)) return cudaErrorInvalidValue;
  const cudaError_t error = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
  if (error != cudaSuccess) (void)cudaGetLastError();
  return error;
}

// ---- device side: elements ----

__device__ __forceinline__ float ToF32(float v) { return v; }
__device__ __forceinline__ float ToF32(__nv_bfloat16 v) { return __bfloat162float(v); }

// f32 -> T; bf16 rounds to nearest even.
template <typename T>
__device__ __forceinline__ T FromF32(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>);
    return __float2bfloat16_rn(v);
  }
}

// Two f32 as two bf16 (round to nearest even) in one word, lo in the low half (element order in
// little-endian memory).
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  const uint32_t lo_bits = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const uint32_t hi_bits = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return lo_bits | (hi_bits << 16);
}

// ---- device side: chunks of kChunk elements ----
//
// A chunk starts at a multiple of kChunk from a row start and holds `count` (1..kChunk) elements.
// `vector` is the launcher's alignment verdict; the vector path is taken for full chunks only, so
// a partial last chunk (the tail) always goes element by element.

// The element count of the chunk at offset j of an n-element row (j < n, j a multiple of kChunk).
__host__ __device__ constexpr int ChunkCount(int64_t n, int64_t j) {
  return static_cast<int>(n - j < kChunk ? n - j : kChunk);
}

// v[0, count) = p[0, count) in f32; v[count, kChunk) = 0.
template <typename T>
__device__ __forceinline__ void LoadChunk(const T* p, int count, bool vector, float (&v)[kChunk]) {
  if (vector && count == kChunk) {
    if constexpr (std::is_same_v<T, float>) {
      const float4 a = reinterpret_cast<const float4*>(p)[0];
      const float4 b = reinterpret_cast<const float4*>(p)[1];
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
      v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
      // bf16 is the high half of an f32: widening is a shift.
      const uint4 raw = *reinterpret_cast<const uint4*>(p);
      const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[2 * i] = __uint_as_float(words[i] << 16);
        v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kChunk; ++i) v[i] = i < count ? ToF32(p[i]) : 0.0f;
}

// As LoadChunk at base + offset, for an optional f32 operand: `fill` everywhere when base is null.
__device__ __forceinline__ void LoadChunkOr(const float* base, int64_t offset, float fill,
                                            int count, bool vector, float (&v)[kChunk]) {
  if (base != nullptr) {
    LoadChunk(base + offset, count, vector, v);
    return;
  }
#pragma unroll
  for (int i = 0; i < kChunk; ++i) v[i] = fill;
}

// p[0, count) = v[0, count) as T.
template <typename T>
__device__ __forceinline__ void StoreChunk(T* p, int count, bool vector, const float (&v)[kChunk]) {
  if (vector && count == kChunk) {
    if constexpr (std::is_same_v<T, float>) {
      reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
      *reinterpret_cast<uint4*>(p) = make_uint4(PackBf16x2(v[0], v[1]), PackBf16x2(v[2], v[3]),
                                                PackBf16x2(v[4], v[5]), PackBf16x2(v[6], v[7]));
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    if (i < count) p[i] = FromF32<T>(v[i]);
  }
}

// out[0, count) = in[0, count), bit for bit (same element type: no round trip through f32).
template <typename T>
__device__ __forceinline__ void CopyChunkBits(const T* in, T* out, int count, bool vector) {
  if (vector && count == kChunk) {
    constexpr int kVectors = kChunk * sizeof(T) / sizeof(uint4);
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      reinterpret_cast<uint4*>(out)[i] = reinterpret_cast<const uint4*>(in)[i];
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    if (i < count) out[i] = in[i];
  }
}

// ---- device side: sums ----

// The sum over the warp's 32 lanes, in every lane (a butterfly: both lanes of a pair add the same
// two values, so every lane ends with the same bits). All 32 lanes must call it.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// The sum over the block, in every thread: warp sums, then every thread adds the warp sums in warp
// order. blockDim.x must be a multiple of 32 (at most 1024) and every thread must call it;
// `scratch` is kMaxWarps floats of shared memory that only BlockSum touches (a second call may
// follow at once: it waits for the first one's readers before writing).
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  v = WarpSum(v);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  __syncthreads();  // the previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarpSize;
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

// The block's dynamic shared memory as f32, 16-byte aligned (one declaration for every kernel of a
// translation unit: extern shared arrays of different types would clash).
__device__ __forceinline__ float* DynamicSmemF32() {
  extern __shared__ float4 quiver_dynamic_smem[];
  return reinterpret_cast<float*>(quiver_dynamic_smem);
}

}  // namespace quiver::engine::cuda::detail
