// The benchmark suites' shapes run on the engine directly (no HTTP, no gRPC, no scheduler), to
// separate engine cost from serving cost; and this machine's large-GEMM rate with the BLAS the
// engine uses, measured in the same run as the ceiling the engine is held to.
//
//   quiver_engine_bench --model models/all-MiniLM-L6-v2 --inputs .cache/bench/inputs.json
//                       [--threads 2] [--seconds 4] [--suites latency,scoring,throughput]
//                       [--lengths 128,512,4096] [--quantize int8|bf16] [--ceiling-rounds 3]
//
// The throughput suite runs in --ceiling-rounds rounds, the large-GEMM rate measured again before
// each, and reports the median of the rounds' fractions of it (0: one run against the rate
// measured at start-up).
//
// Inputs come from bench/make_inputs.py (texts cut to exact token lengths); they are tokenized
// here with quiver's tokenizer, outside the timed part, and every length is checked. Prints JSON.
//
// With --stdin it loads the engine, prints "ready", and then runs what each line of standard input
// asks, answering with one JSON line, until the input ends. bench/paired.py uses this to measure
// the engine in short turns with other systems (this machine drifts by milliseconds within
// seconds, so compared figures must be taken close together):
//   latency <tokens> <count>   count batch-1 calls, one text of that length each -> [ms, ...]
//   queries <count>            count batch-1 calls, one of the inputs' short queries each (the
//                              corpus's search queries, 4-20 tokens: what a search embeds online)
//   throughput <batches>       that many 100 x 128-token batches, four in flight -> tokens/s
#include <cblas.h>
// GCC 12 warns of the undefined source _mm512_extractf64x4_pd passes its builtin (a false
// positive, as in engine/kernels/cpu/gemm_int8_avx512.cc).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/fma_loops.h"
#include "bench/stdin_protocol.h"
#include "common/json.h"
#include "engine/engine.h"
#include "engine/kernels/cpu/cpu_features.h"
#include "engine/kernels/cpu/gemm.h"
#include "tokenizer/tokenizer.h"

extern "C" void openblas_set_num_threads(int num_threads);
extern "C" char* openblas_get_corename(void);

namespace {

using Clock = std::chrono::steady_clock;
using quiver::bench::MsList;
using quiver::engine::Engine;
using quiver::engine::RaggedBatch;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Nearest-rank percentile of latencies in milliseconds.
double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

std::string LatencyJson(const std::vector<double>& ms) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "\"n\": %zu, \"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": %.3f, "
                "\"mean_ms\": %.3f",
                ms.size(), Percentile(ms, 50), Percentile(ms, 90), Percentile(ms, 99),
                std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size()));
  return buf;
}

// Runs fn at least `min_runs` times and for at least `seconds`, after two warm-up calls;
// returns each call's latency in ms.
template <typename Fn>
std::vector<double> Repeat(Fn fn, double seconds, int min_runs) {
  fn();
  fn();
  std::vector<double> ms;
  const Clock::time_point start = Clock::now();
  while (static_cast<int>(ms.size()) < min_runs || Seconds(start) < seconds) {
    const Clock::time_point t = Clock::now();
    fn();
    ms.push_back(Seconds(t) * 1e3);
  }
  return ms;
}

// The machine's large-GEMM rate on `threads` threads, the ceiling the engine is held to: the
// best of a few 2048^3 products with OpenBLAS (its own threads) and with the engine's packed GEMM
// (threads taking blocks of 256 rows, as the engine's pool does).
struct Ceiling {
  double openblas_gflops = 0, packed_gflops = 0;
  double fma_peak_gflops = 0;  // independent FMAs only: what no GEMM reaches, for scale
  double vnni_peak_gops = 0;   // independent vpdpbusd (avx512_vnni path), int8 ops, for scale
  double best() const { return std::max(openblas_gflops, packed_gflops); }
};

