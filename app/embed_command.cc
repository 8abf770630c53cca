// `quiver embed`: texts from the command line or JSON lines {"text": ...} -> embeddings as JSON
// lines {"index": i, "embedding": [...]} on stdout or a file, or a .npy matrix. Texts are
// tokenized with the model's tokenizer.json, truncated to the model's max_seq_length (as
// sentence-transformers does), and embedded in ragged batches of up to --max-batch-tokens.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/fidelity_gate.h"
#include "common/json.h"
#include "common/status.h"
#include "common/strings.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace quiver::app {
namespace {

absl::StatusOr<std::vector<std::string>> ReadTexts(const EmbedOptions& options) {
  std::vector<std::string> texts = options.texts;
  if (options.input_path.empty()) return texts;
  std::ifstream in(options.input_path);
  if (!in) return absl::NotFoundError(StrCat(options.input_path, ": cannot open"));
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    absl::StatusOr<JsonValue> json = JsonValue::Parse(line);
    if (!json.ok()) return WithContext(json.status(), StrCat(options.input_path, ":", number));
    absl::StatusOr<std::string> text = JsonString(*json, "text");
    if (!text.ok()) return WithContext(text.status(), StrCat(options.input_path, ":", number));
    texts.push_back(*std::move(text));
  }
  return texts;
}

void WriteNpyHeader(std::ostream& out, const char* descr, int64_t rows, int64_t cols) {
  std::string header = StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", rows,
                              ", ", cols, "), }");
  // Magic + version 1.0 + u16 length; the header is padded so the data starts 64-aligned.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
}

}  // namespace

