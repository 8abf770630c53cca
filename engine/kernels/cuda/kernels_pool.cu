// Pool and LogitDifference (kernels.h).
//
// Pool: one block per output row, one thread per 8-element column chunk (whole warps, 32 to 256
// threads; a thread takes further chunks past 2048 columns). A thread walks the row's tokens in
// order for its columns, so a mean is summed in token order in f32, exactly as the CPU does, and
// reads are coalesced across the block for each token.
//
// LogitDifference: one warp per row, 4 warps (128 threads) per block; lane l takes chunks l,
// l + 32, ... and the warp sums the two dot products with shuffles.
#include <climits>
#include <cstdint>

#include "engine/kernels/cuda/kernels.h"
#include "engine/kernels/cuda/kernels_common.cuh"

namespace quiver::engine::cuda {
namespace {

using detail::CeilDiv;
using detail::ChunkCount;
using detail::DispatchAct;
using detail::kChunk;
using detail::kWarpSize;
using detail::LoadChunk;
using detail::RowsAligned16;
using detail::StoreChunk;
using detail::ToF32;
using detail::WarpSum;

constexpr int kPoolMaxThreads = 256;
constexpr int kLogitWarps = 4;
constexpr int kLogitThreads = kLogitWarps * kWarpSize;

// grid: num_rows blocks; block: whole warps covering the column chunks, at most 256 threads.
template <typename TAct>
__global__ void __launch_bounds__(kPoolMaxThreads)
    PoolKernel(const TAct* hidden, int64_t hidden_stride, const int32_t* bounds, int width,
               int64_t hidden_size, PoolMode mode, float* out, bool vector) {
  const int64_t r = blockIdx.x, n = hidden_size;
  const int64_t begin = bounds[width * r], end = bounds[width * r + 1];
  const int64_t origin = width == 3 ? bounds[width * r + 2] : begin;
  float* dst = out + r * n;
  const int64_t chunks = CeilDiv(n, kChunk);
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t j = c * kChunk;
    const int count = ChunkCount(n, j);
    float acc[kChunk], v[kChunk];
    if (end <= begin) {
      // An empty range breaks the contract; zeros rather than reads out of the range.
#pragma unroll
      for (int i = 0; i < kChunk; ++i) acc[i] = 0.0f;
    } else if (mode == PoolMode::kCls || mode == PoolMode::kLastToken) {
      const int64_t t = mode == PoolMode::kCls ? begin : end - 1;
      LoadChunk(hidden + t * hidden_stride + j, count, vector, acc);
    } else if (mode == PoolMode::kMean || mode == PoolMode::kMeanSqrtLen) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) acc[i] = 0.0f;
      for (int64_t t = begin; t < end; ++t) {
        LoadChunk(hidden + t * hidden_stride + j, count, vector, v);
#pragma unroll
        for (int i = 0; i < kChunk; ++i) acc[i] += v[i];
      }
      // The CPU multiplies by the f32 reciprocal of the count, or of its square root.
      const float length = static_cast<float>(end - begin);
      const float inv = 1.0f / (mode == PoolMode::kMean ? length : sqrtf(length));
#pragma unroll
      for (int i = 0; i < kChunk; ++i) acc[i] *= inv;
    } else if (mode == PoolMode::kWeightedMean) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) acc[i] = 0.0f;
      for (int64_t t = begin; t < end; ++t) {
        LoadChunk(hidden + t * hidden_stride + j, count, vector, v);
        const float w = static_cast<float>(t - origin + 1);
#pragma unroll
        for (int i = 0; i < kChunk; ++i) acc[i] += w * v[i];
      }
      const double hi = static_cast<double>(end - origin), lo = static_cast<double>(begin - origin);
      const float inv = static_cast<float>(1.0 / (hi * (hi + 1) / 2 - lo * (lo + 1) / 2));
#pragma unroll
      for (int i = 0; i < kChunk; ++i) acc[i] *= inv;
    } else {  // kMax: std::max(acc, v) as the CPU, i.e. acc < v ? v : acc
      LoadChunk(hidden + begin * hidden_stride + j, count, vector, acc);
      for (int64_t t = begin + 1; t < end; ++t) {
        LoadChunk(hidden + t * hidden_stride + j, count, vector, v);
#pragma unroll
        for (int i = 0; i < kChunk; ++i) acc[i] = acc[i] < v[i] ? v[i] : acc[i];
      }
    }
    StoreChunk(dst + j, count, vector, acc);
  }
}