// The same for vpdpbusd: 64 byte products summed into 16 int32 lanes per instruction (128
// int8 operations), the int8 path's ceiling on a host with AVX-512 VNNI. Twelve named
// accumulators: with an array of them GCC 12 stored every one to the stack in each iteration.
__attribute__((target("avx512f,avx512vnni"))) int32_t DpbusdLoop512(int64_t iterations) {
  const __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x05060708);
  __m512i c0 = _mm512_set1_epi32(0), c1 = _mm512_set1_epi32(1), c2 = _mm512_set1_epi32(2),
          c3 = _mm512_set1_epi32(3), c4 = _mm512_set1_epi32(4), c5 = _mm512_set1_epi32(5),
          c6 = _mm512_set1_epi32(6), c7 = _mm512_set1_epi32(7), c8 = _mm512_set1_epi32(8),
          c9 = _mm512_set1_epi32(9), c10 = _mm512_set1_epi32(10), c11 = _mm512_set1_epi32(11);
  for (int64_t it = 0; it < iterations; ++it) {
    c0 = _mm512_dpbusd_epi32(c0, a, b);
    c1 = _mm512_dpbusd_epi32(c1, a, b);
    c2 = _mm512_dpbusd_epi32(c2, a, b);
    c3 = _mm512_dpbusd_epi32(c3, a, b);
    c4 = _mm512_dpbusd_epi32(c4, a, b);
    c5 = _mm512_dpbusd_epi32(c5, a, b);
    c6 = _mm512_dpbusd_epi32(c6, a, b);
    c7 = _mm512_dpbusd_epi32(c7, a, b);
    c8 = _mm512_dpbusd_epi32(c8, a, b);
    c9 = _mm512_dpbusd_epi32(c9, a, b);
    c10 = _mm512_dpbusd_epi32(c10, a, b);
    c11 = _mm512_dpbusd_epi32(c11, a, b);
  }
  const __m512i s0 = _mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3));
  const __m512i s1 = _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7));
  const __m512i s2 = _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11));
  return _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(s0, s1), s2));
}

// Seconds for `threads` threads to run loop() each, all at once; what each returns is kept (so
// that no loop is optimized away).
template <typename Loop>
double SecondsOnEveryThread(int threads, Loop loop) {
  std::vector<double> sink(static_cast<size_t>(threads));
  const Clock::time_point t = Clock::now();
  std::vector<std::thread> all;
  for (int i = 0; i < threads; ++i) {
    all.emplace_back([&, i] { sink[i] = static_cast<double>(loop()); });
  }
  for (std::thread& th : all) th.join();
  return Seconds(t);
}

double MeasureVnniPeak(int threads) {
  constexpr int64_t kIterations = 40'000'000;
  const double seconds = SecondsOnEveryThread(threads, [] { return DpbusdLoop512(kIterations); });
  return 128.0 * 12 * static_cast<double>(kIterations) * threads / seconds / 1e9;
}

double MeasureFmaPeak(int threads) {
  const bool wide = quiver::engine::cpu::ActiveCpuPath() >= quiver::engine::cpu::CpuPath::kAvx512;
  constexpr int64_t kIterations = 20'000'000;
  const double seconds = SecondsOnEveryThread(threads, [wide] {
    return wide ? quiver::bench::FmaLoop512(kIterations) : quiver::bench::FmaLoop256(kIterations);
  });
  const double flops = (wide ? quiver::bench::kFmaLoop512Flops : quiver::bench::kFmaLoop256Flops) *
                       static_cast<double>(kIterations) * threads;
  return flops / seconds / 1e9;
}

// The 2048^3 products only (OpenBLAS and the packed GEMM), each the best of `tries`.
Ceiling MeasureGemmRates(int threads, int tries) {
  constexpr int n = 2048;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  auto best_of = [&](auto fn) {
    double best = 0;
    for (int i = 0; i < tries; ++i) {
      const Clock::time_point t = Clock::now();
      fn();
      best = std::max(best, 2.0 * n * n * n / Seconds(t) / 1e9);
    }
    return best;
  };
  Ceiling ceiling;
  openblas_set_num_threads(threads);
  ceiling.openblas_gflops = best_of([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
  });
  const quiver::engine::cpu::PackedWeights packed(b.data(), n, n);
  ceiling.packed_gflops = best_of([&] {
    std::atomic<int> next{0};
    auto work = [&] {
      for (int block; (block = next.fetch_add(1)) * 256 < n;) {
        quiver::engine::cpu::PackedGemm(a.data() + block * 256 * n, n, packed, nullptr,
                                        c.data() + block * 256 * n, n, 256, 0, n);
      }
    };
    std::vector<std::thread> others;
    for (int i = 1; i < threads; ++i) others.emplace_back(work);
    work();
    for (std::thread& t : others) t.join();
  });
  openblas_set_num_threads(1);  // the engine never calls BLAS: its threads hold nothing now
  return ceiling;
}

