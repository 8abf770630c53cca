// One thread's int8 products at all-MiniLM-L6-v2's shapes, as the engine runs them (rows quantized
// as bytes, QuantizeRowsU8, then QuantizedGemmU8 over the layer's columns, in steps of 64 rows),
// against the vpdpbusd rate of the active path (zmm on avx512_vnni and amx, AVX-VNNI's ymm on
// avx2_vnni; independent accumulators, nothing else). Prints one JSON
// line per shape with the median over rounds, in int8 multiply-adds x 2 per second (GOP/s).
// Needs a path that multiplies bytes (avx2_vnni, avx512_vnni or amx; QUIVER_CPU_ISA picks one).
//
//   quiver_int8_products_bench [--rounds 9] [--rows 64]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/gemm_int8.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

namespace cpu = quiver::engine::cpu;
using cpu::QuantizedWeights;

double Seconds(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

#if defined(__x86_64__)
// The vpdpbusd rate on zmm: 24 independent accumulators (zmm8-zmm31), `iters` x 24 instructions.
__attribute__((target("avx512f,avx512vnni"))) double VnniPeak(int64_t iters) {
  const auto t = std::chrono::steady_clock::now();
  __asm__ volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vpternlogd $0xff, %%zmm1, %%zmm1, %%zmm1\n\t"
      "1:\n\t"
#define QUIVER_DP(r) "vpdpbusd %%zmm1, %%zmm0, %%zmm" #r "\n\t"
      QUIVER_DP(8) QUIVER_DP(9) QUIVER_DP(10) QUIVER_DP(11) QUIVER_DP(12) QUIVER_DP(13)
          QUIVER_DP(14) QUIVER_DP(15) QUIVER_DP(16) QUIVER_DP(17) QUIVER_DP(18) QUIVER_DP(19)
              QUIVER_DP(20) QUIVER_DP(21) QUIVER_DP(22) QUIVER_DP(23) QUIVER_DP(24) QUIVER_DP(25)
                  QUIVER_DP(26) QUIVER_DP(27) QUIVER_DP(28) QUIVER_DP(29) QUIVER_DP(30)
                      QUIVER_DP(31)
#undef QUIVER_DP
                          "dec %0\n\t"
                          "jnz 1b\n\t"
      : "+r"(iters)
      :
      : "xmm0", "xmm1", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
        "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25",
        "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "cc");
  return Seconds(t);
}

// The same on ymm with AVX-VNNI's VEX encoding (12 accumulators, ymm4-ymm15).
__attribute__((target("avx2,avxvnni"))) double AvxVnniPeak(int64_t iters) {
  const auto t = std::chrono::steady_clock::now();
  __asm__ volatile(
      "vpxor %%ymm0, %%ymm0, %%ymm0\n\t"
      "vpcmpeqd %%ymm1, %%ymm1, %%ymm1\n\t"
      "1:\n\t"
#define QUIVER_DP(r) "%{vex%} vpdpbusd %%ymm1, %%ymm0, %%ymm" #r "\n\t"
      QUIVER_DP(4) QUIVER_DP(5) QUIVER_DP(6) QUIVER_DP(7) QUIVER_DP(8) QUIVER_DP(9) QUIVER_DP(10)
          QUIVER_DP(11) QUIVER_DP(12) QUIVER_DP(13) QUIVER_DP(14) QUIVER_DP(15)
#undef QUIVER_DP
              "dec %0\n\t"
              "jnz 1b\n\t"
      : "+r"(iters)
      :
      : "xmm0", "xmm1", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "cc");
  return Seconds(t);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int rounds = 9, rows = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--rounds")
      rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (f == "--rows")
      rows = std::clamp(std::atoi(argv[i + 1]), 1, 4096);
    else {
      std::fprintf(stderr, "unknown flag %s (flags: --rounds N, --rows R)\n", f.c_str());
      return 2;
    }
  }
  if (!cpu::Int8BytesActive()) {
    std::fprintf(stderr, "the active path does not multiply bytes\n");
    return 2;
  }
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {
      {"qkv", 1152, 384}, {"o", 384, 384}, {"up", 1536, 384}, {"down", 384, 1536}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const char* path = cpu::CpuPathName(cpu::ActiveCpuPath());
#if defined(__x86_64__)
  // The peak of the vpdpbusd the active path runs (zmm on avx512_vnni and amx, ymm on avx2_vnni).
  const bool zmm = cpu::ActiveCpuPath() >= cpu::CpuPath::kAvx512Vnni;
  {
    constexpr int64_t kIters = 2'000'000;
    std::vector<double> peaks;
    for (int r = 0; r < rounds; ++r) {
      const double ops = (zmm ? 24.0 * 64 : 12.0 * 32) * 2 * kIters;
      peaks.push_back(ops / (zmm ? VnniPeak(kIters) : AvxVnniPeak(kIters)) / 1e9);
    }
    std::sort(peaks.begin(), peaks.end());
    std::printf("{\"path\": \"%s\", \"%s\": %.1f}\n", path,
                zmm ? "vpdpbusd_zmm_gops" : "vpdpbusd_ymm_gops", peaks[peaks.size() / 2]);
  }
#endif
  for (const Shape& s : shapes) {
    std::vector<float> w(static_cast<size_t>(s.n) * s.k), x(static_cast<size_t>(rows) * s.k);
    for (float& v : w) v = u(rng) * 0.1f;
    for (float& v : x) v = u(rng);
    const QuantizedWeights q(w.data(), s.n, s.k);
    const int64_t depth = q.quad_depth();
    std::vector<uint8_t> bytes(static_cast<size_t>(rows + 15) * depth);
    std::vector<int32_t> zero(rows);
    std::vector<float> scale(rows), bias(s.n, 0.5f), y(static_cast<size_t>(rows) * s.n);
    std::vector<double> gemm, quantize;
    for (int r = 0; r < rounds; ++r) {
      const int reps = std::max(1, 200'000'000 / (rows * s.n * s.k));
      auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        cpu::QuantizeRowsU8(x.data(), s.k, s.k, depth, 0, rows, bytes.data(), zero.data(),
                            scale.data());
      }
      quantize.push_back(Seconds(t) / reps);
      t = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        cpu::QuantizedGemmU8(bytes.data(), zero.data(), scale.data(), q, bias.data(), y.data(), s.n,
                             rows, 0, s.n);
      }
      gemm.push_back(2.0 * rows * s.n * s.k / (Seconds(t) / reps) / 1e9);
    }
    std::sort(gemm.begin(), gemm.end());
    std::sort(quantize.begin(), quantize.end());
    std::printf(
        "{\"path\": \"%s\", \"shape\": \"%s\", \"rows\": %d, \"n\": %d, \"k\": %d, "
        "\"gemm_gops\": %.1f, \"quantize_us\": %.2f}\n",
        path, s.name, rows, s.n, s.k, gemm[gemm.size() / 2], quantize[quantize.size() / 2] * 1e6);
  }
  return 0;
}
