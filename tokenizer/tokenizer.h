// Hugging Face tokenizer.json compatible tokenization: the same ids and type ids as the
// `tokenizers` library for the normalizers, pre-tokenizers, models (WordPiece, BPE, Unigram),
// post-processors and added tokens a tokenizer.json can name (see components.h).
//
// A Tokenizer is immutable once loaded and Encode is safe from many threads at once; per-call
// scratch space lives in thread-local buffers that are reused, so steady-state encoding does not
// allocate beyond growing the caller's Encoding.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace quiver::tokenizer {

struct Encoding {
  std::vector<uint32_t> ids;       // [num_tokens]
  std::vector<uint32_t> type_ids;  // [num_tokens]
  void clear() {
    ids.clear();
    type_ids.clear();
  }
};

enum class TruncationStrategy { kLongestFirst, kOnlyFirst, kOnlySecond };
enum class TruncationSide { kRight, kLeft };

struct Truncation {
  size_t max_length = 512;  // tokens, including the special tokens the post-processor adds
  TruncationStrategy strategy = TruncationStrategy::kLongestFirst;
  TruncationSide side = TruncationSide::kRight;  // kLeft keeps the end of the text
};

struct EncodeOptions {
  bool add_special_tokens = true;
  std::optional<Truncation> truncation;
  // Inputs longer than this many code points are cut to it before any other work (0: no cut).
  // A guard against huge inputs, applied per text of a pair.
  size_t max_input_chars = 0;
};

class Model;
class Normalizer;
class PreTokenizer;
class PostProcessor;
class Decoder;
class AddedVocabulary;

class Tokenizer {
 public:
  // INVALID_ARGUMENT naming the JSON path and the unsupported component or malformed field.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json);
  ~Tokenizer();

  // INVALID_ARGUMENT "invalid UTF-8 at byte N" for malformed input; a truncation that cannot be
  // met (only_first on a first text shorter than what must go) is INVALID_ARGUMENT too.
  absl::Status Encode(std::string_view text, const EncodeOptions& options, Encoding* out) const;
  // EncodePair for two texts already encoded without special tokens (Encode with
  // add_special_tokens false): the same truncation and post-processing, so a query scored
  // against many documents is tokenized once.
  absl::Status EncodePairIds(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                             const EncodeOptions& options, Encoding* out) const;
  absl::Status EncodePair(std::string_view text, std::string_view text_pair,
                          const EncodeOptions& options, Encoding* out) const;

  // Encode without truncation, plus where each token came from: `offsets` gets one entry per id
  // of `out`, the byte range [begin, end) of `text`, as Hugging Face tokenizers (in Rust) report
  // them; nullopt for the special tokens the post-processor adds. Where a component of the
  // pipeline does not trace its output back to the input (today: anything but the BERT
  // normalizer, whitespace-and-punctuation pre-tokenizers and WordPiece), every entry is
  // nullopt. `options.truncation` must be unset.
  using Offset = std::optional<std::pair<uint32_t, uint32_t>>;
  absl::Status EncodeWithOffsets(std::string_view text, const EncodeOptions& options, Encoding* out,
                                 std::vector<Offset>* offsets) const;

  // The post-processor's special tokens around one already-tokenized text (prefix + ids +
  // suffix, with type ids), as Encode would add them.
  void AddSpecialTokens(const std::vector<uint32_t>& ids, Encoding* out) const;

  // Text for `ids` through the tokenizer.json decoder; unknown ids are skipped.
  std::string Decode(const std::vector<uint32_t>& ids, bool skip_special_tokens) const;

  std::optional<uint32_t> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(uint32_t id) const;
  // Whether `id` is one of tokenizer.json's special added tokens ([CLS], <|im_end|>, ...).
  bool IsSpecial(uint32_t id) const;
  size_t vocab_size() const;
  // Special tokens the post-processor adds for one text (pair = false) or two.
  size_t NumAddedTokens(bool pair) const;

 private:
  Tokenizer();
  // Truncation (when asked) and the post-processor, for one text (b null) or a pair.
  absl::Status Finish(std::vector<uint32_t>& a, std::vector<uint32_t>* b,
                      const EncodeOptions& options, Encoding* out) const;
  // Appends the ids of one text (no special tokens, no truncation) to `ids`.
  absl::Status EncodeText(std::string_view text, size_t max_input_chars,
                          std::vector<uint32_t>& ids) const;
  void EncodeSection(std::string_view normalized, bool at_start, std::vector<uint32_t>& ids) const;

  std::unique_ptr<AddedVocabulary> added_;
  std::unique_ptr<Normalizer> normalizer_;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer_;  // may be null
  std::unique_ptr<Model> model_;
  std::unique_ptr<PostProcessor> post_processor_;  // may be null
  std::unique_ptr<Decoder> decoder_;               // may be null
};

}  // namespace quiver::tokenizer
