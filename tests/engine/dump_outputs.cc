// engine_dump_outputs OUT_FILE: every output the engine gives for the fixture texts, as raw bytes,
// for comparing two builds byte for byte (`cmp a.bin b.bin`) across a refactoring that must not
// change a bit (docs/architecture.md, "Checking a refactoring").
//
// For all-MiniLM-L6-v2 and each tiny checkpoint: every fixture text alone, all of them in one
// ragged batch, under each attention backend and with bucket padding; for embedding models also
// every pooling override, f16 / int8 / binary outputs, Matryoshka dimensions with and without
// normalization, and late-chunking spans. Each record is a text header (model, case, row count,
// byte count) followed by the output bytes, so a difference can be located with `cmp -l`.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/json.h"
#include "engine/engine.h"

namespace {

namespace fs = std::filesystem;
using quiver::JsonValue;
using namespace quiver::engine;

const fs::path kSource = QUIVER_SOURCE_DIR;

struct Text {
  std::vector<int32_t> ids, types;
};

std::vector<Text> ReadTexts(const fs::path& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(1);
  }
  std::vector<Text> out;
  std::string line;
  while (std::getline(in, line)) {
    const JsonValue row = *JsonValue::Parse(line);
    Text t;
    for (const JsonValue& v : row.Find("ids")->items()) t.ids.push_back(int32_t(v.as_int()));
    if (const JsonValue* types = row.Find("type_ids")) {
      for (const JsonValue& v : types->items()) t.types.push_back(int32_t(v.as_int()));
    }
    out.push_back(std::move(t));
  }
  return out;
}

void Add(RaggedBatch& b, const Text& t) {
  if (t.types.empty()) {
    b.Add(t.ids);
  } else {
    b.Add(t.ids, &t.types);
  }
}

class Dump {
 public:
  explicit Dump(const std::string& path) : out_(path, std::ios::binary) {}
  void Record(const std::string& label, const absl::StatusOr<EngineOutput>& result) {
    if (!result.ok()) {
      std::fprintf(stderr, "%s: %s\n", label.c_str(),
                   std::string(result.status().message()).c_str());
      std::exit(1);
    }
    const std::string header = label + " rows=" + std::to_string(result->num_seqs) +
                               " dims=" + std::to_string(result->dimensions) +
                               " bytes=" + std::to_string(result->data.size()) + "\n";
    out_.write(header.data(), static_cast<std::streamsize>(header.size()));
    out_.write(reinterpret_cast<const char*>(result->data.data()),
               static_cast<std::streamsize>(result->data.size()));
    ++records_;
  }
  int records() const { return records_; }

 private:
  std::ofstream out_;
  int records_ = 0;
};

void DumpModel(Dump& dump, const std::string& name, const fs::path& dir,
               const std::vector<Text>& texts, EngineOptions base) {
  for (const char* attention : {"", "reference", "packed", "tiled", "flash"}) {
    for (bool pad : {false, true}) {
      EngineOptions options = base;
      options.attention_backend = attention;
      options.pad_to_buckets = pad;
      auto engine = Engine::Load(dir.string(), options);
      if (!engine.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(),
                     std::string(engine.status().message()).c_str());
        std::exit(1);
      }
      const std::string tag =
          name + " attention=" + (*attention ? attention : "table") + (pad ? " padded" : "");
      RaggedBatch all;
      for (const Text& t : texts) Add(all, t);
      dump.Record(tag + " batch", (*engine)->Run(all));
      for (size_t i = 0; i < texts.size(); ++i) {
        RaggedBatch one;
        Add(one, texts[i]);
        dump.Record(tag + " alone " + std::to_string(i), (*engine)->Run(one));
      }
      if ((*engine)->is_scorer() || *attention || pad) continue;
      // Output options, on the table's backend only.
      for (Pooling pooling : {Pooling::kCls, Pooling::kMean, Pooling::kLastToken}) {
        RaggedBatch b = all;
        b.output.pooling = pooling;
        dump.Record(tag + " pooling " + std::to_string(int(pooling)), (*engine)->Run(b));
      }
      for (OutputType type : {OutputType::kF16, OutputType::kInt8, OutputType::kBinary}) {
        for (bool normalize : {false, true}) {
          RaggedBatch b = all;
          b.output.output_type = type;
          b.output.normalize = normalize;
          b.output.dimensions = 17;
          dump.Record(tag + " type " + std::to_string(int(type)) + " normalize " +
                          std::to_string(normalize),
                      (*engine)->Run(b));
        }
      }
      RaggedBatch spans = all;
      for (int64_t s = 0; s < all.num_seqs(); ++s) {
        const int32_t begin = all.cu_seqlens[s], end = all.cu_seqlens[s + 1];
        const int32_t mid = begin + (end - begin + 1) / 2;
        spans.span_bounds.insert(spans.span_bounds.end(), {begin, mid});
        if (mid < end) spans.span_bounds.insert(spans.span_bounds.end(), {mid, end});
      }
      dump.Record(tag + " spans", (*engine)->Run(spans));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_FILE\n", argv[0]);
    return 2;
  }
  Dump dump(argv[1]);
  const fs::path fixtures = kSource / "tests" / "fixtures";
  DumpModel(dump, "all-MiniLM-L6-v2", kSource / "models" / "all-MiniLM-L6-v2",
            ReadTexts(fixtures / "minilm" / "embeddings.jsonl"), {});
  for (const char* tiny : {"bert_mean", "bert_cross_encoder", "qwen3_causal_lasttoken",
                           "qwen3_bidirectional_mean", "qwen3_reranker"}) {
    const fs::path dir = fixtures / "tiny" / tiny;
    const JsonValue meta =
        *JsonValue::Parse(*quiver::ReadFile((dir / "reference.meta.json").string()));
    EngineOptions options;
    if (const JsonValue* yes = meta.Find("yes_token_id")) {
      options.model.yes_token_id = static_cast<int32_t>(yes->as_int());
      options.model.no_token_id = static_cast<int32_t>(meta.Find("no_token_id")->as_int());
    }
    DumpModel(dump, tiny, dir, ReadTexts(dir / "reference.jsonl"), options);
  }
  std::printf("%d outputs written to %s\n", dump.records(), argv[1]);
  return 0;
}
