// Exact ids and type ids against Hugging Face `tokenizers` for four tokenizer.json files
// (WordPiece, byte-level BPE, Unigram behind NFKC, Unigram behind sentencepiece's Precompiled
// nmt_nfkc rules as XLM-R has them) on every text of corpus/, an edge-case list and
// text pairs with each truncation strategy. References: tests/fixtures/tokenizers/, written by
// tools/golden/make_tokenizer_fixtures.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/file.h"
#include "common/json.h"
#include "tokenizer/tokenizer.h"

namespace quiver::tokenizer {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = QUIVER_SOURCE_DIR;
const fs::path kFixtures = kSource / "tests" / "fixtures" / "tokenizers";
const fs::path kCorpus = kSource / "corpus";

std::string Fnv1a64(const std::vector<uint32_t>& values) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint32_t v : values) {
    for (int k = 0; k < 4; ++k) {
      h ^= (v >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::vector<JsonValue> ReadJsonLines(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<JsonValue> out;
  std::string line;
  while (std::getline(in, line)) {
    absl::StatusOr<JsonValue> json = JsonValue::Parse(line);
    EXPECT_TRUE(json.ok()) << path << ": " << json.status();
    if (json.ok()) out.push_back(*std::move(json));
  }
  return out;
}

std::vector<uint32_t> Ids(const JsonValue& array) {
  std::vector<uint32_t> out;
  for (const JsonValue& v : array.items()) out.push_back(static_cast<uint32_t>(v.as_int()));
  return out;
}

std::string Show(const std::vector<uint32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += std::to_string(ids[i]) + " ";
  return s;
}

class HfCompatTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t =
        Tokenizer::FromFile((kFixtures / GetParam() / "tokenizer.json").string());
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = *std::move(t);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(HfCompatTest, EveryCorpusTextEncodesExactly) {
  std::map<std::string, std::vector<JsonValue>> corpus;
  for (const char* file : {"queries.jsonl", "docs_en.jsonl", "docs_multi.jsonl"}) {
    corpus[file] = ReadJsonLines(kCorpus / file);
  }
  const std::vector<JsonValue> expected = ReadJsonLines(kFixtures / GetParam() / "corpus.jsonl");
  ASSERT_EQ(expected.size(), corpus["queries.jsonl"].size() + corpus["docs_en.jsonl"].size() +
                                 corpus["docs_multi.jsonl"].size());
  Encoding enc;
  int mismatches = 0;
  for (const JsonValue& want : expected) {
    const std::string file = want.Find("file")->as_string();
    const size_t line = static_cast<size_t>(want.Find("line")->as_int());
    const JsonValue& record = corpus[file][line];
    ASSERT_TRUE(tokenizer_->Encode(record.Find("text")->as_string(), {}, &enc).ok());
    const bool same = static_cast<int64_t>(enc.ids.size()) == want.Find("n")->as_int() &&
                      Fnv1a64(enc.ids) == want.Find("ids_fnv")->as_string() &&
                      Fnv1a64(enc.type_ids) == want.Find("types_fnv")->as_string();
    if (!same && ++mismatches <= 5) {
      std::string detail;
      if (const JsonValue* ids = want.Find("ids")) detail = "\n  want " + Show(Ids(*ids));
      ADD_FAILURE() << GetParam() << ": " << file << ":" << line << " ("
                    << record.Find("id")->as_string() << ") got " << enc.ids.size()
                    << " tokens, want " << want.Find("n")->as_int() << detail << "\n  got  "
                    << Show(enc.ids);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << expected.size() << " texts";
}

std::string OneMegabyte() {
  std::vector<JsonValue> docs = ReadJsonLines(kCorpus / "docs_multi.jsonl");
  std::vector<JsonValue> en = ReadJsonLines(kCorpus / "docs_en.jsonl");
  docs.insert(docs.end(), en.begin(), en.end());
  std::string out;
  size_t bytes = 0;
  for (size_t i = 0; bytes < (1u << 20); ++i) {
    const std::string& text = docs[i].Find("text")->as_string();
    if (i > 0) out += "\n\n";
    out += text;
    bytes += text.size();
  }
  return out;
}

TEST_P(HfCompatTest, EdgeCasesEncodeExactly) {
  Encoding enc;
  for (const JsonValue& want : ReadJsonLines(kFixtures / GetParam() / "edge.jsonl")) {
    const std::string name = want.Find("case")->as_string();
    const std::string text =
        want.Find("text")->is_null() ? OneMegabyte() : want.Find("text")->as_string();
    ASSERT_TRUE(tokenizer_->Encode(text, {}, &enc).ok()) << name;
    if (const JsonValue* ids = want.Find("ids")) {
      EXPECT_EQ(enc.ids, Ids(*ids)) << name;
      EXPECT_EQ(enc.type_ids, Ids(*want.Find("type_ids"))) << name;
    } else {
      EXPECT_EQ(static_cast<int64_t>(enc.ids.size()), want.Find("n")->as_int()) << name;
      EXPECT_EQ(Fnv1a64(enc.ids), want.Find("ids_fnv")->as_string()) << name;
    }
  }
}

TEST_P(HfCompatTest, PairsAndTruncationEncodeExactly) {
  Encoding enc;
  int checked = 0;
  for (const JsonValue& want : ReadJsonLines(kFixtures / GetParam() / "pairs.jsonl")) {
    EncodeOptions options;
    if (!want.Find("max_length")->is_null()) {
      Truncation t;
      t.max_length = static_cast<size_t>(want.Find("max_length")->as_int());
      const std::string strategy = want.Find("strategy")->as_string();
      t.strategy = strategy == "only_first"    ? TruncationStrategy::kOnlyFirst
                   : strategy == "only_second" ? TruncationStrategy::kOnlySecond
                                               : TruncationStrategy::kLongestFirst;
      t.side = want.Find("direction")->as_string() == "left" ? TruncationSide::kLeft
                                                             : TruncationSide::kRight;
      options.truncation = t;
    }
    absl::Status status = tokenizer_->EncodePair(
        want.Find("text")->as_string(), want.Find("text_pair")->as_string(), options, &enc);
    const std::string what =
        want.Find("text")->as_string() + " | " +
        (want.Find("strategy")->is_null() ? std::string("none")
                                          : want.Find("strategy")->as_string());
    if (want.Find("error") != nullptr) {
      EXPECT_FALSE(status.ok()) << what;
    } else {
      ASSERT_TRUE(status.ok()) << what << ": " << status;
      EXPECT_EQ(enc.ids, Ids(*want.Find("ids"))) << what;
      EXPECT_EQ(enc.type_ids, Ids(*want.Find("type_ids"))) << what;
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST_P(HfCompatTest, DecodeMatchesHuggingFace) {
  int checked = 0;
  for (const JsonValue& want : ReadJsonLines(kFixtures / GetParam() / "decode.jsonl")) {
    const std::vector<uint32_t> ids = Ids(*want.Find("ids"));
    EXPECT_EQ(tokenizer_->Decode(ids, true), want.Find("skip_special")->as_string()) << Show(ids);
    EXPECT_EQ(tokenizer_->Decode(ids, false), want.Find("keep_special")->as_string()) << Show(ids);
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

TEST_P(HfCompatTest, InvalidUtf8IsAnErrorNamingTheOffset) {
  Encoding enc;
  absl::Status status = tokenizer_->Encode(std::string("valid \xC3\x28 rest", 12), {}, &enc);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "invalid UTF-8 at byte 6");
  status = tokenizer_->EncodePair("fine", std::string("\xFF", 1), {}, &enc);
  EXPECT_FALSE(status.ok());
}

TEST_P(HfCompatTest, CharacterLimitCutsBeforeEncoding) {
  Encoding cut, direct;
  EncodeOptions options;
  options.max_input_chars = 5;
  ASSERT_TRUE(tokenizer_->Encode("héllo wörld and more", options, &cut).ok());
  ASSERT_TRUE(tokenizer_->Encode("héllo", {}, &direct).ok());
  EXPECT_EQ(cut.ids, direct.ids);
}

// The fixture's tokenizer.json with its precompiled_charsmap replaced by `base64`.
std::string WithCharsmap(const std::string& base64) {
  std::ifstream in(kFixtures / "xlmr_precompiled_unigram" / "tokenizer.json");
  std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "\"precompiled_charsmap\": \"";
  const size_t at = json.find(key);
  EXPECT_NE(at, std::string::npos);
  const size_t begin = at + key.size(), end = json.find('"', begin);
  return json.replace(begin, end - begin, base64);
}

TEST(PrecompiledCharsmapTest, ADamagedCharsmapIsRefusedAtLoadNamingIt) {
  for (const char* bad : {"not base64!", "AAA=", /* a 400-byte trie in an 8-byte blob */
                          "kAEAAAAAAAA="}) {
    const auto t = Tokenizer::FromJson(WithCharsmap(bad));
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.status().message().find("precompiled_charsmap"), std::string::npos) << t.status();
  }
}

TEST(PrecompiledCharsmapTest, UnitsPointingOutsideTheTrieReplaceNothingAndNeverReadPastIt) {
  // Two trie units whose offsets and labels point far outside the 8-byte trie, then "x\0".
  // Blob: 08 00 00 00 | ff ff ff ff | 00 fc ff ff | 78 00  ->  base64.
  const auto damaged = Tokenizer::FromJson(WithCharsmap("CAAAAP////8A/P//eAA="));
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  // The same tokenizer without the Precompiled step (an empty Sequence in its place).
  std::string json = WithCharsmap("");
  const size_t begin = json.rfind('{', json.find("\"type\": \"Precompiled\""));
  const size_t end = json.find('}', json.find("\"precompiled_charsmap\"")) + 1;
  json.replace(begin, end - begin, R"({"type": "Sequence", "normalizers": []})");
  const auto without = Tokenizer::FromJson(json);
  ASSERT_TRUE(without.ok()) << without.status();
  // Full-width "f", which the real rules make "f", and an "o" with diaeresis: kept as they are.
  for (const char* text : {"hello w\xc3\xb6rld \xef\xbd\x86ull", "plain ascii text"}) {
    Encoding got, want;
    ASSERT_TRUE((*damaged)->Encode(text, {}, &got).ok());
    ASSERT_TRUE((*without)->Encode(text, {}, &want).ok());
    EXPECT_EQ(got.ids, want.ids) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryModelKind, HfCompatTest,
                         ::testing::Values("minilm_wordpiece", "qwen_style_bpe",
                                           "xlmr_style_unigram", "xlmr_precompiled_unigram"));

}  // namespace
}  // namespace quiver::tokenizer
