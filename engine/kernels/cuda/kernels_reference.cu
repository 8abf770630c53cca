// ReferenceGemm (kernels.h): the naive on-GPU product the GEMM tests compare against. Never on the
// serving path, so it is written to be obviously right, not fast: one thread per output element,
// f32 fused multiply-adds in k order, then the bias. Blocks of 32 × 8 threads (x: columns,
// y: rows), ceil(n / 32) × min(ceil(m / 8), 65535) of them; rows past the grid's y limit are
// taken by a grid-stride loop.
#include <climits>
#include <cstdint>

#include "engine/kernels/cuda/kernels.h"
#include "engine/kernels/cuda/kernels_common.cuh"

namespace quiver::engine::cuda {
namespace {

using detail::CeilDiv;
using detail::DispatchAct;
using detail::ToF32;

constexpr int kGemmBlockX = 32, kGemmBlockY = 8;
constexpr int kGemmThreads = kGemmBlockX * kGemmBlockY;
constexpr int64_t kMaxGridY = 65535;

template <typename TX, typename TW>
__global__ void __launch_bounds__(kGemmThreads)
    ReferenceGemmKernel(const TX* x, int64_t ldx, const TW* w, int64_t ldw, const float* bias,
                        float* y, int64_t ldy, int64_t m, int64_t n, int64_t k) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= n) return;  // no synchronization in this kernel
  const TW* w_row = w + col * ldw;
  const int64_t row_step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; row < m;
       row += row_step) {
    const TX* x_row = x + row * ldx;
    float acc = 0.0f;
    for (int64_t i = 0; i < k; ++i) acc = fmaf(ToF32(x_row[i]), ToF32(w_row[i]), acc);
    if (bias != nullptr) acc += bias[col];
    y[row * ldy + col] = acc;
  }
}

}  // namespace

cudaError_t ReferenceGemm(const void* x, int64_t ldx, DType x_dtype, const void* w, int64_t ldw,
                          DType w_dtype, const float* bias, float* y, int64_t ldy, int64_t m,
                          int64_t n, int64_t k, cudaStream_t stream) {
  return DispatchAct(x_dtype, [&](auto x_tag) {
    return DispatchAct(w_dtype, [&](auto w_tag) {
      using TX = typename decltype(x_tag)::type;
      using TW = typename decltype(w_tag)::type;
      if (m <= 0 || n <= 0) return cudaSuccess;
      const int64_t blocks_x = CeilDiv(n, kGemmBlockX);
      if (blocks_x > INT_MAX) return cudaErrorInvalidValue;
      const int64_t blocks_y = CeilDiv(m, kGemmBlockY);
      const dim3 grid(static_cast<unsigned>(blocks_x),
                      static_cast<unsigned>(blocks_y < kMaxGridY ? blocks_y : kMaxGridY));
      ReferenceGemmKernel<TX, TW><<<grid, dim3(kGemmBlockX, kGemmBlockY), 0, stream>>>(
          static_cast<const TX*>(x), ldx, static_cast<const TW*>(w), ldw, bias, y, ldy, m, n, k);
      return cudaGetLastError();
    });
  });
}

}  // namespace quiver::engine::cuda
