// Encode from many threads at once gives the same ids as one thread (per-thread scratch buffers,
// shared immutable tokenizer), for each model type.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "tokenizer/tokenizer.h"

namespace quiver::tokenizer {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = QUIVER_SOURCE_DIR;

class ConcurrencyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ConcurrencyTest, ManyThreadsMatchOneThread) {
  auto tok = Tokenizer::FromFile(
      (kSource / "tests" / "fixtures" / "tokenizers" / GetParam() / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::vector<std::string> texts;
  const auto corpus = kSource / "corpus" / "docs_multi.jsonl";
  std::ifstream in(corpus);
  ASSERT_TRUE(in.good()) << "cannot read " << corpus;
  std::string line;
  for (int i = 0; std::getline(in, line) && texts.size() < 200; ++i) {
    if (i % 7 != 0) continue;
    std::string text = JsonValue::Parse(line)->Find("text")->as_string();
    size_t cut = std::min<size_t>(text.size(), 4000);
    while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;
    texts.push_back(text.substr(0, cut));  // whole code points only
  }
  ASSERT_EQ(texts.size(), 200u);
  std::vector<Encoding> expected(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_TRUE((*tok)->Encode(texts[i], {}, &expected[i]).ok());
  }
  constexpr int kThreads = 6;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Encoding enc;
      for (int round = 0; round < 3; ++round) {
        for (size_t k = 0; k < texts.size(); ++k) {
          const size_t i = (k * (t + 1) + round) % texts.size();  // a different order per thread
          if (!(*tok)->Encode(texts[i], {}, &enc).ok() || enc.ids != expected[i].ids) {
            ++mismatches[t];
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

INSTANTIATE_TEST_SUITE_P(EveryModelKind, ConcurrencyTest,
                         ::testing::Values("minilm_wordpiece", "qwen_style_bpe",
                                           "xlmr_style_unigram", "xlmr_precompiled_unigram"));

}  // namespace
}  // namespace quiver::tokenizer
