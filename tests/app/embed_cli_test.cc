// `quiver embed` on the default model prints the golden embeddings (tests/fixtures/minilm),
// tokenizing and truncating the texts itself; the .npy output holds the same numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/json.h"

namespace quiver {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = QUIVER_SOURCE_DIR;

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

TEST(EmbedCliTest, PrintsTheGoldenEmbeddings) {
  const fs::path tmp = fs::temp_directory_path() / ("quiver-embed-" + std::to_string(getpid()));
  fs::create_directories(tmp);
  std::vector<JsonValue> rows;
  {
    std::ifstream in(kSource / "tests" / "fixtures" / "minilm" / "embeddings.jsonl");
    std::ofstream texts(tmp / "texts.jsonl");
    std::string line;
    for (int i = 0; std::getline(in, line); ++i) {
      if (i % 4 != 0) continue;  // 60 texts, every language, queries and documents
      rows.push_back(*JsonValue::Parse(line));
      texts << "{\"text\": \"" << Escape(rows.back().Find("text")->as_string()) << "\"}\n";
    }
  }
  const std::string cmd = std::string(QUIVER_BINARY) + " embed --model " +
                          (kSource / "models" / "all-MiniLM-L6-v2").string() + " --input " +
                          (tmp / "texts.jsonl").string() + " --output " +
                          (tmp / "out.jsonl").string() + " --max-batch-tokens 2000";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_EQ(std::system((std::string(QUIVER_BINARY) + " embed --model " +
                         (kSource / "models" / "all-MiniLM-L6-v2").string() + " --input " +
                         (tmp / "texts.jsonl").string() + " --output " + (tmp / "out.npy").string())
                            .c_str()),
            0);
  std::ifstream out(tmp / "out.jsonl");
  const std::string npy = *ReadFile((tmp / "out.npy").string());
  const size_t header = 10 + static_cast<uint8_t>(npy[8]) + 256 * static_cast<uint8_t>(npy[9]);
  ASSERT_EQ(npy.size(), header + rows.size() * 384 * 4);
  EXPECT_NE(npy.find("'shape': (60, 384)"), std::string::npos);
  std::string line;
  size_t i = 0;
  for (; std::getline(out, line); ++i) {
    ASSERT_LT(i, rows.size());
    const JsonValue got = *JsonValue::Parse(line);
    EXPECT_EQ(got.Find("index")->as_int(), static_cast<int64_t>(i));
    const auto& a = got.Find("embedding")->items();
    const auto& b = rows[i].Find("embedding")->items();
    ASSERT_EQ(a.size(), b.size());
    double dot = 0, na = 0, nb = 0, max_abs = 0;
    for (size_t j = 0; j < a.size(); ++j) {
      const double x = a[j].as_double(), y = b[j].as_double();
      float from_npy;
      std::memcpy(&from_npy, npy.data() + header + (i * 384 + j) * 4, 4);
      EXPECT_EQ(static_cast<float>(x), from_npy);
      dot += x * y;
      na += x * x;
      nb += y * y;
      max_abs = std::max(max_abs, std::abs(x - y));
    }
    EXPECT_GE(dot / std::sqrt(na * nb), 0.99999) << rows[i].Find("id")->as_string();
    EXPECT_LE(max_abs, 1e-4) << rows[i].Find("id")->as_string();
  }
  EXPECT_EQ(i, rows.size());
  fs::remove_all(tmp);
}

TEST(EmbedCliTest, BadInputIsAClearError) {
  const std::string base = std::string(QUIVER_BINARY) + " embed --model " +
                           (kSource / "models" / "all-MiniLM-L6-v2").string();
  EXPECT_NE(std::system((base + " --input /nonexistent.jsonl 2>/dev/null").c_str()), 0);
  EXPECT_NE(std::system((base + " --text hi --dimensions 999 2>/dev/null").c_str()), 0);
  EXPECT_NE(std::system((base + " 2>/dev/null").c_str()), 0);  // no texts
}

}  // namespace
}  // namespace quiver
