#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "common/file.h"
#include "common/status.h"
#include "common/strings.h"
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace quiver::tokenizer {

std::unique_ptr<PostProcessor> MakeDefaultPostProcessor();

namespace {

// Per-thread buffers for one Encode call, reused across calls.
struct Scratch {
  std::vector<AddedVocabulary::Match> raw_sections;
  std::vector<AddedVocabulary::Match> normalized_sections;
  std::string normalized;
  Pieces pieces;
  std::vector<uint32_t> a, b;
};

Scratch& GetScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// `text` cut to at most `max_chars` code points (valid UTF-8 in, valid UTF-8 out).
std::string_view CutChars(std::string_view text, size_t max_chars) {
  if (max_chars == 0 || text.size() <= max_chars) return text;
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) {
      if (chars == max_chars) return text.substr(0, i);
      ++chars;
    }
  }
  return text;
}

void Truncate(std::vector<uint32_t>& ids, size_t length, TruncationSide side) {
  if (ids.size() <= length) return;
  if (side == TruncationSide::kRight) {
    ids.resize(length);
  } else {
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(length));
  }
}

// Hugging Face's truncate_encodings, on ids.
absl::Status TruncatePair(std::vector<uint32_t>& a, std::vector<uint32_t>* b, size_t max_length,
                          TruncationStrategy strategy, TruncationSide side) {
  const size_t total = a.size() + (b ? b->size() : 0);
  if (total <= max_length) return absl::OkStatus();
  const size_t to_remove = total - max_length;
  if (strategy == TruncationStrategy::kLongestFirst) {
    if (b == nullptr) {
      Truncate(a, max_length, side);
      return absl::OkStatus();
    }
    size_t n1 = a.size(), n2 = b->size();
    const bool swap = n1 > n2;
    if (swap) std::swap(n1, n2);
    n2 = n1 > max_length ? n1 : std::max(n1, max_length - n1);
    if (n1 + n2 > max_length) {
      n1 = max_length / 2;
      n2 = n1 + max_length % 2;
    }
    if (swap) std::swap(n1, n2);
    Truncate(a, n1, side);
    Truncate(*b, n2, side);
    return absl::OkStatus();
  }
  std::vector<uint32_t>* target = strategy == TruncationStrategy::kOnlyFirst ? &a : b;
  if (target == nullptr) {
    return absl::InvalidArgumentError("truncation only_second needs a second text");
  }
  if (target->size() <= to_remove) {
    return absl::InvalidArgumentError(
        StrCat("cannot truncate to ", max_length, " tokens: the ",
               strategy == TruncationStrategy::kOnlyFirst ? "first" : "second", " text has only ",
               target->size(), " tokens and ", to_remove, " must go"));
  }
  Truncate(*target, target->size() - to_remove, side);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const JsonValue& root) {
  std::vector<AddedToken> out;
  const JsonValue* list = root.Find("added_tokens");
  if (list == nullptr || list->is_null()) return out;
  if (!list->is_array()) return absl::InvalidArgumentError("'added_tokens' must be a list");
  for (size_t i = 0; i < list->items().size(); ++i) {
    const JsonValue& item = list->items()[i];
    AddedToken token;
    absl::Status status = [&]() -> absl::Status {
      QUIVER_ASSIGN_OR_RETURN(int64_t id, JsonInt(item, "id"));
      QUIVER_ASSIGN_OR_RETURN(token.content, JsonString(item, "content"));
      QUIVER_ASSIGN_OR_RETURN(token.single_word, JsonBool(item, "single_word", false));
      QUIVER_ASSIGN_OR_RETURN(token.lstrip, JsonBool(item, "lstrip", false));
      QUIVER_ASSIGN_OR_RETURN(token.rstrip, JsonBool(item, "rstrip", false));
      QUIVER_ASSIGN_OR_RETURN(token.special, JsonBool(item, "special", false));
      QUIVER_ASSIGN_OR_RETURN(token.normalized, JsonBool(item, "normalized", !token.special));
      if (id < 0) return absl::InvalidArgumentError("negative id");
      token.id = static_cast<uint32_t>(id);
      return absl::OkStatus();
    }();
    if (!status.ok()) return WithContext(status, StrCat("added_tokens[", i, "]"));
    out.push_back(std::move(token));
  }
  return out;
}

