// Chains of independent fused multiply-adds (more accumulators than the FMA units' latency times
// their count), no memory: the rate of one thread's FMA units, for scale beside a GEMM's
// (quiver_engine_bench's ceiling, quiver_layer_products_bench's shapes). 512 bits wide on a path
// that has them, else 256.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace quiver::bench {

constexpr int kChains512 = 24;
// Floating-point operations per iteration of each loop.
constexpr double kFmaLoop512Flops = 2.0 * kChains512 * 16;

__attribute__((target("avx512f"))) inline float FmaLoop512(int64_t iterations) {
  __m512 acc[kChains512];
  for (int i = 0; i < kChains512; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains512; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < kChains512; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);  // every chain live
  alignas(64) float out[16];
  _mm512_store_ps(out, acc[0]);
  return out[0];
}

// 256 bits: 12 accumulators, as AVX2 has 16 registers (with 24, GCC 12 kept 10 of them on the
// stack, a load and a store around each of their FMAs: 181-219 GFLOP/s at 2 threads on Zen 5,
// where the engine's f32 products reached 238 with avx2 forced).
constexpr int kChains256 = 12;
constexpr double kFmaLoop256Flops = 2.0 * kChains256 * 8;

inline float FmaLoop256(int64_t iterations) {
  __m256 acc[kChains256];
  for (int i = 0; i < kChains256; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains256; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < kChains256; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);  // every chain live
  alignas(32) float out[8];
  _mm256_store_ps(out, acc[0]);
  return out[0];
}

}  // namespace quiver::bench
