// Which GEMM for the CPU engine: the products all-MiniLM-L6-v2 runs, timed with one library (the
// one this file is linked against, chosen by bench/gemm_choice.sh), in the two ways the engine
// could call it:
//   own-threads   the whole product, the library's own 2 threads;
//   row-blocks    blocks of 256 rows, each single-threaded, two threads taking blocks (what
//                 kernels/cpu/kernels.cc does, so that bias, GELU and LayerNorm run on a block
//                 while it is in cache);
// plus the 2048^3 product with the library's own threads. Prints JSON lines. `gemm_choice own`
// or `gemm_choice blocks` runs one of the two (oneDNN takes its thread count from
// OMP_NUM_THREADS at start, so the script runs it once per mode).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(QUIVER_GEMM_DNNL)
#include <dnnl.h>
#elif defined(QUIVER_GEMM_OWN)
#include "engine/kernels/cpu/gemm.h"
#else
#include <cblas.h>
#endif

#if defined(QUIVER_GEMM_OPENBLAS)
extern "C" void openblas_set_num_threads(int);
#elif defined(QUIVER_GEMM_BLIS)
#include <blis.h>
#endif

namespace {

const char* kLibrary =
#if defined(QUIVER_GEMM_DNNL)
    "oneDNN";
#elif defined(QUIVER_GEMM_OWN)
    "quiver packed GEMM";
#elif defined(QUIVER_GEMM_BLIS)
    "BLIS";
#else
    "OpenBLAS";
#endif

void SetThreads(int n) {
#if defined(QUIVER_GEMM_OPENBLAS)
  openblas_set_num_threads(n);
#elif defined(QUIVER_GEMM_BLIS)
  bli_thread_set_num_threads(n);
#else
  (void)n;  // oneDNN's sgemm threads follow OMP_NUM_THREADS; blocks call it from 2 threads
#endif
}

// y[m, n] = x[m, k] · w[n, k]^T, row-major, ldy = n.
void Gemm(const float* x, const float* w, float* y, int m, int n, int k, int ldy) {
#if defined(QUIVER_GEMM_OWN)
  // Packed once per weight matrix, as the engine does at load (the pointer identifies it).
  thread_local const float* packed_from = nullptr;
  thread_local quiver::engine::cpu::PackedWeights packed;
  thread_local int64_t packed_n = 0, packed_k = 0;
  if (packed_from != w || packed_n != n || packed_k != k) {
    packed = quiver::engine::cpu::PackedWeights(w, n, k);
    packed_from = w;
    packed_n = n;
    packed_k = k;
  }
  quiver::engine::cpu::PackedGemm(x, k, packed, nullptr, y, ldy, m, 0, n);
#elif defined(QUIVER_GEMM_DNNL)
  dnnl_sgemm('N', 'T', m, n, k, 1.0f, x, k, w, k, 0.0f, y, ldy);
#else
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, ldy);
#endif
}

// y = x · wᵀ in blocks of 256 rows, two threads taking blocks (the engine's way), each block's
// product single-threaded.
void RowBlocks(const float* x, const float* w, float* y, int m, int n, int k) {
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int b; (b = next.fetch_add(1)) * 256 < m;) {
      const int r0 = b * 256;
      Gemm(x + static_cast<size_t>(r0) * k, w, y + static_cast<size_t>(r0) * n,
           std::min(256, m - r0), n, k, n);
    }
  };
  std::thread other(worker);
  worker();
  other.join();
}

template <typename Fn>
double BestGflops(Fn fn, double flops) {
  fn();
  double best = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(3)) {
    const auto t = std::chrono::steady_clock::now();
    fn();
    best = std::max(
        best,
        flops / std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string only = argc > 1 ? argv[1] : "";
  constexpr int kTokens = 12800;  // 100 texts of 128 tokens
  const int shapes[4][2] = {{1152, 384}, {384, 384}, {1536, 384}, {384, 1536}};  // qkv, o, up, down
  std::vector<float> x(static_cast<size_t>(kTokens) * 1536), w(1536 * 1536),
      y(static_cast<size_t>(kTokens) * 1536);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
#if defined(QUIVER_GEMM_OWN)
  only = "blocks";  // no threading of its own: the engine's pool takes blocks
#endif
  if (only != "blocks") {
    constexpr int n = 2048;
    SetThreads(2);
    std::printf(
        "{\"library\": \"%s\", \"shape\": \"2048^3\", \"mode\": \"own-threads\", \"gflops\": "
        "%.1f}\n",
        kLibrary,
        BestGflops([&] { Gemm(x.data(), w.data(), y.data(), n, n, n, n); }, 2.0 * n * n * n));
  }
  if (only == "blocks") {  // the large product, 2 threads taking blocks of 256 rows
    constexpr int n = 2048;
    SetThreads(1);
    std::printf(
        "{\"library\": \"%s\", \"shape\": \"2048^3\", \"mode\": \"row-blocks\", \"gflops\": "
        "%.1f}\n",
        kLibrary,
        BestGflops([&] { RowBlocks(x.data(), w.data(), y.data(), n, n, n); }, 2.0 * n * n * n));
  }
  for (const auto& s : shapes) {
    const int n = s[0], k = s[1];
    const double flops = 2.0 * kTokens * n * k;
    SetThreads(2);
    const double own =
        only == "blocks"
            ? 0
            : BestGflops([&] { Gemm(x.data(), w.data(), y.data(), kTokens, n, k, n); }, flops);
    SetThreads(1);
    const double blocks =
        only == "own"
            ? 0
            : BestGflops([&] { RowBlocks(x.data(), w.data(), y.data(), kTokens, n, k); }, flops);
    std::printf(
        "{\"library\": \"%s\", \"shape\": \"%dx%dx%d\", \"own_threads_gflops\": %.1f, "
        "\"row_blocks_gflops\": %.1f}\n",
        kLibrary, kTokens, n, k, own, blocks);
  }
  return 0;
}