absl::StatusOr<std::optional<Truncation>> ParseTruncation(const JsonValue& root) {
  const JsonValue* json = root.Find("truncation");
  if (json == nullptr || json->is_null()) return std::optional<Truncation>();
  Truncation t;
  QUIVER_ASSIGN_OR_RETURN(int64_t max_length, JsonInt(*json, "max_length"));
  t.max_length = static_cast<size_t>(std::max<int64_t>(0, max_length));
  QUIVER_ASSIGN_OR_RETURN(std::string strategy, JsonString(*json, "strategy", "LongestFirst"));
  if (strategy == "OnlyFirst") t.strategy = TruncationStrategy::kOnlyFirst;
  if (strategy == "OnlySecond") t.strategy = TruncationStrategy::kOnlySecond;
  QUIVER_ASSIGN_OR_RETURN(std::string direction, JsonString(*json, "direction", "Right"));
  if (direction == "Left") t.side = TruncationSide::kLeft;
  return std::optional<Truncation>(t);
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  QUIVER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = FromJson(text);
  if (!tokenizer.ok()) return WithContext(tokenizer.status(), path);
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json) {
  QUIVER_ASSIGN_OR_RETURN(JsonValue root, JsonValue::Parse(json));
  if (!root.is_object()) return absl::InvalidArgumentError("tokenizer.json is not an object");
  std::unique_ptr<Tokenizer> t(new Tokenizer());

  auto component = [&](std::string_view key) -> const JsonValue* {
    const JsonValue* value = root.Find(key);
    return (value == nullptr || value->is_null()) ? nullptr : value;
  };
  if (const JsonValue* n = component("normalizer")) {
    absl::StatusOr<std::unique_ptr<Normalizer>> normalizer = MakeNormalizer(*n);
    if (!normalizer.ok()) return WithContext(normalizer.status(), "normalizer");
    t->normalizer_ = *std::move(normalizer);
  }
  if (const JsonValue* p = component("pre_tokenizer")) {
    absl::StatusOr<std::unique_ptr<PreTokenizer>> pre = MakePreTokenizer(*p);
    if (!pre.ok()) return WithContext(pre.status(), "pre_tokenizer");
    t->pre_tokenizer_ = *std::move(pre);
  }
  const JsonValue* model = component("model");
  if (model == nullptr) return absl::InvalidArgumentError("missing 'model'");
  absl::StatusOr<std::unique_ptr<Model>> m = MakeModel(*model);
  if (!m.ok()) return WithContext(m.status(), "model");
  t->model_ = *std::move(m);
  if (const JsonValue* p = component("post_processor")) {
    absl::StatusOr<std::unique_ptr<PostProcessor>> post = MakePostProcessor(*p);
    if (!post.ok()) return WithContext(post.status(), "post_processor");
    t->post_processor_ = *std::move(post);
  } else {
    t->post_processor_ = MakeDefaultPostProcessor();
  }
  if (const JsonValue* d = component("decoder")) {
    absl::StatusOr<std::unique_ptr<Decoder>> decoder = MakeDecoder(*d);
    if (!decoder.ok()) return WithContext(decoder.status(), "decoder");
    t->decoder_ = *std::move(decoder);
  }
  QUIVER_ASSIGN_OR_RETURN(std::vector<AddedToken> added, ParseAddedTokens(root));
  t->added_ = std::make_unique<AddedVocabulary>(std::move(added), t->normalizer_.get());
  // The truncation tokenizer.json asks for is checked, as Hugging Face's loader does, and then
  // not applied: transformers' fast tokenizers (and so sentence-transformers) turn it off and
  // truncate at the model's own limit when asked to, as quiver's callers do (EncodeOptions).
  absl::StatusOr<std::optional<Truncation>> truncation = ParseTruncation(root);
  if (!truncation.ok()) return WithContext(truncation.status(), "truncation");
  return t;
}