int RunEmbed(const EmbedOptions& options) {
  absl::StatusOr<std::vector<std::string>> texts = ReadTexts(options);
  if (!texts.ok()) {
    std::fprintf(stderr, "quiver embed: %s\n", std::string(texts.status().message()).c_str());
    return 2;
  }
  if (texts->empty()) {
    std::fprintf(stderr, "quiver embed: no texts (give --text or --input)\n");
    return 2;
  }
  engine::EngineOptions engine_options;
  engine_options.num_threads = options.threads;
  engine_options.attention_backend = options.attention_backend;
  // A batch closes at max_batch_tokens or kMaxBatchSeqs sequences (the CUDA buffers' sizes).
  constexpr int64_t kMaxBatchSeqs = 512;
  if (absl::Status s = engine::ApplyDeviceSettings(options.device, options.max_batch_tokens,
                                                   kMaxBatchSeqs, engine_options);
      !s.ok()) {
    std::fprintf(stderr, "quiver embed: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  auto eng = engine::Engine::Load(options.model_dir, engine_options);
  if (!eng.ok()) {
    std::fprintf(stderr, "quiver embed: %s\n", std::string(eng.status().message()).c_str());
    return 1;
  }
  if ((*eng)->is_scorer()) {
    std::fprintf(stderr, "quiver embed: %s is a scoring model, not an embedding model\n",
                 options.model_dir.c_str());
    return 2;
  }
  // int8 weights must agree with the f32 engine before anything is written.
  if (absl::Status gate =
          engine_options.quantize == engine::ops::WeightPrecision::kInt8
              ? CheckFidelity(**eng, options.model_dir, options.device.min_int8_cosine)
              : absl::OkStatus();
      !gate.ok()) {
    std::fprintf(stderr, "quiver embed: %s\n", std::string(gate.message()).c_str());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::FromFile((*eng)->folder().tokenizer_path);
  if (!tok.ok()) {
    std::fprintf(stderr, "quiver embed: %s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  const int64_t max_tokens = std::min<int64_t>(
      (*eng)->folder().pooling.max_seq_length.value_or((*eng)->max_input_tokens()),
      (*eng)->max_input_tokens());
  tokenizer::EncodeOptions encode;
  encode.truncation = tokenizer::Truncation{static_cast<size_t>(max_tokens)};

  engine::OutputOptions output;
  output.dimensions = options.dimensions;
  if (options.normalize) output.normalize = true;
  output.output_type = options.dtype == "int8"     ? engine::OutputType::kInt8
                       : options.dtype == "binary" ? engine::OutputType::kBinary
                                                   : engine::OutputType::kF32;

  // Tokenize all, then submit ragged batches of up to max_batch_tokens; keep them in flight.
  std::vector<engine::LazyResult> results;
  std::vector<int64_t> batch_sizes;
  engine::RaggedBatch batch;
  batch.output = output;
  tokenizer::Encoding enc;
  for (size_t i = 0; i < texts->size(); ++i) {
    absl::Status status = (*tok)->Encode((*texts)[i], encode, &enc);
    if (!status.ok()) {
      std::fprintf(stderr, "quiver embed: text %zu: %s\n", i,
                   std::string(status.message()).c_str());
      return 2;
    }
    if (batch.num_seqs() > 0 &&
        (batch.num_tokens() + static_cast<int64_t>(enc.ids.size()) > options.max_batch_tokens ||
         batch.num_seqs() >= kMaxBatchSeqs)) {
      batch_sizes.push_back(batch.num_seqs());
      results.push_back((*eng)->Submit(std::move(batch)));
      batch = engine::RaggedBatch();
      batch.output = output;
    }
    std::vector<int32_t> ids(enc.ids.begin(), enc.ids.end());
    std::vector<int32_t> types(enc.type_ids.begin(), enc.type_ids.end());
    batch.Add(ids, &types);
  }
  batch_sizes.push_back(batch.num_seqs());
  results.push_back((*eng)->Submit(std::move(batch)));

  const bool npy = options.output_path.size() > 4 &&
                   options.output_path.compare(options.output_path.size() - 4, 4, ".npy") == 0;
  std::ofstream file;
  if (!options.output_path.empty()) {
    file.open(options.output_path, std::ios::binary | std::ios::trunc);
    if (!file) {
      std::fprintf(stderr, "quiver embed: cannot write %s\n", options.output_path.c_str());
      return 2;
    }
  }
  std::ostream& out = options.output_path.empty() ? std::cout : file;
  int64_t index = 0;
  bool header_written = false;
  for (const engine::LazyResult& r : results) {
    const absl::StatusOr<engine::EngineOutput>& o = r.Wait();
    if (!o.ok()) {
      std::fprintf(stderr, "quiver embed: %s\n", std::string(o.status().message()).c_str());
      return 1;
    }
    const int64_t row_bytes = static_cast<int64_t>(o->data.size()) / std::max<int64_t>(1, o->num_seqs);
    if (npy) {
      if (!header_written) {
        const char* descr = o->output_type == engine::OutputType::kF32    ? "<f4"
                            : o->output_type == engine::OutputType::kInt8 ? "|i1"
                                                                          : "|u1";
        const int64_t cols = o->output_type == engine::OutputType::kF32 ? o->dimensions
                                                                        : row_bytes;
        WriteNpyHeader(out, descr, static_cast<int64_t>(texts->size()), cols);
        header_written = true;
      }
      out.write(reinterpret_cast<const char*>(o->data.data()),
                static_cast<std::streamsize>(o->data.size()));
      continue;
    }
    std::string line;
    for (int64_t s = 0; s < o->num_seqs; ++s, ++index) {
      line = StrCat("{\"index\":", index, ",\"embedding\":[");
      const uint8_t* row = o->data.data() + s * row_bytes;
      for (int64_t j = 0; j < (o->output_type == engine::OutputType::kF32 ? o->dimensions
                                                                         : row_bytes);
           ++j) {
        if (j > 0) line += ',';
        if (o->output_type == engine::OutputType::kF32) {
          float v;
          std::memcpy(&v, row + 4 * j, 4);
          line += fmt::format("{}", v);  // shortest round-trip form
        } else if (o->output_type == engine::OutputType::kInt8) {
          line += std::to_string(static_cast<int8_t>(row[j]));
        } else {
          line += std::to_string(row[j]);
        }
      }
      line += "]}\n";
      out << line;
    }
  }
  out.flush();
  return out ? 0 : 1;
}

}  // namespace quiver::app
