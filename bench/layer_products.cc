// One thread's share of all-MiniLM-L6-v2's products at a batch-1 shape, timed on one thread with
// six layers' own weights (42 MB in f32: each call reads them from beyond L2, as the engine does),
// for the weights marked streamed (packed at construction: the f32 kernels prefetch their next
// panels, gemm.h, in calls of 28 rows or more: below that the two columns are the same code)
// against the same panels repacked in place (no prefetch), in turns in one process. Prints one
// JSON line per shape with the medians over rounds, in GFLOP/s.
//
//   quiver_layer_products_bench [--rounds 9] [--rows 64,128,256]
//   QUIVER_CPU_ISA=avx2 quiver_layer_products_bench    # the avx2 kernel
//
// Shapes per rows r: "qkv", the query, key and value columns of 6 of the 12 heads (what
// QkvAttentionByHeads gives one thread at batch 1), and "ffn", the output projection and the
// feed-forward in 256-column slices of the intermediate (FeedForwardRows), over r rows; for scale,
// "resident", one 384 x 384 layer's product over r rows again and again (its weights stay in the
// core's cache: the micro-kernels alone), and "fma_peak", independent FMAs on the thread (no
// memory; bench/fma_loops.h), each timed in the same rounds.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/fma_loops.h"
#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/gemm.h"

