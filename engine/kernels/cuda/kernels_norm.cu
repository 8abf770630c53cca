// Embedding, AddNorm and Norm (kernels.h): one block per token row. The block has one thread per
// 8-element chunk of the row, rounded up to whole warps, 32 to 512 threads (a thread walks further
// chunks when a row has more than 4096 elements). Pass 1 reads the inputs once and keeps the f32
// row in dynamic shared memory (hidden floats; above ~40 KiB, i.e. hidden > 10240, the kernel
// opts in to more, up to the device's per-block limit, about 58k floats on sm_90); the statistics
// are block sums over that copy (mean, then Σ(x - mean)², as engine/kernels/cpu/kernels.cc does);
// pass 2 reads it back, normalizes and writes. Global memory is read once and written once.
#include <climits>
#include <cstdint>

#include "engine/kernels/cuda/kernels.h"
#include "engine/kernels/cuda/kernels_common.cuh"

namespace quiver::engine::cuda {
namespace {

using detail::AllowDynamicSmem;
using detail::BlockSum;
using detail::CeilDiv;
using detail::ChunkCount;
using detail::DispatchAct;
using detail::DynamicSmemF32;
using detail::kChunk;
using detail::kMaxWarps;
using detail::kWarpSize;
using detail::LoadChunk;
using detail::LoadChunkOr;
using detail::RowsAligned16;
using detail::StoreChunk;

constexpr int kRowMaxThreads = 512;

// Threads for a row of n elements: one per chunk in whole warps, within [32, kRowMaxThreads]. A
// function of n only, so a row's summation order never depends on anything but its length.
int RowThreads(int64_t n) {
  const int64_t warps = CeilDiv(CeilDiv(n, kChunk), kWarpSize);
  const int64_t threads = warps * kWarpSize;
  return static_cast<int>(threads < kWarpSize        ? kWarpSize
                          : threads > kRowMaxThreads ? kRowMaxThreads
                                                     : threads);
}

bool ValidNorm(NormKind norm) {
  return norm == NormKind::kNone || norm == NormKind::kLayerNorm || norm == NormKind::kRmsNorm;
}

// Normalized = (x - mean) · inv · gamma + beta (LayerNorm), x · inv · gamma (RmsNorm), x (kNone).
struct NormStats {
  float mean = 0.0f;
  float inv = 1.0f;
};

// The statistics of the f32 row of n elements in shared memory; every thread of the block calls
// and gets the same value. Thread i adds elements i, i + blockDim.x, ... (conflict-free shared
// reads, a fixed order). LayerNorm: mean = Σx / n, var = Σ(x - mean)² / n, inv = 1 / √(var + eps);
// RmsNorm: inv = 1 / √(Σx² / n + eps); all in f32.
__device__ NormStats RowStats(const float* row, int64_t n, NormKind norm, float eps,
                              float* scratch) {
  NormStats stats;
  if (norm == NormKind::kNone) return stats;
  const float count = static_cast<float>(n);
  float sum = 0.0f;
  if (norm == NormKind::kLayerNorm) {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += row[j];
    stats.mean = BlockSum(sum, scratch) / count;
    sum = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float d = row[j] - stats.mean;
      sum += d * d;
    }
    stats.inv = 1.0f / sqrtf(BlockSum(sum, scratch) / count + eps);
    return stats;
  }
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += row[j] * row[j];
  stats.inv = 1.0f / sqrtf(BlockSum(sum, scratch) / count + eps);
  return stats;
}

// y = the normalized chunk x at row offset j; gamma f32 [n] (null: 1), beta f32 [n] (null: 0).
__device__ __forceinline__ void NormalizeChunk(const float (&x)[kChunk], NormKind norm,
                                               NormStats stats, const float* gamma,
                                               const float* beta, int64_t j, int count, bool vector,
                                               float (&y)[kChunk]) {
  if (norm == NormKind::kNone) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) y[i] = x[i];
    return;
  }
  float g[kChunk];
  LoadChunkOr(gamma, j, 1.0f, count, vector, g);
  if (norm == NormKind::kRmsNorm) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) y[i] = x[i] * stats.inv * g[i];
    return;
  }
  float b[kChunk];
  LoadChunkOr(beta, j, 0.0f, count, vector, b);
