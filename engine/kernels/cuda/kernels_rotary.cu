// HeadNormRotary (kernels.h): Qwen3's per-head q/k RMSNorm and rotary in one pass, in place.
//
// One block per token, min(heads, 8) warps; warp w takes heads w, w + warps, ... and each head
// slice is one warp's work. The block first puts gamma and the token's cos/sin table (head_dim / 2
// angles, shared by every head) in shared memory; then each warp copies its head slice to shared
// memory in f32 (lane-owned chunks of 8, 16-byte loads when aligned), sums the squares (warp
// shuffle), and writes every output element from the shared copy, so that both elements of a
// rotary pair are read before either is written. The normed values stay in f32 between the norm
// and the rotation (transformers rounds them to the activation dtype in between; the CPU, in f32,
// does not).
//
// Dynamic shared memory: warps · round_up(head_dim, 8) + head_dim + 2 · (head_dim / 2) floats
// (head_dim 128: 3 KiB with 4 warps, 5 KiB with 8).
#include <climits>
#include <cstdint>

#include "engine/kernels/cuda/kernels.h"
#include "engine/kernels/cuda/kernels_common.cuh"

namespace quiver::engine::cuda {
namespace {

using detail::AllowDynamicSmem;
using detail::CeilDiv;
using detail::ChunkCount;
using detail::DispatchAct;
using detail::DynamicSmemF32;
using detail::kChunk;
using detail::kWarpSize;
using detail::LoadChunk;
using detail::RowsAligned16;
using detail::StoreChunk;
using detail::WarpSum;

constexpr int kMaxHeadWarps = 8;
constexpr int kHeadMaxThreads = kMaxHeadWarps * kWarpSize;

// grid: num_tokens blocks; block: warps · 32 threads; dynamic smem as above. slice_stride (floats
// per warp's slice copy) is head_dim rounded up to a chunk, so every slice chunk is 32-byte
// aligned in shared memory.
template <typename TAct>
__global__ void __launch_bounds__(kHeadMaxThreads)
    HeadNormRotaryKernel(HeadNormRotaryArgs args, bool vector, int64_t slice_stride) {
  const int64_t t = blockIdx.x, head_dim = args.head_dim, half = head_dim / 2;
  const int warps = blockDim.x / kWarpSize, warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  float* slices = DynamicSmemF32();              // f32 [warps, slice_stride]
  float* gamma = slices + warps * slice_stride;  // f32 [head_dim]
  float* cos_table = gamma + head_dim;           // f32 [half]
  float* sin_table = cos_table + half;           // f32 [half]
  const bool norm = args.gamma != nullptr, rotary = args.positions != nullptr;

  if (norm) {
    for (int64_t j = threadIdx.x; j < head_dim; j += blockDim.x) gamma[j] = args.gamma[j];
  }
  if (rotary) {
    // As engine/kernels/cpu/kernels.cc (and transformers): inv_freq = 1 / theta^(2i / head_dim)
    // with the power in f64 rounded to f32 and the reciprocal in f32; angle = position · inv_freq
    // in f32. cos and sin are taken in f64 and rounded, within an ulp of the CPU's f32 cosf/sinf.
    const float position = static_cast<float>(args.positions[t]);
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const double exponent = static_cast<double>(2 * i) / static_cast<double>(head_dim);
      const float inv_freq = 1.0f / static_cast<float>(pow(args.theta, exponent));
      const float angle = position * inv_freq;
      double s, c;
      sincos(static_cast<double>(angle), &s, &c);
      cos_table[i] = static_cast<float>(c);
      sin_table[i] = static_cast<float>(s);
    }
  }
  __syncthreads();