namespace {

using quiver::engine::cpu::PackedGemm;
using quiver::engine::cpu::PackedGemmSlice;
using quiver::engine::cpu::PackedWeights;

constexpr int kLayers = 6, kHidden = 384, kInter = 1536, kHeadDim = 32, kHeads = 6;
constexpr int kSlice = 256;

// What the FMA loop returns, stored so that the loop runs.
volatile float fma_sink;

struct Layer {
  PackedWeights qkv, o, up, down;
};

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

PackedWeights Make(const std::vector<float>& w, int n, int k, bool streamed) {
  if (streamed) return PackedWeights(w.data(), n, k);
  PackedWeights p;
  p.Pack(w.data(), n, k, k);
  return p;
}

double Seconds(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A whole number in [lo, hi] from `text`, or -1 (the caller names the flag).
int ParseCount(const std::string& text, int lo, int hi) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) return -1;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 9;
  std::vector<int> row_counts = {64, 128, 256};
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (f != "--rounds" && f != "--rows") {
      std::fprintf(stderr, "unknown flag %s (flags: --rounds N, --rows R1,R2,...)\n", f.c_str());
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", f.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    if (f == "--rounds") {
      rounds = ParseCount(v, 1, 1000);
      if (rounds < 0) {
        std::fprintf(stderr, "--rounds: '%s' is not a whole number in [1, 1000]\n", v.c_str());
        return 2;
      }
      continue;
    }
    row_counts.clear();
    std::stringstream list(v);
    for (std::string item; std::getline(list, item, ',');) {
      const int r = ParseCount(item, 1, 512);
      if (r < 0) {
        std::fprintf(stderr, "--rows: '%s' is not a whole number in [1, 512]\n", item.c_str());
        return 2;
      }
      row_counts.push_back(r);
    }
    if (row_counts.empty()) {
      std::fprintf(stderr, "--rows: no row counts given\n");
      return 2;
    }
  }
  std::mt19937 rng(1);
  std::vector<Layer> layers[2];  // [0]: repacked, [1]: streamed
  for (int l = 0; l < kLayers; ++l) {
    const auto qkv = Random(3 * kHidden * kHidden, rng), o = Random(kHidden * kHidden, rng),
               up = Random(kInter * kHidden, rng), down = Random(kHidden * kInter, rng);
    for (int s = 0; s < 2; ++s) {
      layers[s].push_back({Make(qkv, 3 * kHidden, kHidden, s == 1),
                           Make(o, kHidden, kHidden, s == 1), Make(up, kInter, kHidden, s == 1),
                           Make(down, kHidden, kInter, s == 1)});
    }
  }
  const auto bias = Random(kInter, rng);
  std::vector<float> x = Random(512 * kHidden, rng), attended = Random(512 * kHidden, rng);
  std::vector<float> heads(512 * 3 * kHeadDim), inter(512 * kSlice), out(512 * kHidden);
  const char* path = quiver::engine::cpu::CpuPathName(quiver::engine::cpu::ActiveCpuPath());
  const bool wide = quiver::engine::cpu::ActiveCpuPath() >= quiver::engine::cpu::CpuPath::kAvx512;
  const double fma_flops = wide ? quiver::bench::kFmaLoop512Flops : quiver::bench::kFmaLoop256Flops;
  for (const int rows : row_counts) {
    auto qkv = [&](const std::vector<Layer>& w) {
      for (const Layer& layer : w) {
        for (int h = 0; h < kHeads; ++h) {
          for (int j = 0; j < 3; ++j) {
            const int c = j * kHidden + h * kHeadDim;
            PackedGemm(x.data(), kHidden, layer.qkv, bias.data(), heads.data() + j * kHeadDim - c,
                       3 * kHeadDim, rows, c, c + kHeadDim);
          }
        }
      }
    };
    auto ffn = [&](const std::vector<Layer>& w) {
      for (const Layer& layer : w) {
        PackedGemm(attended.data(), kHidden, layer.o, bias.data(), x.data(), kHidden, rows, 0,
                   kHidden);
        for (int j = 0; j < kInter; j += kSlice) {
          PackedGemm(x.data(), kHidden, layer.up, bias.data(), inter.data() - j, kSlice, rows, j,
                     j + kSlice);
          PackedGemmSlice(inter.data(), kSlice, layer.down, j, j + kSlice, bias.data(), out.data(),
                          kHidden, rows, 0, kHidden, /*accumulate=*/j > 0);
        }
      }
    };
    auto resident = [&] {
      for (int i = 0; i < kLayers; ++i) {
        PackedGemm(attended.data(), kHidden, layers[0][0].o, bias.data(), x.data(), kHidden, rows,
                   0, kHidden);
      }
    };
    const double qkv_flops = 2.0 * rows * kHidden * 3 * kHeadDim * kHeads * kLayers;
    const double ffn_flops = 2.0 * rows * kHidden * (kHidden + 2 * kInter) * kLayers;
    const double resident_flops = 2.0 * rows * kHidden * kHidden * kLayers;
    constexpr int64_t kFmaIterations = 2'000'000;
    std::vector<double> rate[2][2];  // [streamed][qkv, ffn]
    std::vector<double> resident_rate, fma_rate;
    for (int round = 0; round <= rounds; ++round) {
      for (int s = 0; s < 2; ++s) {
        auto t = std::chrono::steady_clock::now();
        for (int i = 0; i < 4; ++i) qkv(layers[s]);
        const double q = Seconds(t) / 4;
        t = std::chrono::steady_clock::now();
        for (int i = 0; i < 2; ++i) ffn(layers[s]);
        const double f = Seconds(t) / 2;
        if (round == 0) continue;  // warm-up
        rate[s][0].push_back(qkv_flops / q / 1e9);
        rate[s][1].push_back(ffn_flops / f / 1e9);
      }
      resident();
      auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < 8; ++i) resident();
      const double r = Seconds(t) / 8;
      t = std::chrono::steady_clock::now();
      fma_sink = wide ? quiver::bench::FmaLoop512(kFmaIterations)
                      : quiver::bench::FmaLoop256(kFmaIterations);
      const double p = Seconds(t);
      if (round == 0) continue;
      resident_rate.push_back(resident_flops / r / 1e9);
      fma_rate.push_back(fma_flops * kFmaIterations / p / 1e9);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf(
        "{\"path\": \"%s\", \"rows\": %d, \"rounds\": %d, \"qkv_gflops\": {\"repacked\": %.1f, "
        "\"streamed\": %.1f}, \"ffn_gflops\": {\"repacked\": %.1f, \"streamed\": %.1f}, "
        "\"resident_gflops\": %.1f, \"fma_peak_gflops\": %.1f}\n",
        path, rows, rounds, median(rate[0][0]), median(rate[1][0]), median(rate[0][1]),
        median(rate[1][1]), median(resident_rate), median(fma_rate));
    std::fflush(stdout);
  }
}