#pragma unroll
  for (int i = 0; i < kChunk; ++i) y[i] = (x[i] - stats.mean) * stats.inv * g[i] + b[i];
}

// grid: num_tokens blocks; block: RowThreads(hidden); dynamic smem: hidden floats.
template <typename TTable, typename TAct>
__global__ void __launch_bounds__(kRowMaxThreads) EmbeddingKernel(EmbeddingArgs args, bool vector) {
  __shared__ float scratch[kMaxWarps];
  float* row = DynamicSmemF32();  // f32 [hidden]: the sum
  const int64_t t = blockIdx.x, n = args.hidden;
  const TTable* word =
      static_cast<const TTable*>(args.word) + static_cast<int64_t>(args.ids[t]) * n;
  const TTable* position = nullptr;
  if (args.position != nullptr && args.positions != nullptr) {
    position =
        static_cast<const TTable*>(args.position) + static_cast<int64_t>(args.positions[t]) * n;
  }
  const TTable* type = nullptr;
  if (args.type != nullptr) {
    const int64_t type_id = args.type_ids != nullptr ? args.type_ids[t] : 0;
    type = static_cast<const TTable*>(args.type) + type_id * n;
  }
  const int64_t chunks = CeilDiv(n, kChunk);

  // Pass 1: sum = word (+ position) (+ type), added in that order as the CPU does.
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t j = c * kChunk;
    const int count = ChunkCount(n, j);
    float sum[kChunk], term[kChunk];
    LoadChunk(word + j, count, vector, sum);
    if (position != nullptr) {
      LoadChunk(position + j, count, vector, term);
#pragma unroll
      for (int i = 0; i < kChunk; ++i) sum[i] += term[i];
    }
    if (type != nullptr) {
      LoadChunk(type + j, count, vector, term);
#pragma unroll
      for (int i = 0; i < kChunk; ++i) sum[i] += term[i];
    }
    StoreChunk(row + j, count, /*vector=*/true, sum);  // shared: always 32-byte aligned chunks
    if (args.sum_f32 != nullptr) StoreChunk(args.sum_f32 + t * n + j, count, vector, sum);
  }
  if (args.normed_f32 == nullptr && args.normed == nullptr) return;  // block-uniform
  __syncthreads();
  const NormStats stats = RowStats(row, n, args.norm, args.eps, scratch);

  // Pass 2: each thread reads back the chunks it wrote in pass 1.
  TAct* normed = args.normed != nullptr ? static_cast<TAct*>(args.normed) + t * n : nullptr;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t j = c * kChunk;
    const int count = ChunkCount(n, j);
    float x[kChunk], y[kChunk];
    LoadChunk(row + j, count, /*vector=*/true, x);
    NormalizeChunk(x, args.norm, stats, args.gamma, args.beta, j, count, vector, y);
    if (args.normed_f32 != nullptr) StoreChunk(args.normed_f32 + t * n + j, count, vector, y);
    if (normed != nullptr) StoreChunk(normed + j, count, vector, y);
  }
}

