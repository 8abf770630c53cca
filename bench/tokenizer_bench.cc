// Tokenizer speed on real text, for bench/tokenizer_bench.py to put side by side with Hugging
// Face tokenizers on the same texts and thread counts.
//
//   quiver_tokenizer_bench --tokenizer T.json --texts texts.jsonl --threads N
//
// texts.jsonl: one {"text": ...} per line. Prints one JSON object: per-text latency
// percentiles (one thread, each text encoded alone, after a warm-up pass) and throughput with N
// threads (texts dealt round-robin, wall time of the whole set).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * values.size()));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, texts_path;
  int threads = 1;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--tokenizer") tokenizer_path = argv[i + 1];
    if (flag == "--texts") texts_path = argv[i + 1];
    if (flag == "--threads") threads = std::stoi(argv[i + 1]);
    if (flag == "--repeats") repeats = std::stoi(argv[i + 1]);
  }
  if (tokenizer_path.empty() || texts_path.empty() || threads < 1) {
    std::fprintf(stderr, "usage: %s --tokenizer T.json --texts texts.jsonl [--threads N]\n",
                 argv[0]);
    return 2;
  }
  auto tokenizer = quiver::tokenizer::Tokenizer::FromFile(tokenizer_path);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> texts;
  size_t bytes = 0;
  {
    std::ifstream in(texts_path);
    std::string line;
    while (std::getline(in, line)) {
      auto json = quiver::JsonValue::Parse(line);
      if (!json.ok()) return 1;
      texts.push_back(json->Find("text")->as_string());
      bytes += texts.back().size();
    }
  }
  const quiver::tokenizer::Tokenizer& tok = **tokenizer;
  quiver::tokenizer::Encoding enc;

  // Latency: one thread, each text alone. The first pass warms caches and buffers.
  size_t tokens = 0;
  for (const std::string& t : texts) {
    (void)tok.Encode(t, {}, &enc);
    tokens += enc.ids.size();
  }
  std::vector<double> latency_us;
  latency_us.reserve(texts.size());
  for (const std::string& t : texts) {
    auto start = Clock::now();
    (void)tok.Encode(t, {}, &enc);
    latency_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }

  // Throughput: N threads over the whole set, best of `repeats` runs.
  double best_seconds = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    std::vector<std::thread> pool;
    for (int w = 0; w < threads; ++w) {
      pool.emplace_back([&, w] {
        quiver::tokenizer::Encoding local;
        for (size_t i = w; i < texts.size(); i += threads) (void)tok.Encode(texts[i], {}, &local);
      });
    }
    for (std::thread& th : pool) th.join();
    best_seconds =
        std::min(best_seconds, std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::printf(
      "{\"texts\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"threads\": %d, "
      "\"p50_us\": %.3f, \"p99_us\": %.3f, \"mean_us\": %.3f, \"seconds\": %.6f, "
      "\"mb_per_s\": %.3f, \"tokens_per_s\": %.1f}\n",
      texts.size(), bytes, tokens, threads, Percentile(latency_us, 50), Percentile(latency_us, 99),
      [&] {
        double s = 0;
        for (double v : latency_us) s += v;
        return s / latency_us.size();
      }(),
      best_seconds, bytes / best_seconds / 1e6, tokens / best_seconds);
  return 0;
}
