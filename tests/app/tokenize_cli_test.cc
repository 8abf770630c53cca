// `quiver tokenize`: JSON lines in, {"ids", "type_ids"} lines out, equal to the Hugging Face
// reference ids; pairs and truncation flags; a bad line gets an error line and exit status 1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/json.h"

namespace quiver {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = QUIVER_SOURCE_DIR;

// Runs `args` with `input` on stdin; returns stdout lines and sets `status`.
std::vector<std::string> RunTokenize(const std::string& args, const std::string& input,
                                     int* status) {
  const fs::path in = fs::temp_directory_path() / ("quiver-tok-" + std::to_string(getpid()));
  std::ofstream(in) << input;
  FILE* pipe =
      popen((std::string(QUIVER_BINARY) + " tokenize " + args + " < " + in.string()).c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  *status = WEXITSTATUS(pclose(pipe));
  fs::remove(in);
  std::vector<std::string> lines;
  for (size_t start = 0, end; (end = out.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(out.substr(start, end - start));
  }
  return lines;
}

TEST(TokenizeCliTest, IdsMatchTheReferenceForSinglesAndPairs) {
  const fs::path dir = kSource / "tests" / "fixtures" / "tokenizers" / "minilm_wordpiece";
  std::ifstream pairs(dir / "pairs.jsonl");
  std::string line, input;
  std::vector<JsonValue> want;
  while (std::getline(pairs, line) && want.size() < 20) {
    JsonValue row = *JsonValue::Parse(line);
    if (!row.Find("max_length")->is_null()) continue;  // untruncated pairs only
    input += line + "\n";
    want.push_back(std::move(row));
  }
  int status = 0;
  const auto out =
      RunTokenize("--tokenizer " + (dir / "tokenizer.json").string() + " --pairs", input, &status);
  EXPECT_EQ(status, 0);
  ASSERT_EQ(out.size(), want.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const JsonValue got = *JsonValue::Parse(out[i]);
    ASSERT_EQ(got.Find("ids")->items().size(), want[i].Find("ids")->items().size());
    for (size_t k = 0; k < got.Find("ids")->items().size(); ++k) {
      EXPECT_EQ(got.Find("ids")->items()[k].as_int(), want[i].Find("ids")->items()[k].as_int());
      EXPECT_EQ(got.Find("type_ids")->items()[k].as_int(),
                want[i].Find("type_ids")->items()[k].as_int());
    }
  }
}

TEST(TokenizeCliTest, TruncationAndBadLines) {
  const std::string tok = "--tokenizer " + (kSource / "tests" / "fixtures" / "tokenizers" /
                                            "minilm_wordpiece" / "tokenizer.json")
                                               .string();
  int status = 0;
  auto out = RunTokenize(tok + " --max-length 5 --truncation-side left",
                         "{\"text\": \"one two three four five six\"}\n", &status);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(JsonValue::Parse(out[0])->Find("ids")->items().size(),
            5u);  // [CLS] four five six [SEP]
  out = RunTokenize(tok, "{\"text\": \"fine\"}\nnot json\n{\"txt\": 1}\n", &status);
  EXPECT_EQ(status, 1);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_NE(out[0].find("\"ids\""), std::string::npos);
  EXPECT_NE(out[1].find("\"error\":\"line 2"), std::string::npos);
  EXPECT_NE(out[2].find("missing field 'text'"), std::string::npos);
}

}  // namespace
}  // namespace quiver
