// Token offsets (Tokenizer::EncodeWithOffsets, TEI's /tokenize start and stop) against Hugging
// Face `tokenizers`: UTF-8 byte ranges of each token for the corpus queries, a sample of the
// documents in several languages and alignment edge cases
// (tests/fixtures/tokenizers/*/offsets.jsonl, written by
// tools/golden/make_offset_fixtures.py), for WordPiece, Qwen-style byte-level BPE and Unigram
// with Metaspace (behind NFKC, and behind XLM-R's Precompiled rules). A text a step cannot
// trace gives no offsets, and the same ids as Encode.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/file.h"
#include "common/json.h"
#include "tokenizer/tokenizer.h"

namespace quiver::tokenizer {
namespace {

namespace fs = std::filesystem;
const fs::path kFixtures = fs::path(QUIVER_SOURCE_DIR) / "tests" / "fixtures" / "tokenizers";

std::unique_ptr<Tokenizer> Load(const std::string& name) {
  const fs::path path = kFixtures / name / "tokenizer.json";
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromFile(path.string());
  EXPECT_TRUE(tok.ok()) << path << ": " << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

class OffsetsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(OffsetsTest, MatchHuggingFace) {
  const fs::path path = kFixtures / GetParam() / "offsets.jsonl";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing fixture " << path;
  std::unique_ptr<Tokenizer> tok = Load(GetParam());
  ASSERT_NE(tok, nullptr);
  // Offsets are exact or absent: a text whose pipeline changes it untraceably (NFC composing
  // "e" + U+0301) gets no offsets at all; any offset given must be Hugging Face's.
  size_t texts = 0, tokens = 0, mismatches = 0, untraced = 0;
  std::string line;
  Encoding enc;
  std::vector<Tokenizer::Offset> offsets;
  while (std::getline(in, line)) {
    absl::StatusOr<JsonValue> row = JsonValue::Parse(line);
    ASSERT_TRUE(row.ok()) << line.substr(0, 80);
    const std::string& text = row->Find("text")->as_string();
    ASSERT_TRUE(tok->EncodeWithOffsets(text, {}, &enc, &offsets).ok()) << text.substr(0, 80);
    const std::vector<JsonValue>& want_ids = row->Find("ids")->items();
    const std::vector<JsonValue>& want = row->Find("offsets")->items();
    ASSERT_EQ(enc.ids.size(), want_ids.size()) << text.substr(0, 80);
    ASSERT_EQ(offsets.size(), want.size());
    const bool none = std::none_of(offsets.begin(), offsets.end(),
                                   [](const Tokenizer::Offset& o) { return o.has_value(); });
    const bool want_some =
        std::any_of(want.begin(), want.end(), [](const JsonValue& o) { return !o.is_null(); });
    if (none && want_some) {
      ++untraced;
      ++texts;
      continue;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(enc.ids[i], static_cast<uint32_t>(want_ids[i].as_int())) << text.substr(0, 80);
      const bool ok = want[i].is_null() ? !offsets[i].has_value()
                                        : offsets[i].has_value() &&
                                              offsets[i]->first == want[i].items()[0].as_int() &&
                                              offsets[i]->second == want[i].items()[1].as_int();
      if (!ok && ++mismatches <= 10) {
        ADD_FAILURE() << "token " << i << " of '" << text.substr(0, 60) << "': got "
                      << (offsets[i] ? std::to_string(offsets[i]->first) + "-" +
                                           std::to_string(offsets[i]->second)
                                     : "null");
      }
    }
    ++texts;
    tokens += want.size();
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(texts, 2000u);
  EXPECT_LE(untraced * 100, texts) << "more than 1% of the texts without offsets";
  std::printf("%s offsets: %zu texts, %zu tokens, %zu mismatches, %zu texts untraced\n", GetParam(),
              texts, tokens, mismatches, untraced);
}

INSTANTIATE_TEST_SUITE_P(Traced, OffsetsTest,
                         ::testing::Values("minilm_wordpiece", "qwen_style_bpe",
                                           "xlmr_style_unigram", "xlmr_precompiled_unigram"));

// A normalization quiver does not trace (NFKC where it changes the text: only an unchanged text
// is traced through it) gives the same ids as Encode and no offsets, never guessed ones; the
// same text behind sentencepiece's Precompiled rules (which do the same to these characters) is
// traced.
TEST(UntracedOffsetsTest, AnUntracedNormalizationGivesTheSameIdsAndNoOffsets) {
  std::unique_ptr<Tokenizer> nfkc = Load("xlmr_style_unigram");
  std::unique_ptr<Tokenizer> precompiled = Load("xlmr_precompiled_unigram");
  ASSERT_NE(nfkc, nullptr);
  ASSERT_NE(precompiled, nullptr);
  for (const char* text : {"\uff26\uff55\uff4c\uff4c width", "\ufb01ne \u2460"}) {
    Encoding with, plain;
    std::vector<Tokenizer::Offset> offsets;
    ASSERT_TRUE(nfkc->EncodeWithOffsets(text, {}, &with, &offsets).ok());
    ASSERT_TRUE(nfkc->Encode(text, {}, &plain).ok());
    EXPECT_EQ(with.ids, plain.ids) << text;
    ASSERT_EQ(offsets.size(), with.ids.size());
    for (const Tokenizer::Offset& o : offsets) EXPECT_FALSE(o.has_value()) << text;
    ASSERT_TRUE(precompiled->EncodeWithOffsets(text, {}, &with, &offsets).ok());
    ASSERT_GT(offsets.size(), 2u);
    EXPECT_TRUE(offsets[1].has_value()) << text;  // after <s>
  }
}

TEST(UntracedOffsetsTest, RefusesTruncation) {
  std::unique_ptr<Tokenizer> tok = Load("minilm_wordpiece");
  ASSERT_NE(tok, nullptr);
  EncodeOptions options;
  options.truncation = Truncation{};
  Encoding enc;
  std::vector<Tokenizer::Offset> offsets;
  EXPECT_FALSE(tok->EncodeWithOffsets("x", options, &enc, &offsets).ok());
}

}  // namespace
}  // namespace quiver::tokenizer
