// Steady-state Encode allocates nothing: once a thread has encoded a set of texts (buffers
// grown, word caches filled), encoding them again makes no call to operator new. Counted by
// replacing the global operator new in this test binary.
//
// gcc 12 takes the replacement's std::malloc for the allocation function of every `new` it
// inlines and warns that the matching delete is a mismatch (-Wmismatched-new-delete), for
// gtest's and the standard library's own new/delete pairs too: a false positive of replacing
// the global operators, silenced for this file alone.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "common/json.h"
#include "tokenizer/tokenizer.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too: their default versions call the replaced operator new, but a sanitizer's
// runtime replaces them itself (AddressSanitizer's allocator), and what they return reaches the
// free() below (simdjson's parser is made by a nothrow new in its shared library).
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace quiver::tokenizer {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = QUIVER_SOURCE_DIR;

class AllocationTest : public ::testing::TestWithParam<const char*> {};

TEST_P(AllocationTest, SecondPassAllocatesNothing) {
  auto tok = Tokenizer::FromFile(
      (kSource / "tests" / "fixtures" / "tokenizers" / GetParam() / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::vector<std::string> texts;
  const auto corpus = kSource / "corpus" / "docs_multi.jsonl";
  std::ifstream in(corpus);
  ASSERT_TRUE(in.good()) << "cannot read " << corpus;
  std::string line;
  for (int i = 0; std::getline(in, line) && texts.size() < 60; ++i) {
    if (i % 29 == 0) texts.push_back(JsonValue::Parse(line)->Find("text")->as_string());
  }
  Encoding enc;
  enc.ids.reserve(1 << 20);
  enc.type_ids.reserve(1 << 20);
  for (const std::string& t : texts) ASSERT_TRUE((*tok)->Encode(t, {}, &enc).ok());
  const long before = g_allocations.load();
  for (const std::string& t : texts) ASSERT_TRUE((*tok)->Encode(t, {}, &enc).ok());
  EXPECT_EQ(g_allocations.load() - before, 0) << "allocations in the second pass";
}

INSTANTIATE_TEST_SUITE_P(EveryModelKind, AllocationTest,
                         ::testing::Values("minilm_wordpiece", "qwen_style_bpe",
                                           "xlmr_style_unigram", "xlmr_precompiled_unigram"));

}  // namespace
}  // namespace quiver::tokenizer