// grid: ceil(rows / 4) blocks; block: 4 warps, warp w of block b on row 4b + w.
__global__ void __launch_bounds__(kLogitThreads)
    LogitDifferenceKernel(const float* pooled, int64_t rows, int64_t hidden, const float* yes,
                          const float* no, float* scores, bool vector) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kLogitWarps + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;  // the whole warp leaves: no block-wide synchronization follows
  const float* x = pooled + r * hidden;
  const int64_t chunks = CeilDiv(hidden, kChunk);
  float yes_logit = 0.0f, no_logit = 0.0f;
  for (int64_t c = lane; c < chunks; c += kWarpSize) {
    const int64_t j = c * kChunk;
    const int count = ChunkCount(hidden, j);
    float v[kChunk], y[kChunk], z[kChunk];
    LoadChunk(x + j, count, vector, v);
    LoadChunk(yes + j, count, vector, y);
    LoadChunk(no + j, count, vector, z);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      yes_logit += v[i] * y[i];
      no_logit += v[i] * z[i];
    }
  }
  yes_logit = WarpSum(yes_logit);
  no_logit = WarpSum(no_logit);
  if (lane == 0) scores[r] = yes_logit - no_logit;
}

// grid-stride over the m columns: each thread takes a column's max over every row.
template <typename TAct>
__global__ void __launch_bounds__(256)
    MaxRowsKernel(const TAct* x, int64_t rows, int64_t m, float* out, bool accumulate) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = accumulate ? out[j] : ToF32(x[j]);
    for (int64_t r = accumulate ? 0 : 1; r < rows; ++r) {
      const float v = ToF32(x[r * m + j]);
      acc = acc < v ? v : acc;
    }
    out[j] = acc;
  }
}

bool ValidPoolMode(PoolMode mode) {
  return mode == PoolMode::kCls || mode == PoolMode::kMean || mode == PoolMode::kLastToken ||
         mode == PoolMode::kMax || mode == PoolMode::kMeanSqrtLen ||
         mode == PoolMode::kWeightedMean;
}

}  // namespace

cudaError_t MaxRows(const void* x, int64_t rows, int64_t m, DType act, float* out, bool accumulate,
                    cudaStream_t stream) {
  return DispatchAct(act, [&](auto act_tag) {
    using TAct = typename decltype(act_tag)::type;
    if (rows <= 0 || m <= 0) return cudaSuccess;
    const int64_t blocks = (m + 255) / 256;
    MaxRowsKernel<TAct><<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(
        static_cast<const TAct*>(x), rows, m, out, accumulate);
    return cudaGetLastError();
  });
}

cudaError_t Pool(const void* hidden, int64_t hidden_stride, const int32_t* bounds,
                 int64_t bounds_width, int64_t num_rows, int64_t hidden_size, PoolMode mode,
                 DType act, float* out, cudaStream_t stream) {
  if (!ValidPoolMode(mode) || (bounds_width != 2 && bounds_width != 3)) {
    return cudaErrorInvalidValue;
  }
  return DispatchAct(act, [&](auto act_tag) {
    using TAct = typename decltype(act_tag)::type;
    if (num_rows <= 0 || hidden_size <= 0) return cudaSuccess;
    if (num_rows > INT_MAX) return cudaErrorInvalidValue;
    const int64_t warps = CeilDiv(CeilDiv(hidden_size, kChunk), kWarpSize);
    const int threads =
        static_cast<int>(warps * kWarpSize < kPoolMaxThreads ? warps * kWarpSize : kPoolMaxThreads);
    const bool vector = RowsAligned16(hidden, hidden_stride, sizeof(TAct)) &&
                        RowsAligned16(out, hidden_size, sizeof(float));
    PoolKernel<TAct><<<static_cast<unsigned>(num_rows), threads, 0, stream>>>(
        static_cast<const TAct*>(hidden), hidden_stride, bounds, static_cast<int>(bounds_width),
        hidden_size, mode, out, vector);
    return cudaGetLastError();
  });
}

cudaError_t LogitDifference(const float* pooled, int64_t rows, int64_t hidden, const float* yes,
                            const float* no, float* scores, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  const int64_t blocks = CeilDiv(rows, kLogitWarps);
  if (blocks > INT_MAX) return cudaErrorInvalidValue;
  const bool vector = RowsAligned16(pooled, hidden, sizeof(float)) &&
                      RowsAligned16(yes, 0, sizeof(float)) && RowsAligned16(no, 0, sizeof(float));
  LogitDifferenceKernel<<<static_cast<unsigned>(blocks), kLogitThreads, 0, stream>>>(
      pooled, rows, hidden, yes, no, scores, vector);
  return cudaGetLastError();
}

}  // namespace quiver::engine::cuda
