// The parts of a tokenizer.json pipeline, each built from its JSON object. Internal to the
// tokenizer library; tokenizer.h is the public interface.
//
// Every component is immutable after construction and thread-safe; scratch space is
// thread-local.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/json.h"

namespace quiver::tokenizer {

// Substrings kept in one buffer, so a list of pieces reuses its memory across calls.
class Pieces {
 public:
  void clear() {
    text_.clear();
    spans_.clear();
  }
  // Empty pieces are dropped, as Hugging Face drops empty splits.
  void Add(std::string_view piece) {
    if (piece.empty()) return;
    const auto begin = static_cast<uint32_t>(text_.size());
    text_.append(piece);
    spans_.emplace_back(begin, static_cast<uint32_t>(text_.size()));
  }
  // For pieces built in place: Begin(), append to text(), End().
  std::string& text() { return text_; }
  size_t size() const { return spans_.size(); }
  std::string_view operator[](size_t i) const {
    return std::string_view(text_).substr(spans_[i].first, spans_[i].second - spans_[i].first);
  }

 private:
  std::string text_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;
};

// Vocabulary lookup by string_view without building a std::string.
using Vocab = absl::flat_hash_map<std::string, uint32_t>;
inline std::optional<uint32_t> Lookup(const Vocab& vocab, std::string_view key) {
  auto it = vocab.find(absl::string_view(key.data(), key.size()));
  if (it == vocab.end()) return std::nullopt;
  return it->second;
}

// A per-thread memo of word -> ids for one model instance, as Hugging Face caches BPE and
// Unigram words: real text repeats its words, and a hash lookup is far cheaper than merging or a
// Viterbi pass. Each thread has its own table (no locks); a table is cleared when it reaches
// kMaxEntries, so memory stays bounded. Only words up to kMaxWordBytes are kept.
class WordCache {
 public:
  static constexpr size_t kMaxEntries = 1 << 16;
  static constexpr size_t kMaxWordBytes = 256;

  WordCache();
  // Appends the cached ids of `word` to `ids` and returns true, or returns false.
  bool Lookup(std::string_view word, std::vector<uint32_t>& ids) const;
  // Remembers ids[first:] as the ids of `word`.
  void Insert(std::string_view word, const std::vector<uint32_t>& ids, size_t first) const;

 private:
  struct Table {
    absl::flat_hash_map<std::string, std::pair<uint32_t, uint32_t>> words;  // -> arena span
    std::vector<uint32_t> arena;
  };
  Table& ForThisThread() const;
  uint64_t instance_;  // unique per cache, so a table never outlives the model it belongs to
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // out = normalized(in); out is cleared first and never aliases in.
  virtual void Apply(std::string_view in, std::string& out) const = 0;
  // Apply, plus for each byte of `out` the byte range [begin, end) of `in` it came from (for
  // token offsets). False where the normalizer does not track that; `out` is then unspecified.
  virtual bool ApplyAligned(std::string_view in, std::string& out, std::vector<uint32_t>& begin,
                            std::vector<uint32_t>& end) const {
    (void)in, (void)out, (void)begin, (void)end;
    return false;
  }
};

// The alignment of a text that a normalizer left unchanged: each byte maps to its code point.
void IdentityAlignment(std::string_view text, std::vector<uint32_t>& begin,
                       std::vector<uint32_t>& end);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Appends the pieces of `text` to `out`. `at_start`: text begins the whole input (for
  // Metaspace's prepend_scheme "first").
  virtual void Split(std::string_view text, bool at_start, Pieces& out) const = 0;
  // What its pieces are, for token offsets: substrings of the text (or not traced, found out
  // when a piece is not one), byte-level images of substrings (each byte one character of
  // ByteToUnicode), cuts of a rewritten text that AlignPieces traces (Metaspace), or text that
  // cannot be traced back (a prefix space added).
  enum class PieceForm { kSubstring, kByteLevel, kRewritten, kUntraced };
  virtual PieceForm piece_form() const { return PieceForm::kSubstring; }
  // kRewritten: for each byte of the pieces' concatenation (what Split(text, at_start) gives,
  // in order), the byte range [begin, end) of `text` it stands for, as Hugging Face aligns it.
  virtual void AlignPieces(std::string_view text, bool at_start, std::vector<uint32_t>& begin,
                           std::vector<uint32_t>& end) const {
    (void)text, (void)at_start, (void)begin, (void)end;
  }
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized word.
  virtual void Tokenize(std::string_view word, std::vector<uint32_t>& ids) const = 0;
  // The byte range of `word` each of `ids` (what Tokenize gave for it) covers, appended to
  // `spans`. False where the model cannot say (its tokens are not pieces of the word).
  virtual bool Spans(std::string_view word, const uint32_t* ids, size_t n,
                     std::vector<std::pair<uint32_t, uint32_t>>& spans) const {
    (void)word, (void)ids, (void)n, (void)spans;
    return false;
  }
  virtual std::optional<uint32_t> TokenToId(std::string_view token) const = 0;
  virtual std::optional<std::string> IdToToken(uint32_t id) const = 0;
  virtual size_t vocab_size() const = 0;
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Whether Hugging Face trims whitespace off the tokens' offsets here (ByteLevel's and
  // RobertaProcessing's trim_offsets): offsets are not traced then.
  bool trims_offsets = false;
  virtual size_t NumAddedTokens(bool pair) const = 0;
  // out = the final ids and type ids for a (and b when non-null).
  virtual void Process(const std::vector<uint32_t>& a, const std::vector<uint32_t>* b,
                       bool add_special_tokens, std::vector<uint32_t>& ids,
                       std::vector<uint32_t>& type_ids) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Hugging Face's decode_chain: tokens in, tokens out; the caller concatenates.
  virtual void DecodeChain(std::vector<std::string>& tokens) const = 0;
};

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// Added tokens are matched before the model sees the text: those with normalized=false in the
// raw text, the others in the normalized text, leftmost-longest.
class AddedVocabulary {
 public:
  struct Match {
    uint32_t begin;
    uint32_t end;
    int64_t id;  // -1: not an added token
  };
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // `out` = sections covering `text`; `normalized` picks which set of tokens to look for.
  void Split(std::string_view text, bool normalized, std::vector<Match>& out) const;
  std::optional<uint32_t> TokenToId(std::string_view token) const;
  const AddedToken* FindById(uint32_t id) const;
  bool empty() const { return tokens_.empty(); }

 private:
  struct PatternSet {
    std::vector<std::pair<std::string, size_t>> patterns;  // (text, index into tokens_)
    std::vector<std::vector<uint32_t>> by_first_byte;  // [256] -> pattern indices, longest first
  };
  void Build(PatternSet& set, bool normalized, const Normalizer* normalizer);

  std::vector<AddedToken> tokens_;
  PatternSet raw_;
  PatternSet normalized_;
};

absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const JsonValue& json);
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const JsonValue& json);
absl::StatusOr<std::unique_ptr<Model>> MakeModel(const JsonValue& json);
// `model` resolves token names the post-processor refers to.
absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(const JsonValue& json);
absl::StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const JsonValue& json);

// The GPT-2 byte-to-character table (ByteLevel), as UTF-8 strings, and its inverse.
const std::string& ByteToUnicode(uint8_t byte);
std::optional<uint8_t> UnicodeToByte(char32_t c);

}  // namespace quiver::tokenizer