void Tokenizer::EncodeSection(std::string_view normalized, bool at_start,
                              std::vector<uint32_t>& ids) const {
  if (normalized.empty()) return;
  if (pre_tokenizer_ == nullptr) {
    model_->Tokenize(normalized, ids);
    return;
  }
  Pieces& pieces = GetScratch().pieces;
  pieces.clear();
  pre_tokenizer_->Split(normalized, at_start, pieces);
  for (size_t i = 0; i < pieces.size(); ++i) model_->Tokenize(pieces[i], ids);
}

absl::Status Tokenizer::EncodeText(std::string_view text, size_t max_input_chars,
                                   std::vector<uint32_t>& ids) const {
  QUIVER_RETURN_IF_ERROR(ValidateUtf8(text));
  text = CutChars(text, max_input_chars);
  Scratch& scratch = GetScratch();
  added_->Split(text, /*normalized=*/false, scratch.raw_sections);
  for (const AddedVocabulary::Match& raw : scratch.raw_sections) {
    if (raw.id >= 0) {
      ids.push_back(static_cast<uint32_t>(raw.id));
      continue;
    }
    std::string_view section = text.substr(raw.begin, raw.end - raw.begin);
    std::string_view normalized = section;
    if (normalizer_ != nullptr) {
      normalizer_->Apply(section, scratch.normalized);
      normalized = scratch.normalized;
    }
    added_->Split(normalized, /*normalized=*/true, scratch.normalized_sections);
    for (const AddedVocabulary::Match& sub : scratch.normalized_sections) {
      if (sub.id >= 0) {
        ids.push_back(static_cast<uint32_t>(sub.id));
        continue;
      }
      EncodeSection(normalized.substr(sub.begin, sub.end - sub.begin),
                    raw.begin == 0 && sub.begin == 0, ids);
    }
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::Encode(std::string_view text, const EncodeOptions& options,
                               Encoding* out) const {
  Scratch& scratch = GetScratch();
  scratch.a.clear();
  QUIVER_RETURN_IF_ERROR(EncodeText(text, options.max_input_chars, scratch.a));
  return Finish(scratch.a, nullptr, options, out);
}

absl::Status Tokenizer::EncodePair(std::string_view text, std::string_view text_pair,
                                   const EncodeOptions& options, Encoding* out) const {
  Scratch& scratch = GetScratch();
  scratch.a.clear();
  scratch.b.clear();
  QUIVER_RETURN_IF_ERROR(EncodeText(text, options.max_input_chars, scratch.a));
  QUIVER_RETURN_IF_ERROR(EncodeText(text_pair, options.max_input_chars, scratch.b));
  return Finish(scratch.a, &scratch.b, options, out);
}

absl::Status Tokenizer::Finish(std::vector<uint32_t>& a, std::vector<uint32_t>* b,
                               const EncodeOptions& options, Encoding* out) const {
  if (options.truncation) {
    const size_t added = options.add_special_tokens ? NumAddedTokens(b != nullptr) : 0;
    const size_t budget =
        options.truncation->max_length > added ? options.truncation->max_length - added : 0;
    QUIVER_RETURN_IF_ERROR(
        TruncatePair(a, b, budget, options.truncation->strategy, options.truncation->side));
  }
  post_processor_->Process(a, b, options.add_special_tokens, out->ids, out->type_ids);
  return absl::OkStatus();
}

namespace {

bool IsAsciiOrUnicodeSpace(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (!IsWhitespace(NextCodePoint(s, i))) return false;
  }
  return true;
}

// A byte-level piece back to the bytes it stands for (ByteToUnicode inverted); `char_at` gets,
// for each byte of `piece`, the index of the character it belongs to (one per original byte).
bool UnmapBytes(std::string_view piece, std::string& bytes, std::vector<uint32_t>& char_at) {
  static const absl::flat_hash_map<char32_t, uint8_t>* inverse = [] {
    auto* m = new absl::flat_hash_map<char32_t, uint8_t>();
    for (int b = 0; b < 256; ++b) {
      const std::string& s = ByteToUnicode(static_cast<uint8_t>(b));
      size_t i = 0;
      (*m)[NextCodePoint(s, i)] = static_cast<uint8_t>(b);
    }
    return m;
  }();
  bytes.clear();
  char_at.assign(piece.size(), 0);
  for (size_t i = 0; i < piece.size();) {
    const size_t start = i;
    auto it = inverse->find(NextCodePoint(piece, i));
    if (it == inverse->end()) return false;
    for (size_t k = start; k < i; ++k) char_at[k] = static_cast<uint32_t>(bytes.size());
    bytes.push_back(static_cast<char>(it->second));
  }
  return true;
}

}  // namespace

namespace {

using Span = std::pair<uint32_t, uint32_t>;

// A normalized section's byte range [b, e) back to the text's bytes: the section starts at `base`
// in the text, and align_begin / align_end give each normalized byte's first and last original
// byte (Normalizer::ApplyAligned).
struct SectionAlignment {
  uint32_t base;
  const std::vector<uint32_t>& begin;
  const std::vector<uint32_t>& end;
  Span operator()(size_t b, size_t e) const { return {base + begin[b], base + end[e - 1]}; }
};

// The ids of one text and, per id, the bytes of the text it stands for (EncodeWithOffsets), piece
// by piece. `traced` turns false at the first piece whose bytes cannot be found, and every span
// from there on is (0, 0): offsets are never guessed.
class OffsetTrace {
 public:
  OffsetTrace(const PreTokenizer& pre_tokenizer, const Model& model, bool traced)
      : pre_(pre_tokenizer), model_(model), form_(pre_tokenizer.piece_form()), traced_(traced) {}

  bool traced() const { return traced_; }
  void Untrace() { traced_ = false; }
  const std::vector<uint32_t>& ids() const { return ids_; }
  const std::vector<Span>& spans() const { return spans_; }

  // An added token, or a piece of text that maps to one id as a whole.
  void AddToken(uint32_t id, Span span) {
    ids_.push_back(id);
    spans_.push_back(traced_ ? span : Span(0, 0));
  }

  // `part`, bytes [part_begin, part_begin + size) of a normalized section with no added token in
  // it: pre-tokenized, each piece tokenized, and each id's bytes traced back through `original`.
  void Part(std::string_view part, size_t part_begin, bool at_start,
            const SectionAlignment& original) {
    pieces_.clear();
    pre_.Split(part, at_start, pieces_);
    const bool rewritten = form_ == PreTokenizer::PieceForm::kRewritten;
    if (traced_ && rewritten) pre_.AlignPieces(part, at_start, piece_begin_, piece_end_);
    size_t cursor = 0;
    for (size_t p = 0; p < pieces_.size(); ++p) {
      const std::string_view piece = pieces_[p];
      const size_t first = ids_.size();
      model_.Tokenize(piece, ids_);
      if (rewritten) {
        RewrittenPiece(piece, first, part_begin, cursor, original);
      } else {
        FoundPiece(piece, first, part, part_begin, cursor, original);
      }
    }
  }

 private:
  // The ids [first, end) of `piece` traced no further: (0, 0) for them and every later one.
  void Lost() {
    traced_ = false;
    spans_.resize(ids_.size(), {0, 0});
  }

  // The model's spans of the piece's ids [first, end), in the piece's bytes; false if it has none.
  bool PieceSpans(std::string_view piece, size_t first) {
    word_spans_.clear();
    return model_.Spans(piece, ids_.data() + first, ids_.size() - first, word_spans_) &&
           word_spans_.size() == ids_.size() - first;
  }

  void Push(size_t nb, size_t ne, const SectionAlignment& original) {
    spans_.push_back(ne > nb ? original(nb, ne) : Span(0, 0));
  }

  // A piece of a rewritten text (Metaspace): the pieces cut it in order, so this one is piece
  // bytes [cursor, cursor + size), which AlignPieces traced to the part's bytes.
  void RewrittenPiece(std::string_view piece, size_t first, size_t part_begin, size_t& cursor,
                      const SectionAlignment& original) {
    if (!traced_ || cursor + piece.size() > piece_begin_.size() || !PieceSpans(piece, first)) {
      Lost();
      return;
    }
    for (const auto& [b, e] : word_spans_) {
      if (e <= b) {
        spans_.emplace_back(0, 0);
        continue;
      }
      Push(part_begin + piece_begin_[cursor + b], part_begin + piece_end_[cursor + e - 1],
           original);
    }
    cursor += piece.size();
  }

  // A piece that is the part's own text (or, byte-level, stands for it): found at its next
  // occurrence from `cursor`, with only whitespace skipped.
  void FoundPiece(std::string_view piece, size_t first, std::string_view part, size_t part_begin,
                  size_t& cursor, const SectionAlignment& original) {
    const bool byte_level = form_ == PreTokenizer::PieceForm::kByteLevel;
    std::string_view source = piece;
    if (traced_ && byte_level) {
      traced_ = UnmapBytes(piece, unmapped_, char_at_);
      source = unmapped_;
    }
    const size_t at = traced_ ? part.find(source, cursor) : std::string_view::npos;
    if (!traced_ || at == std::string_view::npos ||
        !IsAsciiOrUnicodeSpace(part.substr(cursor, at - cursor)) || !PieceSpans(piece, first)) {
      Lost();
      return;
    }
    cursor = at + source.size();
    for (auto [b, e] : word_spans_) {
      if (byte_level) {
        // Piece bytes to the bytes they stand for, widened to whole code points of the text: a
        // token holding part of a character covers all of it, as in Hugging Face.
        b = char_at_[b];
        e = e == piece.size() ? static_cast<uint32_t>(source.size()) : char_at_[e];
        while (b > 0 && (static_cast<uint8_t>(part[at + b]) & 0xC0) == 0x80) --b;
        while (at + e < part.size() && (static_cast<uint8_t>(part[at + e]) & 0xC0) == 0x80) ++e;
      }
      Push(part_begin + at + b, part_begin + at + e, original);
    }
  }

  const PreTokenizer& pre_;
  const Model& model_;
  const PreTokenizer::PieceForm form_;
  bool traced_;
  std::vector<uint32_t> ids_;
  std::vector<Span> spans_;  // per id, in the text
  Pieces pieces_;
  std::vector<uint32_t> piece_begin_, piece_end_;  // a rewritten part's piece bytes, in the part
  std::vector<Span> word_spans_;
  std::string unmapped_;
  std::vector<uint32_t> char_at_;
};

}  // namespace

absl::Status Tokenizer::EncodeWithOffsets(std::string_view text, const EncodeOptions& options,
                                          Encoding* out, std::vector<Offset>* offsets) const {
  if (options.truncation) {
    return absl::InvalidArgumentError("EncodeWithOffsets does not truncate");
  }
  QUIVER_RETURN_IF_ERROR(ValidateUtf8(text));
  text = CutChars(text, options.max_input_chars);
  OffsetTrace trace(*pre_tokenizer_, *model_,
                    pre_tokenizer_->piece_form() != PreTokenizer::PieceForm::kUntraced &&
                        !post_processor_->trims_offsets);
  std::vector<AddedVocabulary::Match> raw_sections, normalized_sections;
  std::string normalized;
  std::vector<uint32_t> align_begin, align_end;
  added_->Split(text, /*normalized=*/false, raw_sections);
  for (const AddedVocabulary::Match& raw : raw_sections) {
    if (raw.id >= 0) {
      trace.AddToken(static_cast<uint32_t>(raw.id), {raw.begin, raw.end});
      continue;
    }
    const std::string_view section = text.substr(raw.begin, raw.end - raw.begin);
    if (normalizer_ == nullptr) {
      normalized.assign(section);
      IdentityAlignment(section, align_begin, align_end);
    } else if (!normalizer_->ApplyAligned(section, normalized, align_begin, align_end)) {
      trace.Untrace();
      normalizer_->Apply(section, normalized);
    }
    const SectionAlignment original{static_cast<uint32_t>(raw.begin), align_begin, align_end};
    added_->Split(normalized, /*normalized=*/true, normalized_sections);
    for (const AddedVocabulary::Match& sub : normalized_sections) {
      if (sub.id >= 0) {
        // (The alignment is read only while traced: an untraced normalizer leaves it unset.)
        trace.AddToken(static_cast<uint32_t>(sub.id), trace.traced() && sub.end > sub.begin
                                                          ? original(sub.begin, sub.end)
                                                          : Span(0, 0));
        continue;
      }
      trace.Part(std::string_view(normalized).substr(sub.begin, sub.end - sub.begin), sub.begin,
                 raw.begin == 0 && sub.begin == 0, original);
    }
  }
  const std::vector<uint32_t>& ids = trace.ids();
  post_processor_->Process(ids, nullptr, options.add_special_tokens, out->ids, out->type_ids);
  offsets->assign(out->ids.size(), std::nullopt);
  if (!trace.traced()) return absl::OkStatus();
  // Where the text's ids sit among the post-processor's: find them after its prefix.
  Encoding probe;
  post_processor_->Process({UINT32_MAX}, nullptr, options.add_special_tokens, probe.ids,
                           probe.type_ids);
  const size_t prefix = static_cast<size_t>(
      std::find(probe.ids.begin(), probe.ids.end(), UINT32_MAX) - probe.ids.begin());
  if (prefix + ids.size() > out->ids.size() ||
      !std::equal(ids.begin(), ids.end(), out->ids.begin() + static_cast<std::ptrdiff_t>(prefix))) {
    return absl::OkStatus();
  }
  for (size_t i = 0; i < ids.size(); ++i) (*offsets)[prefix + i] = trace.spans()[i];
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodePairIds(const std::vector<uint32_t>& a,
                                      const std::vector<uint32_t>& b, const EncodeOptions& options,
                                      Encoding* out) const {
  Scratch& scratch = GetScratch();
  scratch.a.assign(a.begin(), a.end());
  scratch.b.assign(b.begin(), b.end());
  return Finish(scratch.a, &scratch.b, options, out);
}

void Tokenizer::AddSpecialTokens(const std::vector<uint32_t>& ids, Encoding* out) const {
  post_processor_->Process(ids, nullptr, /*add_special_tokens=*/true, out->ids, out->type_ids);
}

std::string Tokenizer::Decode(const std::vector<uint32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (uint32_t id : ids) {
    if (const AddedToken* added = added_->FindById(id)) {
      if (skip_special_tokens && added->special) continue;
      tokens.push_back(added->content);
      continue;
    }
    if (std::optional<std::string> token = model_->IdToToken(id)) tokens.push_back(*token);
  }
  if (decoder_ != nullptr) decoder_->DecodeChain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::optional<uint32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (std::optional<uint32_t> id = added_->TokenToId(token)) return id;
  return model_->TokenToId(token);
}

std::optional<std::string> Tokenizer::IdToToken(uint32_t id) const {
  if (const AddedToken* added = added_->FindById(id)) return added->content;
  return model_->IdToToken(id);
}

bool Tokenizer::IsSpecial(uint32_t id) const {
  const AddedToken* added = added_->FindById(id);
  return added != nullptr && added->special;
}

size_t Tokenizer::vocab_size() const { return model_->vocab_size(); }

size_t Tokenizer::NumAddedTokens(bool pair) const { return post_processor_->NumAddedTokens(pair); }

}  // namespace quiver::tokenizer
