// Pre-tokenizers: BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, Digits, Metaspace,
// ByteLevel, Split (every behavior, invert), Sequence; as Hugging Face splits, on ids.
#include <array>
#include <memory>

#include "common/status.h"
#include "common/strings.h"
#include "tokenizer/components.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace quiver::tokenizer {

absl::StatusOr<std::shared_ptr<const Regex>> MakeSplitPattern(const JsonValue& json);

namespace {

using Spans = std::vector<std::pair<size_t, size_t>>;

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

absl::StatusOr<Behavior> ParseBehavior(const JsonValue& json, Behavior fallback) {
  const JsonValue* value = json.Find("behavior");
  if (value == nullptr) return fallback;
  if (!value->is_string()) return absl::InvalidArgumentError("'behavior' must be a string");
  const std::string& name = value->as_string();
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  return absl::InvalidArgumentError(StrCat("unknown split behavior '", name, "'"));
}

// Splits `text` at the matched spans (sorted, non-overlapping) as Hugging Face's
// NormalizedString::split does for `behavior`, appending the non-empty pieces to `out`.
void SplitBySpans(std::string_view text, const Spans& matches, Behavior behavior, bool invert,
                  Pieces& out) {
  // (begin, end, is_match) covering the text.
  thread_local std::vector<std::tuple<size_t, size_t, bool>> parts;
  parts.clear();
  size_t last = 0;
  for (const auto& [b, e] : matches) {
    if (last < b) parts.emplace_back(last, b, invert);
    parts.emplace_back(b, e, !invert);
    last = e;
  }
  if (last < text.size()) parts.emplace_back(last, text.size(), invert);

  auto slice = [&](size_t b, size_t e) { return text.substr(b, e - b); };
  switch (behavior) {
    case Behavior::kRemoved:
      for (const auto& [b, e, m] : parts) {
        if (!m) out.Add(slice(b, e));
      }
      break;
    case Behavior::kIsolated:
      for (const auto& [b, e, m] : parts) out.Add(slice(b, e));
      break;
    case Behavior::kContiguous: {
      size_t i = 0;
      while (i < parts.size()) {
        auto [b, e, m] = parts[i];
        size_t j = i + 1;
        while (j < parts.size() && std::get<2>(parts[j]) == m) e = std::get<1>(parts[j++]);
        out.Add(slice(b, e));
        i = j;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      // A match joins the piece before it.
      size_t begin = 0;
      bool open = false;
      for (const auto& [b, e, m] : parts) {
        if (m) {
          out.Add(slice(open ? begin : b, e));
          open = false;
        } else {
          if (open) out.Add(slice(begin, b));
          begin = b;
          open = true;
        }
      }
      if (open) out.Add(slice(begin, text.size()));
      break;
    }
    case Behavior::kMergedWithNext: {
      // A match starts a new piece that takes what follows it.
      size_t begin = 0;
      bool open = false;
      for (const auto& [b, e, m] : parts) {
        if (m) {
          if (open) out.Add(slice(begin, b));
          begin = b;
          open = true;
        } else if (!open) {
          begin = b;
          open = true;
        }
      }
      if (open) out.Add(slice(begin, text.size()));
      break;
    }
  }
}

// Spans of single code points for which `pred` holds.
template <typename Pred>
void CharSpans(std::string_view text, Pred pred, Spans& spans) {
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    if (pred(NextCodePoint(text, i))) spans.emplace_back(start, i);
  }
}

class WhitespaceSplit final : public PreTokenizer {
 public:
  void Split(std::string_view text, bool, Pieces& out) const override {
    size_t begin = 0;
    bool in_word = false;
    for (size_t i = 0; i < text.size();) {
      size_t start = i;
      char32_t c = NextCodePoint(text, i);
      if (IsWhitespace(c)) {
        if (in_word) out.Add(text.substr(begin, start - begin));
        in_word = false;
      } else if (!in_word) {
        begin = start;
        in_word = true;
      }
    }
    if (in_word) out.Add(text.substr(begin));
  }
};

class BertPreTokenizer final : public PreTokenizer {
 public:
  void Split(std::string_view text, bool, Pieces& out) const override {
    // Whitespace removed, each punctuation character its own piece.
    size_t begin = 0;
    bool in_word = false;
    for (size_t i = 0; i < text.size();) {
      size_t start = i;
      char32_t c = NextCodePoint(text, i);
      const bool space = IsWhitespace(c);
      const bool punct = !space && IsPunctuation(c);
      if (space || punct) {
        if (in_word) out.Add(text.substr(begin, start - begin));
        in_word = false;
        if (punct) out.Add(text.substr(start, i - start));
      } else if (!in_word) {
        begin = start;
        in_word = true;
      }
    }
    if (in_word) out.Add(text.substr(begin));
  }
};

class RegexSplit final : public PreTokenizer {
 public:
  RegexSplit(std::shared_ptr<const Regex> regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void Split(std::string_view text, bool, Pieces& out) const override {
    thread_local Spans spans;
    spans.clear();
    regex_->FindAll(text, spans);
    SplitBySpans(text, spans, behavior_, invert_, out);
  }

 private:
  std::shared_ptr<const Regex> regex_;
  Behavior behavior_;
  bool invert_;
};

class Punctuation final : public PreTokenizer {
 public:
  explicit Punctuation(Behavior behavior) : behavior_(behavior) {}
  void Split(std::string_view text, bool, Pieces& out) const override {
    thread_local Spans spans;
    spans.clear();
    CharSpans(text, IsPunctuation, spans);
    SplitBySpans(text, spans, behavior_, false, out);
  }

