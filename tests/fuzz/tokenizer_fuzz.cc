// libFuzzer target: arbitrary bytes through Encode, EncodeWithOffsets (offsets inside the text),
// EncodePair (bytes split in two), truncation and Decode, for the WordPiece, byte-level BPE and
// the two Unigram tokenizers (NFKC and sentencepiece's Precompiled rules) of tests/fixtures.
// Invalid UTF-8 must come back as an error; nothing may crash, hang or leak.
//
//   scripts/fuzz.sh [seconds]    builds with clang, ASan and UBSan, and runs it
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

std::vector<std::unique_ptr<quiver::tokenizer::Tokenizer>>& Tokenizers() {
  static auto* tokenizers = [] {
    auto* out = new std::vector<std::unique_ptr<quiver::tokenizer::Tokenizer>>();
    for (const char* name :
         {"minilm_wordpiece", "qwen_style_bpe", "xlmr_style_unigram", "xlmr_precompiled_unigram"}) {
      std::string path =
          std::string(QUIVER_SOURCE_DIR) + "/tests/fixtures/tokenizers/" + name + "/tokenizer.json";
      auto t = quiver::tokenizer::Tokenizer::FromFile(path);
      if (!t.ok()) __builtin_trap();
      out->push_back(*std::move(t));
    }
    return out;
  }();
  return *tokenizers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // First byte picks the tokenizer and options; the rest is the text.
  const uint8_t control = data[0];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool valid = quiver::tokenizer::ValidateUtf8(text).ok();
  auto& tokenizer = *Tokenizers()[control % Tokenizers().size()];

  quiver::tokenizer::EncodeOptions options;
  options.add_special_tokens = (control & 0x04) != 0;
  if (control & 0x08) {
    quiver::tokenizer::Truncation t;
    t.max_length = (control >> 4) + 1;
    t.side = (control & 0x02) ? quiver::tokenizer::TruncationSide::kLeft
                              : quiver::tokenizer::TruncationSide::kRight;
    options.truncation = t;
  }
  if (control & 0x80) options.max_input_chars = control & 0x3F;

  quiver::tokenizer::Encoding enc;
  absl::Status status = tokenizer.Encode(text, options, &enc);
  if (status.ok() != valid) __builtin_trap();  // errors exactly for invalid UTF-8
  if (status.ok()) {
    if (enc.ids.size() != enc.type_ids.size()) __builtin_trap();
    if (options.truncation && enc.ids.size() > options.truncation->max_length &&
        options.truncation->max_length >= tokenizer.NumAddedTokens(false)) {
      __builtin_trap();
    }
    std::string decoded = tokenizer.Decode(enc.ids, control & 0x01);
    if (!quiver::tokenizer::ValidateUtf8(decoded).ok()) __builtin_trap();
  }
  if (!options.truncation) {  // /tokenize's path: offsets inside the text, in order
    std::vector<quiver::tokenizer::Tokenizer::Offset> offsets;
    status = tokenizer.EncodeWithOffsets(text, options, &enc, &offsets);
    if (status.ok() != valid) __builtin_trap();
    if (status.ok()) {
      if (offsets.size() != enc.ids.size()) __builtin_trap();
      for (const auto& o : offsets) {
        if (o && (o->first > o->second || o->second > text.size())) __builtin_trap();
      }
    }
  }
  const size_t half = text.size() / 2;
  quiver::tokenizer::Encoding pair;
  (void)tokenizer.EncodePair(text.substr(0, half), text.substr(half), options, &pair);
  return 0;
}