Ceiling MeasureCeiling(int threads) {
  Ceiling ceiling = MeasureGemmRates(threads, 6);
  ceiling.fma_peak_gflops = MeasureFmaPeak(threads);
  if (quiver::engine::cpu::ActiveCpuPath() >= quiver::engine::cpu::CpuPath::kAvx512Vnni) {
    ceiling.vnni_peak_gops = MeasureVnniPeak(threads);
  }
  return ceiling;
}

// The kernel set OpenBLAS chose for this CPU (its DYNAMIC_ARCH build picks one at load), and the
// one it should use when the host has AVX2 or AVX-512 but OpenBLAS fell back to an older set
// (0.3.21 does not know some recent CPUs and runs SSE3 kernels there: a ceiling that means
// nothing). "" when the choice fits the host. OPENBLAS_CORETYPE must be set before the process
// starts: bench/run_suites.sh does so from this.
std::string OpenBlasCoreFix(const std::string& core) {
  const quiver::engine::cpu::CpuFeatures& f = quiver::engine::cpu::HostCpuFeatures();
  static const char* const kAvx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", "Zen4"};
  static const char* const kAvx2[] = {"Haswell",        "Zen",  "SkylakeX", "Cooperlake",
                                      "SapphireRapids", "Zen4", "Excavator"};
  auto any = [&](const auto& names) {
    for (const char* n : names) {
      if (core == n) return true;
    }
    return false;
  };
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && !any(kAvx512)) return "SkylakeX";
  if (f.avx2 && f.fma && !any(kAvx2)) return "Haswell";
  return "";
}

// Batches of 100 texts of 128 tokens, four submitted at a time (four clients' worth of requests
// queued, run in order), for at least `seconds` and `min_batches`. Each batch's time from
// submission to result goes to *ms; returns tokens per second.
double Throughput(Engine& engine, const RaggedBatch& batch, int64_t min_batches, double seconds,
                  std::vector<double>* ms) {
  std::vector<quiver::engine::LazyResult> inflight;
  std::vector<Clock::time_point> submitted;
  int64_t tokens = 0, batches = 0;
  const Clock::time_point start = Clock::now();
  size_t head = 0;
  while (batches < min_batches || Seconds(start) < seconds) {
    while (inflight.size() - head < 4) {
      inflight.push_back(engine.Submit(batch));
      submitted.push_back(Clock::now());
    }
    if (!inflight[head].Wait().ok()) std::abort();
    ms->push_back(Seconds(submitted[head]) * 1e3);
    tokens += batch.num_tokens();
    ++batches;
    ++head;
  }
  const double elapsed = Seconds(start);
  for (size_t i = head; i < inflight.size(); ++i) inflight[i].Wait();
  return static_cast<double>(tokens) / elapsed;
}

struct Options {
  std::string model = "models/all-MiniLM-L6-v2";
  std::string inputs = ".cache/bench/inputs.json";
  std::string suites = "latency,scoring,throughput";
  std::vector<int64_t> lengths = {128, 512, 4096};  // for the latency suite
  int threads = 2;
  double seconds = 4;
  bool stdin_mode = false;
  std::string quantize = "none";  // or int8
  // The throughput suite in this many rounds, the large-GEMM rate measured again just before
  // each (0: one run, held to the rate measured at start-up).
  int ceiling_rounds = 3;
};

// Flag f's value v into `o`; false for a flag it does not know. Numbers by std::stoi and the
// others, which throw on what is not one.
bool SetOption(const std::string& f, const std::string& v, Options& o) {
  if (f == "--model") {
    o.model = v;
  } else if (f == "--inputs") {
    o.inputs = v;
  } else if (f == "--suites") {
    o.suites = v;
  } else if (f == "--threads") {
    o.threads = std::stoi(v);
  } else if (f == "--seconds") {
    o.seconds = std::stod(v);
  } else if (f == "--quantize") {
    o.quantize = v;
  } else if (f == "--ceiling-rounds") {
    o.ceiling_rounds = std::stoi(v);
  } else if (f == "--lengths") {
    o.lengths.clear();
    std::stringstream list(v);
    for (std::string item; std::getline(list, item, ',');) o.lengths.push_back(std::stoll(item));
  } else {
    return false;
  }
  return true;
}

// The command line into `o`; false (the reason printed) for a flag it does not know, one without
// its value, or a number that does not parse.
bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--stdin") {
      o.stdin_mode = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", f.c_str());
      return false;
    }
    const std::string v = argv[++i];
    try {
      if (!SetOption(f, v, o)) {
        std::fprintf(stderr, "unknown flag %s\n", f.c_str());
        return false;
      }
    } catch (const std::exception&) {  // std::invalid_argument, std::out_of_range
      std::fprintf(stderr, "%s: '%s' is not a number here\n", f.c_str(), v.c_str());
      return false;
    }
  }
  return true;
}