// grid: num_tokens blocks; block: RowThreads(hidden); dynamic smem: hidden floats. In place on
// residual: a thread writes only the elements it read itself.
template <typename TAct>
__global__ void __launch_bounds__(kRowMaxThreads) AddNormKernel(AddNormArgs args, bool vector) {
  __shared__ float scratch[kMaxWarps];
  float* row = DynamicSmemF32();  // f32 [hidden]: residual + add (+ bias)
  const int64_t t = blockIdx.x, n = args.hidden;
  float* residual = args.residual + t * n;
  const TAct* add =
      args.add != nullptr ? static_cast<const TAct*>(args.add) + t * args.add_stride : nullptr;
  const bool residual_changes = add != nullptr || args.bias != nullptr;
  const int64_t chunks = CeilDiv(n, kChunk);

  // Pass 1: x = residual + (add + bias), the CPU's order (the GEMM output with its bias, then the
  // residual); the sum goes back to residual unless pass 2 overwrites it with the normed row.
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t j = c * kChunk;
    const int count = ChunkCount(n, j);
    float x[kChunk], a[kChunk], b[kChunk];
    LoadChunk(residual + j, count, vector, x);
    if (add != nullptr) {
      LoadChunk(add + j, count, vector, a);
      if (args.bias != nullptr) {
        LoadChunk(args.bias + j, count, vector, b);
#pragma unroll
        for (int i = 0; i < kChunk; ++i) a[i] += b[i];
      }
#pragma unroll
      for (int i = 0; i < kChunk; ++i) x[i] += a[i];
    } else if (args.bias != nullptr) {
      LoadChunk(args.bias + j, count, vector, b);
#pragma unroll
      for (int i = 0; i < kChunk; ++i) x[i] += b[i];
    }
    StoreChunk(row + j, count, /*vector=*/true, x);
    if (residual_changes && !args.store_normed_in_residual) {
      StoreChunk(residual + j, count, vector, x);
    }
  }
  TAct* normed =
      args.normed != nullptr ? static_cast<TAct*>(args.normed) + t * args.normed_stride : nullptr;
  if (normed == nullptr && !args.store_normed_in_residual) return;  // block-uniform
  __syncthreads();
  const NormStats stats = RowStats(row, n, args.norm, args.eps, scratch);

  // Pass 2.
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t j = c * kChunk;
    const int count = ChunkCount(n, j);
    float x[kChunk], y[kChunk];
    LoadChunk(row + j, count, /*vector=*/true, x);
    NormalizeChunk(x, args.norm, stats, args.gamma, args.beta, j, count, vector, y);
    if (normed != nullptr) StoreChunk(normed + j, count, vector, y);
    if (args.store_normed_in_residual) StoreChunk(residual + j, count, vector, y);
  }
}

// grid: rows blocks; block: RowThreads(n); dynamic smem: n floats. out may equal x (same stride):
// a thread writes only the elements it read itself.
template <typename TAct>
__global__ void __launch_bounds__(kRowMaxThreads)
    NormKernel(const TAct* x, int64_t x_stride, NormKind norm, const float* gamma,
               const float* beta, float eps, TAct* out, int64_t out_stride, int64_t n,
               bool vector) {
  __shared__ float scratch[kMaxWarps];
  float* row = DynamicSmemF32();  // f32 [n]
  const int64_t r = blockIdx.x;
  const TAct* in = x + r * x_stride;
  TAct* dst = out + r * out_stride;
  const int64_t chunks = CeilDiv(n, kChunk);
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t j = c * kChunk;
    const int count = ChunkCount(n, j);
    float v[kChunk];
    LoadChunk(in + j, count, vector, v);
    StoreChunk(row + j, count, /*vector=*/true, v);
  }
  __syncthreads();
  const NormStats stats = RowStats(row, n, norm, eps, scratch);
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t j = c * kChunk;
    const int count = ChunkCount(n, j);
    float v[kChunk], y[kChunk];
    LoadChunk(row + j, count, /*vector=*/true, v);
    NormalizeChunk(v, norm, stats, gamma, beta, j, count, vector, y);
    StoreChunk(dst + j, count, vector, y);
  }
}