  // Elements [0, rotated) belong to a rotary pair; an odd head_dim's last element does not, and
  // (as on the CPU) is only normed.
  const int64_t rotated = rotary ? 2 * half : 0;
  const bool neox = args.layout == RotaryLayout::kNeox;
  TAct* x_row = static_cast<TAct*>(args.x) + t * args.x_stride;
  float* slice = slices + warp * slice_stride;  // this warp's f32 copy of the head slice
  const int64_t chunks = CeilDiv(head_dim, kChunk);
  for (int64_t h = warp; h < args.heads; h += warps) {  // warp-uniform loop
    TAct* x = x_row + h * head_dim;
    float sum_sq = 0.0f;
    for (int64_t c = lane; c < chunks; c += kWarpSize) {
      const int64_t j = c * kChunk;
      const int count = ChunkCount(head_dim, j);
      float v[kChunk];
      LoadChunk(x + j, count, vector, v);  // zeros past count
      StoreChunk(slice + j, count, /*vector=*/true, v);
#pragma unroll
      for (int i = 0; i < kChunk; ++i) sum_sq += v[i] * v[i];
    }
    // 1 / √(Σx² / head_dim + eps), as RmsNorm on the CPU (which sums in f64; f32 here).
    float inv_rms = 1.0f;
    if (norm) inv_rms = 1.0f / sqrtf(WarpSum(sum_sq) / static_cast<float>(head_dim) + args.eps);
    __syncwarp();  // the slice copy is complete and visible to every lane

    // The normed element k of the slice (x · inv · gamma, the CPU's order; x without gamma).
    auto normed = [&](int64_t k) { return norm ? slice[k] * inv_rms * gamma[k] : slice[k]; };
    for (int64_t c = lane; c < chunks; c += kWarpSize) {
      const int64_t j = c * kChunk;
      const int count = ChunkCount(head_dim, j);
      float out[kChunk];
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const int64_t k = j + i;
        if (i >= count) {
          out[i] = 0.0f;  // past the slice: not stored
        } else if (k >= rotated) {
          out[i] = normed(k);
        } else if (neox) {
          // Pair (p, p + half): out[p] = a·cos - b·sin, out[p + half] = b·cos + a·sin.
          if (k < half) {
            out[i] = normed(k) * cos_table[k] - normed(k + half) * sin_table[k];
          } else {
            const int64_t p = k - half;
            out[i] = normed(k) * cos_table[p] + normed(p) * sin_table[p];
          }
        } else {
          // Pair (2p, 2p + 1): out[2p] = a·cos - b·sin, out[2p + 1] = b·cos + a·sin.
          const int64_t p = k / 2;
          if (k % 2 == 0) {
            out[i] = normed(k) * cos_table[p] - normed(k + 1) * sin_table[p];
          } else {
            out[i] = normed(k) * cos_table[p] + normed(k - 1) * sin_table[p];
          }
        }
      }
      StoreChunk(x + j, count, vector, out);
    }
    __syncwarp();  // every lane is done reading the slice before the next head overwrites it
  }
}

}  // namespace

cudaError_t HeadNormRotary(const HeadNormRotaryArgs& args, cudaStream_t stream) {
  if (args.layout != RotaryLayout::kNeox && args.layout != RotaryLayout::kGptJ) {
    return cudaErrorInvalidValue;
  }
  return DispatchAct(args.act, [&](auto act_tag) {
    using TAct = typename decltype(act_tag)::type;
    if (args.num_tokens <= 0 || args.heads <= 0 || args.head_dim <= 0) return cudaSuccess;
    if (args.gamma == nullptr && args.positions == nullptr) return cudaSuccess;  // identity
    if (args.num_tokens > INT_MAX) return cudaErrorInvalidValue;
    const int64_t head_dim = args.head_dim;
    const int warps = static_cast<int>(args.heads < kMaxHeadWarps ? args.heads : kMaxHeadWarps);
    const int64_t slice_stride = CeilDiv(head_dim, kChunk) * kChunk;
    const size_t smem_bytes =
        static_cast<size_t>(warps * slice_stride + head_dim + 2 * (head_dim / 2)) * sizeof(float);
    // Every head slice starts 16-byte aligned when the row does and a slice is a multiple of 16
    // bytes.
    const bool vector = RowsAligned16(args.x, args.x_stride, sizeof(TAct)) &&
                        (head_dim * static_cast<int64_t>(sizeof(TAct))) % 16 == 0;
    auto* kernel = HeadNormRotaryKernel<TAct>;
    if (const cudaError_t error = AllowDynamicSmem(kernel, smem_bytes); error != cudaSuccess) {
      return error;
    }
    kernel<<<static_cast<unsigned>(args.num_tokens), warps * kWarpSize, smem_bytes, stream>>>(
        args, vector, slice_stride);
    return cudaGetLastError();
  });
}

}  // namespace quiver::engine::cuda