using Ids = std::vector<std::vector<int32_t>>;

// bench/make_inputs.py's texts as token ids: per length, each text checked against it; and the
// short queries.
struct Inputs {
  std::vector<std::pair<int64_t, Ids>> sets;
  Ids queries;

  const Ids* set_of(int64_t tokens) const {
    for (const auto& [len, ids] : sets) {
      if (len == tokens) return &ids;
    }
    return nullptr;
  }
};

// The inputs' file, parsed; false (the reason printed) when it cannot be read.
bool ReadInputs(const std::string& path, quiver::JsonValue& out) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<quiver::JsonValue> inputs = quiver::JsonValue::Parse(text.str());
  if (!in || !inputs.ok()) {
    std::fprintf(stderr, "cannot read %s (make it with bench/make_inputs.py)\n", path.c_str());
    return false;
  }
  out = *std::move(inputs);
  return true;
}

// The inputs tokenized with the engine's tokenizer; false (the reason printed) when a text's
// length is not its set's.
bool TokenizeInputs(const quiver::JsonValue& inputs, const Engine& engine, Inputs& out) {
  auto tok = quiver::tokenizer::Tokenizer::FromFile(engine.folder().tokenizer_path);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tok.status().message()).c_str());
    return false;
  }
  auto encode = [&](const std::string& s) {
    quiver::tokenizer::Encoding enc;
    if (!(*tok)->Encode(s, {}, &enc).ok()) std::abort();
    return std::vector<int32_t>(enc.ids.begin(), enc.ids.end());
  };
  for (const auto& [key, texts] : inputs.Find("sets")->members()) {
    Ids ids;
    for (const quiver::JsonValue& t : texts.items()) {
      ids.push_back(encode(t.as_string()));
      if (static_cast<int64_t>(ids.back().size()) != std::stoll(key)) {
        std::fprintf(stderr, "an input for %s tokens has %zu\n", key.c_str(), ids.back().size());
        return false;
      }
    }
    out.sets.emplace_back(std::stoll(key), std::move(ids));
  }
  for (const quiver::JsonValue& q : inputs.Find("queries")->items()) {
    out.queries.push_back(encode(q.as_string()));
  }
  return true;
}

quiver::engine::EngineOutput Run(Engine& engine, const RaggedBatch& batch) {
  absl::StatusOr<quiver::engine::EngineOutput> out = engine.Run(batch);
  if (!out.ok()) std::abort();
  return *std::move(out);
}

// --stdin: the commands of the header comment, one JSON line each, until the input ends.
void ServeStdin(Engine& engine, const Inputs& inputs) {
  std::map<int64_t, size_t> next;  // per length (-1: the queries), the next text to use
  RaggedBatch throughput_batch;
  if (const Ids* texts = inputs.set_of(128)) {
    for (const auto& ids : *texts) throughput_batch.Add(ids);
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream words(line);
    std::string command;
    int64_t a = 0, b = 0;
    words >> command >> a >> b;
    std::vector<double> ms;
    // latency <tokens> <count> or queries <count>: that many batch-1 calls, the set's texts in
    // turn (each set's position kept from one command to the next).
    const Ids* texts = nullptr;
    int64_t count = 0, key = 0;
    if (command == "latency") {
      texts = inputs.set_of(a);
      count = b;
      key = a;
    } else if (command == "queries" && !inputs.queries.empty()) {
      texts = &inputs.queries;
      count = a;
      key = -1;
    }
    if (texts != nullptr && count > 0) {
      size_t& n = next[key];
      for (int64_t i = 0; i < count; ++i) {
        RaggedBatch one;
        one.Add((*texts)[n++ % texts->size()]);
        const Clock::time_point t = Clock::now();
        Run(engine, one);
        ms.push_back(Seconds(t) * 1e3);
      }
      std::printf("{\"ms\": %s}\n", MsList(ms).c_str());
    } else if (command == "throughput" && throughput_batch.num_seqs() > 0 && a > 0) {
      const double tokens_per_s = Throughput(engine, throughput_batch, a, 0, &ms);
      std::printf("{\"tokens_per_s\": %.1f, \"ms\": %s}\n", tokens_per_s, MsList(ms).c_str());
    } else {
      std::printf("{\"error\": \"cannot run '%s'\"}\n", line.c_str());
    }
    std::fflush(stdout);
  }
}