// Launches a row kernel: rows blocks of RowThreads(n) threads with n floats of dynamic shared
// memory. rows > INT_MAX (the grid's x limit) is refused.
template <typename... Params, typename... Args>
cudaError_t LaunchRowKernel(void (*kernel)(Params...), int64_t rows, int64_t n, cudaStream_t stream,
                            Args... args) {
  if (rows > INT_MAX) return cudaErrorInvalidValue;
  const size_t smem_bytes = static_cast<size_t>(n) * sizeof(float);
  if (const cudaError_t error = AllowDynamicSmem(kernel, smem_bytes); error != cudaSuccess) {
    return error;
  }
  kernel<<<static_cast<unsigned>(rows), RowThreads(n), smem_bytes, stream>>>(args...);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Embedding(const EmbeddingArgs& args, cudaStream_t stream) {
  if (!ValidNorm(args.norm)) return cudaErrorInvalidValue;
  return DispatchAct(args.table_dtype, [&](auto table_tag) {
    return DispatchAct(args.act, [&](auto act_tag) {
      using TTable = typename decltype(table_tag)::type;
      using TAct = typename decltype(act_tag)::type;
      if (args.num_tokens <= 0 || args.hidden <= 0) return cudaSuccess;
      const int64_t n = args.hidden;
      const bool vector = RowsAligned16(args.word, n, sizeof(TTable)) &&
                          RowsAligned16(args.position, n, sizeof(TTable)) &&
                          RowsAligned16(args.type, n, sizeof(TTable)) &&
                          RowsAligned16(args.gamma, 0, sizeof(float)) &&
                          RowsAligned16(args.beta, 0, sizeof(float)) &&
                          RowsAligned16(args.sum_f32, n, sizeof(float)) &&
                          RowsAligned16(args.normed_f32, n, sizeof(float)) &&
                          RowsAligned16(args.normed, n, sizeof(TAct));
      return LaunchRowKernel(EmbeddingKernel<TTable, TAct>, args.num_tokens, n, stream, args,
                             vector);
    });
  });
}

cudaError_t AddNorm(const AddNormArgs& args, cudaStream_t stream) {
  if (!ValidNorm(args.norm)) return cudaErrorInvalidValue;
  return DispatchAct(args.act, [&](auto act_tag) {
    using TAct = typename decltype(act_tag)::type;
    if (args.num_tokens <= 0 || args.hidden <= 0) return cudaSuccess;
    const int64_t n = args.hidden;
    const bool vector = RowsAligned16(args.residual, n, sizeof(float)) &&
                        RowsAligned16(args.add, args.add_stride, sizeof(TAct)) &&
                        RowsAligned16(args.bias, 0, sizeof(float)) &&
                        RowsAligned16(args.gamma, 0, sizeof(float)) &&
                        RowsAligned16(args.beta, 0, sizeof(float)) &&
                        RowsAligned16(args.normed, args.normed_stride, sizeof(TAct));
    return LaunchRowKernel(AddNormKernel<TAct>, args.num_tokens, n, stream, args, vector);
  });
}

cudaError_t Norm(const void* x, int64_t x_stride, NormKind norm, const float* gamma,
                 const float* beta, float eps, void* out, int64_t out_stride, int64_t rows,
                 int64_t n, DType act, cudaStream_t stream) {
  if (!ValidNorm(norm)) return cudaErrorInvalidValue;
  return DispatchAct(act, [&](auto act_tag) {
    using TAct = typename decltype(act_tag)::type;
    if (rows <= 0 || n <= 0) return cudaSuccess;
    const bool vector =
        RowsAligned16(x, x_stride, sizeof(TAct)) && RowsAligned16(out, out_stride, sizeof(TAct)) &&
        RowsAligned16(gamma, 0, sizeof(float)) && RowsAligned16(beta, 0, sizeof(float));
    return LaunchRowKernel(NormKernel<TAct>, rows, n, stream, static_cast<const TAct*>(x), x_stride,
                           norm, gamma, beta, eps, static_cast<TAct*>(out), out_stride, n, vector);
  });
}

}  // namespace quiver::engine::cuda