 private:
  Behavior behavior_;
};

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void Split(std::string_view text, bool, Pieces& out) const override {
    thread_local Spans spans;
    spans.clear();
    CharSpans(text, IsDigit, spans);
    SplitBySpans(text, spans, individual_ ? Behavior::kIsolated : Behavior::kContiguous, false,
                 out);
  }

 private:
  bool individual_;
};

class Metaspace final : public PreTokenizer {
 public:
  PieceForm piece_form() const override { return PieceForm::kRewritten; }
  enum class Prepend { kAlways, kFirst, kNever };
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}

  void Split(std::string_view text, bool at_start, Pieces& out) const override {
    thread_local std::string replaced;
    replaced.clear();
    if (text.empty()) return;
    if (Prefixed(text, at_start)) replaced.append(replacement_);
    for (char ch : text) {
      if (ch == ' ') {
        replaced.append(replacement_);
      } else {
        replaced.push_back(ch);
      }
    }
    if (!split_) {
      out.Add(replaced);
      return;
    }
    // MergedWithNext on the replacement character.
    std::string_view r(replaced);
    size_t begin = 0;
    for (size_t pos = r.find(replacement_, 1); pos != std::string_view::npos;
         pos = r.find(replacement_, pos + replacement_.size())) {
      out.Add(r.substr(begin, pos - begin));
      begin = pos;
    }
    out.Add(r.substr(begin));
  }

  // Hugging Face's alignment: a replacement that stands for a space covers that space (its
  // NormalizedString::replace inserts it after removing the space: the removed character's
  // range); the prefix covers the first character (prepend replaces that character by the
  // prefix and inserts it again); every other byte covers its own character.
  void AlignPieces(std::string_view text, bool at_start, std::vector<uint32_t>& begin,
                   std::vector<uint32_t>& end) const override {
    begin.clear();
    end.clear();
    if (text.empty()) return;
    const auto add = [&](size_t bytes, size_t b, size_t e) {
      begin.insert(begin.end(), bytes, static_cast<uint32_t>(b));
      end.insert(end.end(), bytes, static_cast<uint32_t>(e));
    };
    if (Prefixed(text, at_start)) {
      add(replacement_.size(), 0, Utf8Length(static_cast<uint8_t>(text[0])));
    }
    for (size_t i = 0; i < text.size();) {
      const size_t length = Utf8Length(static_cast<uint8_t>(text[i]));
      add(text[i] == ' ' ? replacement_.size() : length, i, i + length);
      i += length;
    }
  }