// The latency suite: batch-1 calls per length, one text of that length each.
std::string LatencySuite(Engine& engine, const Inputs& inputs, const Options& o) {
  std::string json = ", \"latency\": [";
  bool first = true;
  for (int64_t tokens : o.lengths) {
    json += first ? "" : ", ";
    first = false;
    const Ids* ids = inputs.set_of(tokens);
    if (tokens > engine.max_input_tokens() || ids == nullptr) {
      json += "{\"tokens\": " + std::to_string(tokens) +
              ", \"not_applicable\": \"longer than the model's " +
              std::to_string(engine.max_input_tokens()) + " positions\"}";
      continue;
    }
    size_t next = 0;
    const std::vector<double> ms = Repeat(
        [&] {
          RaggedBatch b;
          b.Add((*ids)[next++ % ids->size()]);
          Run(engine, b);
        },
        o.seconds, 20);
    json += "{\"tokens\": " + std::to_string(tokens) + ", " + LatencyJson(ms) + "}";
  }
  return json + "]";
}

// The scoring suite: one query against N documents of 512 tokens, all N + 1 embedded in one
// batch, the cosine of each document with the query (bi-encoder scoring; what /rerank does for
// an embedding model).
std::string ScoringSuite(Engine& engine, const Inputs& inputs, const Options& o) {
  std::string json = ", \"scoring\": [";
  const Ids& docs = *inputs.set_of(512);
  const Ids& queries = inputs.queries;
  bool first = true;
  for (int n : {5, 25, 50}) {
    json += first ? "" : ", ";
    first = false;
    size_t next = 0;
    const std::vector<double> ms = Repeat(
        [&] {
          RaggedBatch b;
          b.Add(queries[next % queries.size()]);
          for (int d = 0; d < n; ++d) b.Add(docs[(next + d) % docs.size()]);
          ++next;
          quiver::engine::EngineOutput out = Run(engine, b);
          const int64_t h = out.dimensions;
          const float* e = reinterpret_cast<const float*>(out.data.data());
          volatile float sink = 0;
          for (int d = 1; d <= n; ++d) {
            float dot = 0, qq = 0, dd = 0;
            for (int64_t j = 0; j < h; ++j) {
              dot += e[j] * e[d * h + j];
              qq += e[j] * e[j];
              dd += e[d * h + j] * e[d * h + j];
            }
            sink = sink + dot / std::sqrt(qq * dd);
          }
        },
        o.seconds, 5);
    json += "{\"documents\": " + std::to_string(n) + ", \"document_tokens\": 512, " +
            LatencyJson(ms) + "}";
  }
  return json + "]";
}

// The throughput suite: 100 x 128-token batches, four in flight, and the model FLOPs' fraction
// of the large-GEMM rate (`ceiling`, measured at start-up, or again before each of
// o.ceiling_rounds rounds).
std::string ThroughputSuite(Engine& engine, const Inputs& inputs, const Options& o,
                            double ceiling) {
  const Ids& texts = *inputs.set_of(128);
  RaggedBatch batch;
  for (const auto& ids : texts) batch.Add(ids);
  Run(engine, batch);
  const double flops_per_token = engine.flops_per_token(128);
  std::vector<double> ms;
  double tokens_per_s = 0, fraction = 0;
  std::string rounds_json;
  if (o.ceiling_rounds <= 0) {
    tokens_per_s = Throughput(engine, batch, 8, 2 * o.seconds, &ms);
    fraction = tokens_per_s * flops_per_token / 1e9 / ceiling;
  } else {
    // On a shared host the clock and the neighbours move by 10-25% within a minute (the FMA
    // peak of one start-up read 260 GFLOP/s on a Xeon that gave 309-337 minutes before and
    // after): the engine's share of the large-GEMM rate is a ratio of two figures taken
    // seconds apart, round by round, and the median of those is reported.
    std::vector<double> fractions;
    int64_t tokens = 0;
    double seconds = 0;
    rounds_json = ", \"rounds\": [";
    for (int r = 0; r < o.ceiling_rounds; ++r) {
      const double round_ceiling = MeasureGemmRates(o.threads, 3).best();
      // OpenBLAS's threads spin for a while after a call before they sleep: not into the
      // engine's time.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const size_t before = ms.size();
      const double rate = Throughput(engine, batch, std::max(2, 8 / o.ceiling_rounds),
                                     2 * o.seconds / o.ceiling_rounds, &ms);
      const int64_t round_tokens = static_cast<int64_t>(ms.size() - before) * batch.num_tokens();
      tokens += round_tokens;
      seconds += static_cast<double>(round_tokens) / rate;  // the round's timed part
      const double f = rate * flops_per_token / 1e9 / round_ceiling;
      fractions.push_back(f);
      char round[192];
      std::snprintf(round, sizeof(round),
                    "%s{\"tokens_per_s\": %.1f, \"gemm_ceiling_gflops\": %.1f, "
                    "\"fraction_of_ceiling\": %.4f}",
                    r == 0 ? "" : ", ", rate, round_ceiling, f);
      rounds_json += round;
    }
    rounds_json += "]";
    tokens_per_s = static_cast<double>(tokens) / seconds;
    fraction = Percentile(fractions, 50);  // the nearest-rank median, as the latencies
  }
  const double batches_per_s = tokens_per_s / static_cast<double>(batch.num_tokens());
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                ", \"throughput\": {\"batch\": %zu, \"tokens\": 128, \"clients\": 4, "
                "\"requests_per_s\": %.3f, \"tokens_per_s\": %.1f, \"flops_per_token\": %.0f, "
                "\"gflops\": %.1f, \"fraction_of_ceiling\": %.4f, %s",
                texts.size(), batches_per_s, tokens_per_s, flops_per_token,
                tokens_per_s * flops_per_token / 1e9, fraction, LatencyJson(ms).c_str());
  return buf + rounds_json + "}";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, o)) return 2;
  auto want = [&](const char* suite) { return o.suites.find(suite) != std::string::npos; };
  quiver::JsonValue input_file;
  if (!ReadInputs(o.inputs, input_file)) return 1;

  const std::string blas_core = openblas_get_corename();
  const std::string blas_fix = OpenBlasCoreFix(blas_core);
  if (!blas_fix.empty()) {
    std::fprintf(stderr,
                 "warning: OpenBLAS runs its %s kernels on this CPU (%s); its GEMM rate is no "
                 "ceiling. Run again with OPENBLAS_CORETYPE=%s\n",
                 blas_core.c_str(), quiver::engine::cpu::HostCpuFeatures().Flags().c_str(),
                 blas_fix.c_str());
  }
  // Before the engine sets BLAS to one thread.
  const Ceiling measured = o.stdin_mode ? Ceiling{} : MeasureCeiling(o.threads);
  const double ceiling = measured.best();

  quiver::engine::EngineOptions options;
  options.num_threads = o.threads;
  if (o.quantize == "int8") {
    options.quantize = quiver::engine::ops::WeightPrecision::kInt8;
  } else if (o.quantize == "bf16") {
    options.quantize = quiver::engine::ops::WeightPrecision::kBf16;
  } else if (o.quantize != "none") {
    std::fprintf(stderr, "--quantize %s is not one of none, int8, bf16\n", o.quantize.c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Engine>> loaded = Engine::Load(o.model, options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  Engine& engine = **loaded;
  Inputs inputs;
  if (!TokenizeInputs(input_file, engine, inputs)) return 1;
  if (o.stdin_mode) {
    ServeStdin(engine, inputs);
    return 0;
  }

  std::string json = "{\"system\": \"quiver engine\", \"model\": \"" + o.model +
                     "\", \"threads\": " + std::to_string(o.threads) +
                     ", \"gemm_ceiling_gflops\": " + std::to_string(ceiling) +
                     ", \"openblas_2048_gflops\": " + std::to_string(measured.openblas_gflops) +
                     ", \"packed_gemm_2048_gflops\": " + std::to_string(measured.packed_gflops) +
                     ", \"fma_peak_gflops\": " + std::to_string(measured.fma_peak_gflops) +
                     ", \"vnni_peak_gops\": " + std::to_string(measured.vnni_peak_gops) +
                     ", \"openblas_core\": \"" + blas_core +
                     "\", \"openblas_core_fits_host\": " + (blas_fix.empty() ? "true" : "false") +
                     ", \"cpu\": \"" + quiver::engine::cpu::CpuSummary() + "\"";
  if (want("latency")) json += LatencySuite(engine, inputs, o);
  if (want("scoring") && inputs.set_of(512) != nullptr && engine.max_input_tokens() >= 512) {
    json += ScoringSuite(engine, inputs, o);
  }
  if (want("throughput")) json += ThroughputSuite(engine, inputs, o, ceiling);
  json += "}";
  std::printf("%s\n", json.c_str());
  return 0;
}