 private:
  // Whether the replacement goes in front. Spaces become the replacement first, so a leading
  // space counts as already prefixed.
  bool Prefixed(std::string_view text, bool at_start) const {
    const bool prepend = prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && at_start);
    return prepend && text[0] != ' ' && !text.starts_with(replacement_);
  }

  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, std::shared_ptr<const Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  PieceForm piece_form() const override {
    return add_prefix_space_ ? PieceForm::kUntraced : PieceForm::kByteLevel;
  }

  void Split(std::string_view text, bool, Pieces& out) const override {
    thread_local std::string prefixed;
    thread_local Spans spans;
    if (add_prefix_space_ && !text.empty() && text[0] != ' ') {
      prefixed.assign(" ");
      prefixed.append(text);
      text = prefixed;
    }
    if (regex_ == nullptr) {
      Map(text, out);
      return;
    }
    spans.clear();
    regex_->FindAll(text, spans);
    thread_local Pieces split;
    split.clear();
    SplitBySpans(text, spans, Behavior::kIsolated, false, split);
    for (size_t i = 0; i < split.size(); ++i) Map(split[i], out);
  }

 private:
  static void Map(std::string_view piece, Pieces& out) {
    if (piece.empty()) return;
    thread_local std::string mapped;
    mapped.clear();
    for (char ch : piece) mapped.append(ByteToUnicode(static_cast<uint8_t>(ch)));
    out.Add(mapped);
  }

  bool add_prefix_space_;
  std::shared_ptr<const Regex> regex_;  // null: use_regex false
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  std::vector<std::unique_ptr<PreTokenizer>> TakeSteps() { return std::move(steps_); }
  PieceForm piece_form() const override {
    PieceForm form = PieceForm::kSubstring;
    for (const auto& step : steps_) {
      const PieceForm f = step->piece_form();
      if (f == PieceForm::kUntraced) return f;
      if (f == PieceForm::kByteLevel) {
        if (form == PieceForm::kByteLevel) return PieceForm::kUntraced;  // mapped twice
        form = f;
      }
    }
    return form;
  }
  void Split(std::string_view text, bool at_start, Pieces& out) const override {
    if (steps_.empty()) {
      out.Add(text);
      return;
    }
    if (steps_.size() == 1) {
      steps_[0]->Split(text, at_start, out);
      return;
    }
    thread_local Pieces a, b;
    a.clear();
    steps_[0]->Split(text, at_start, a);
    Pieces* src = &a;
    Pieces* dst = &b;
    for (size_t s = 1; s < steps_.size(); ++s) {
      const bool last = s + 1 == steps_.size();
      Pieces& target = last ? out : *dst;
      if (!last) target.clear();
      for (size_t i = 0; i < src->size(); ++i) {
        steps_[s]->Split((*src)[i], at_start && i == 0, target);
      }
      std::swap(src, dst);
    }
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// A Sequence inside a Sequence is the same as its steps inline; flattening keeps the per-thread
// ping-pong buffers of SequencePreTokenizer from being used at two depths at once.
void Flatten(std::unique_ptr<PreTokenizer> step, std::vector<std::unique_ptr<PreTokenizer>>& out) {
  if (auto* seq = dynamic_cast<SequencePreTokenizer*>(step.get())) {
    for (std::unique_ptr<PreTokenizer>& inner : seq->TakeSteps()) out.push_back(std::move(inner));
    return;
  }
  out.push_back(std::move(step));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const JsonValue& json) {
  QUIVER_ASSIGN_OR_RETURN(std::string type, JsonString(json, "type"));
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
  if (type == "Whitespace") {
    QUIVER_ASSIGN_OR_RETURN(std::shared_ptr<const Regex> regex, Regex::Compile(R"(\w+|[^\w\s]+)"));
    return std::make_unique<RegexSplit>(std::move(regex), Behavior::kRemoved, true);
  }
  if (type == "Punctuation") {
    QUIVER_ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(json, Behavior::kIsolated));
    return std::make_unique<Punctuation>(behavior);
  }
  if (type == "Digits") {
    QUIVER_ASSIGN_OR_RETURN(bool individual, JsonBool(json, "individual_digits", false));
    return std::make_unique<Digits>(individual);
  }
  if (type == "Metaspace") {
    QUIVER_ASSIGN_OR_RETURN(std::string replacement, JsonString(json, "replacement", "\u2581"));
    QUIVER_ASSIGN_OR_RETURN(bool split, JsonBool(json, "split", true));
    Metaspace::Prepend prepend = Metaspace::Prepend::kAlways;
    QUIVER_ASSIGN_OR_RETURN(std::string scheme, JsonString(json, "prepend_scheme", ""));
    if (scheme.empty()) {
      // Files written before prepend_scheme existed say add_prefix_space.
      QUIVER_ASSIGN_OR_RETURN(bool add_prefix, JsonBool(json, "add_prefix_space", true));
      prepend = add_prefix ? Metaspace::Prepend::kAlways : Metaspace::Prepend::kNever;
    } else if (scheme == "always") {
      prepend = Metaspace::Prepend::kAlways;
    } else if (scheme == "first") {
      prepend = Metaspace::Prepend::kFirst;
    } else if (scheme == "never") {
      prepend = Metaspace::Prepend::kNever;
    } else {
      return absl::InvalidArgumentError(StrCat("Metaspace: unknown prepend_scheme '", scheme, "'"));
    }
    return std::make_unique<Metaspace>(std::move(replacement), prepend, split);
  }
  if (type == "ByteLevel") {
    QUIVER_ASSIGN_OR_RETURN(bool add_prefix_space, JsonBool(json, "add_prefix_space", true));
    QUIVER_ASSIGN_OR_RETURN(bool use_regex, JsonBool(json, "use_regex", true));
    std::shared_ptr<const Regex> regex;
    if (use_regex) {
      QUIVER_ASSIGN_OR_RETURN(regex, Regex::Compile(kGpt2Pattern));
    }
    return std::make_unique<ByteLevel>(add_prefix_space, std::move(regex));
  }
  if (type == "Split") {
    QUIVER_ASSIGN_OR_RETURN(std::shared_ptr<const Regex> regex, MakeSplitPattern(json));
    QUIVER_ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(json, Behavior::kIsolated));
    QUIVER_ASSIGN_OR_RETURN(bool invert, JsonBool(json, "invert", false));
    return std::make_unique<RegexSplit>(std::move(regex), behavior, invert);
  }
  if (type == "Sequence") {
    const JsonValue* list = json.Find("pretokenizers");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("Sequence: missing list 'pretokenizers'");
    }
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list->items().size(); ++i) {
      const JsonValue& item = list->items()[i];
      absl::StatusOr<std::unique_ptr<PreTokenizer>> step = MakePreTokenizer(item);
      if (!step.ok()) return WithContext(step.status(), StrCat("pretokenizers[", i, "]"));
      Flatten(*std::move(step), steps);
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  return absl::InvalidArgumentError(StrCat("unsupported pre_tokenizer '", type, "'"));
}

const std::string& ByteToUnicode(uint8_t byte) {
  static const std::array<std::string, 256> kTable = [] {
    std::array<std::string, 256> t;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      char32_t c = printable ? static_cast<char32_t>(b) : next++;
      AppendUtf8(c, t[b]);
    }
    return t;
  }();
  return kTable[byte];
}

std::optional<uint8_t> UnicodeToByte(char32_t c) {
  static const std::array<int, 512> kInverse = [] {
    std::array<int, 512> inv;
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) {
      const std::string& s = ByteToUnicode(static_cast<uint8_t>(b));
      size_t i = 0;
      inv[NextCodePoint(s, i)] = b;
    }
    return inv;
  }();
  if (c >= kInverse.size() || kInverse[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(kInverse[c]);
}

}  // namespace quiver::tokenizer
