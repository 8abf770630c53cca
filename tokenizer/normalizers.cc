// Normalizers: BertNormalizer, NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Replace, Prepend,
// Strip, Precompiled, Sequence. Each matches the Hugging Face normalizer of the same name on ids;
// the BERT normalizer, Replace, Precompiled and Sequence (and the Unicode forms where they leave
// a text as it is) also trace each output byte back to the input as Hugging Face aligns it
// (ApplyAligned, for /tokenize offsets).
#include <cstring>
#include <memory>
#include <optional>

#include "common/status.h"
#include "common/strings.h"
#include "tokenizer/components.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace quiver::tokenizer {

void IdentityAlignment(std::string_view text, std::vector<uint32_t>& begin,
                       std::vector<uint32_t>& end) {
  begin.resize(text.size());
  end.resize(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    NextCodePoint(text, i);
    for (size_t k = start; k < i; ++k) {
      begin[k] = static_cast<uint32_t>(start);
      end[k] = static_cast<uint32_t>(i);
    }
  }
}

namespace {

// Hugging Face's NormalizedString::transform over a whole text: each output code point with its
// change (0: it takes the place of the next input code point; 1: it is inserted; -n: it takes
// the place of the next one and n more are removed after it). A replacing code point covers the
// input code point it consumes, an inserted one the code point before it ([0, 0) at the start).
// Appends to out, begin and end (per output byte, a byte range of `in`); `at` is the input
// position, advanced past what is consumed.
struct AlignedOutput {
  std::string_view in;
  std::string& out;
  std::vector<uint32_t>& begin;
  std::vector<uint32_t>& end;
  size_t at = 0;

  void Add(std::string_view code_point, int64_t change) {
    uint32_t b = 0, e = 0;
    if (change > 0) {
      if (at > 0) {
        size_t start = at - 1;
        while (start > 0 && (static_cast<uint8_t>(in[start]) & 0xC0) == 0x80) --start;
        b = static_cast<uint32_t>(start);
        e = static_cast<uint32_t>(at);
      }
    } else if (at < in.size()) {
      b = static_cast<uint32_t>(at);
      NextCodePoint(in, at);
      e = static_cast<uint32_t>(at);
      for (int64_t k = 0; k < -change && at < in.size(); ++k) NextCodePoint(in, at);
    } else {
      b = e = static_cast<uint32_t>(in.size());
    }
    out.append(code_point);
    begin.insert(begin.end(), code_point.size(), b);
    end.insert(end.end(), code_point.size(), e);
  }
};

// The Precompiled normalizer's replace (Hugging Face's) of `old_count` input code points by
// `replacement`, appended to `pending` as AlignedOutput::Add's (code point, change) pairs: each
// replacing code point change 0, the last ones inserted (1) when there are more, the last one
// removing the rest (the one before it, when nothing replaces them).
void PendingReplace(std::string_view replacement, int64_t old_count,
                    std::vector<std::pair<std::string_view, int64_t>>& pending) {
  const size_t first = pending.size();
  for (size_t i = 0; i < replacement.size();) {
    const size_t start = i;
    NextCodePoint(replacement, i);
    pending.emplace_back(replacement.substr(start, i - start), 0);
  }
  const int64_t diff = static_cast<int64_t>(pending.size() - first) - old_count;
  if (diff > 0) {
    for (size_t k = pending.size() - static_cast<size_t>(diff); k < pending.size(); ++k) {
      pending[k].second = 1;
    }
  } else if (diff < 0 && !pending.empty()) {
    pending.back().second += diff;
  }
}

class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        chinese_(chinese),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}

  void Apply(std::string_view in, std::string& out) const override {
    thread_local std::string decomposed;
    out.clear();
    std::string_view text = in;
    if (strip_accents_) {
      // Hugging Face decomposes (NFD) and drops combining marks, before lowercasing.
      Normalize(in, NormalizationForm::kNFD, decomposed);
      text = decomposed;
    }
    out.reserve(text.size() + 8);
    for (size_t i = 0; i < text.size();) {
      const uint8_t b = static_cast<uint8_t>(text[i]);
      Step(b < 0x80 ? (++i, char32_t{b}) : NextCodePoint(text, i), out);  // ASCII without a call
    }
  }

  // The same steps one input code point at a time (its decomposition, when accents are
  // stripped, taken alone), each output byte tagged with the code point it came from. Whole-text
  // NFD also reorders combining marks; the result is checked against Apply and refused (false)
  // where the two differ, so offsets are exact or absent.
  bool ApplyAligned(std::string_view in, std::string& out, std::vector<uint32_t>& begin,
                    std::vector<uint32_t>& end) const override {
    thread_local std::string decomposed, exact;
    out.clear();
    begin.clear();
    end.clear();
    for (size_t i = 0; i < in.size();) {
      const size_t start = i;
      NextCodePoint(in, i);
      std::string_view cps = in.substr(start, i - start);
      if (strip_accents_) {
        Normalize(cps, NormalizationForm::kNFD, decomposed);
        cps = decomposed;
      }
      const size_t before = out.size();
      for (size_t j = 0; j < cps.size();) Step(NextCodePoint(cps, j), out);
      begin.insert(begin.end(), out.size() - before, static_cast<uint32_t>(start));
      end.insert(end.end(), out.size() - before, static_cast<uint32_t>(i));
    }
    Apply(in, exact);
    return exact == out;
  }

 private:
  // One (already decomposed) code point: cleaned, accents dropped, CJK spaced, lowercased.
  void Step(char32_t c, std::string& out) const {
    if (c < 0x80) {  // ASCII fast path
      if (clean_text_) {
        if (c == 0 || IsBertControl(c)) return;
        if (IsBertWhitespace(c)) c = ' ';
      }
      if (lowercase_ && c >= 'A' && c <= 'Z') c += 32;
      out.push_back(static_cast<char>(c));
      return;
    }
    if (clean_text_) {
      if (c == 0xFFFD || IsBertControl(c)) return;
      if (IsBertWhitespace(c)) {
        out.push_back(' ');
        return;
      }
    }
    // Bert drops non-spacing marks only (Mn); StripAccents drops every mark.
    if (strip_accents_ && IsNonspacingMark(c)) return;
    if (chinese_ && IsChineseChar(c)) {
      out.push_back(' ');
      AppendUtf8(c, out);
      out.push_back(' ');
      return;
    }
    if (lowercase_) {
      AppendLowercase(c, out);
    } else {
      AppendUtf8(c, out);
    }
  }

  bool clean_text_, chinese_, strip_accents_, lowercase_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalizationForm form) : form_(form) {}
  void Apply(std::string_view in, std::string& out) const override { Normalize(in, form_, out); }
  // Traced where the text is already in the form (the usual case for NFC): nothing moves.
  bool ApplyAligned(std::string_view in, std::string& out, std::vector<uint32_t>& begin,
                    std::vector<uint32_t>& end) const override {
    Normalize(in, form_, out);
    if (out != in) return false;
    IdentityAlignment(in, begin, end);
    return true;
  }

 private:
  NormalizationForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void Apply(std::string_view in, std::string& out) const override {
    out.clear();
    out.reserve(in.size());
    for (size_t i = 0; i < in.size();) AppendLowercase(NextCodePoint(in, i), out);
  }
};

class StripAccents final : public Normalizer {
 public:
  void Apply(std::string_view in, std::string& out) const override {
    out.clear();
    for (size_t i = 0; i < in.size();) {
      size_t start = i;
      char32_t c = NextCodePoint(in, i);
      if (!IsCombiningMark(c)) out.append(in.substr(start, i - start));
    }
  }
};

class Replace final : public Normalizer {
 public:
  Replace(std::shared_ptr<const Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void Apply(std::string_view in, std::string& out) const override {
    thread_local std::vector<std::pair<size_t, size_t>> spans;
    spans.clear();
    pattern_->FindAll(in, spans);
    out.clear();
    size_t last = 0;
    for (const auto& [b, e] : spans) {
      out.append(in.substr(last, b - last));
      out.append(content_);
      last = e;
    }
    out.append(in.substr(last));
  }

  // As Hugging Face's NormalizedString::replace: the matched code points removed, then the
  // content inserted, so every byte of it covers the match's last code point.
  bool ApplyAligned(std::string_view in, std::string& out, std::vector<uint32_t>& begin,
                    std::vector<uint32_t>& end) const override {
    thread_local std::vector<std::pair<size_t, size_t>> spans;
    spans.clear();
    pattern_->FindAll(in, spans);
    out.clear();
    begin.clear();
    end.clear();
    AlignedOutput t{in, out, begin, end};
    const auto keep = [&](size_t until) {
      while (t.at < until) {
        const size_t start = t.at;
        size_t next = start;
        NextCodePoint(in, next);
        t.Add(in.substr(start, next - start), 0);
      }
    };
    for (const auto& [b, e] : spans) {
      keep(b);
      t.at = e;  // removed
      for (size_t i = 0; i < content_.size();) {
        const size_t start = i;
        NextCodePoint(content_, i);
        t.Add(std::string_view(content_).substr(start, i - start), 1);
      }
    }
    keep(in.size());
    return true;
  }

 private:
  std::shared_ptr<const Regex> pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void Apply(std::string_view in, std::string& out) const override {
    out.clear();
    if (in.empty()) return;  // Hugging Face prepends nothing to an empty string
    out.append(prefix_);
    out.append(in);
  }

 private:
  std::string prefix_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void Apply(std::string_view in, std::string& out) const override {
    size_t begin = 0, end = in.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!IsWhitespace(NextCodePoint(in, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<uint8_t>(in[start]) & 0xC0) == 0x80) --start;
        size_t probe = start;
        if (!IsWhitespace(NextCodePoint(in, probe))) break;
        end = start;
      }
    }
    out.assign(in.substr(begin, end - begin));
  }

 private:
  bool left_, right_;
};

// sentencepiece's compiled normalization rules, which every tokenizer converted from a
// sentencepiece model carries as {"type": "Precompiled", "precompiled_charsmap": base64} (XLM-R
// and so multilingual-e5, bge-m3 and their rerankers; mBART, T5, ALBERT, CamemBERT: their
// nmt_nfkc rules, NFKC plus whitespace and control-character clean-up). The blob: a
// little-endian uint32 byte size of a darts-clone double-array trie over UTF-8 keys, the trie's
// 32-bit units, then the replacements, NUL-terminated, each leaf's value the offset of its own.
// Applied as Hugging Face applies it (the spm_precompiled crate), which is not quite
// sentencepiece's longest match: per extended grapheme cluster (UAX #29, here utf8proc's), a
// cluster under 6 bytes is replaced whole by the replacement of the first (shortest) key that
// begins it, if any; otherwise each of its code points by its own key's replacement, or kept.
class Precompiled final : public Normalizer {
 public:
  static absl::StatusOr<std::unique_ptr<Precompiled>> FromCharsmap(std::string_view blob) {
    if (blob.size() < 4) return absl::InvalidArgumentError("precompiled_charsmap: too short");
    uint32_t trie_bytes = 0;
    for (int i = 3; i >= 0; --i) trie_bytes = trie_bytes << 8 | static_cast<uint8_t>(blob[i]);
    if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob.size() - 4) {
      return absl::InvalidArgumentError(
          StrCat("precompiled_charsmap: a trie of ", trie_bytes, " bytes in ", blob.size()));
    }
    auto p = std::unique_ptr<Precompiled>(new Precompiled());
    p->trie_.resize(trie_bytes / 4);
    for (size_t u = 0; u < p->trie_.size(); ++u) {
      uint32_t unit = 0;
      for (int i = 3; i >= 0; --i) {
        unit = unit << 8 | static_cast<uint8_t>(blob[4 + u * 4 + static_cast<size_t>(i)]);
      }
      p->trie_[u] = unit;
    }
    p->replacements_.assign(blob.substr(4 + trie_bytes));
    if (!ValidateUtf8(p->replacements_).ok()) {
      return absl::InvalidArgumentError("precompiled_charsmap: replacements are not UTF-8");
    }
    return p;
  }

  // Hugging Face's transformations for the same replacements (PendingReplace), applied in one
  // pass.
  bool ApplyAligned(std::string_view in, std::string& out, std::vector<uint32_t>& begin,
                    std::vector<uint32_t>& end) const override {
    thread_local std::vector<std::pair<std::string_view, int64_t>> pending;
    pending.clear();
    out.clear();
    begin.clear();
    end.clear();
    AlignedOutput t{in, out, begin, end};
    ForEachCluster(in, [&](std::string_view cluster) {
      if (cluster.size() < 6) {
        if (const std::optional<std::string_view> r = Transform(cluster)) {
          PendingReplace(*r, static_cast<int64_t>(CountCodePoints(cluster)), pending);
          return;
        }
      }
      for (size_t i = 0; i < cluster.size();) {
        const size_t at = i;
        NextCodePoint(cluster, i);
        const std::string_view code_point = cluster.substr(at, i - at);
        if (const std::optional<std::string_view> r = Transform(code_point)) {
          PendingReplace(*r, 1, pending);
        } else {
          pending.emplace_back(code_point, 0);
        }
      }
    });
    for (const auto& [code_point, change] : pending) t.Add(code_point, change);
    return true;
  }

  void Apply(std::string_view in, std::string& out) const override {
    out.clear();
    out.reserve(in.size() + 8);
    ForEachCluster(in, [&](std::string_view cluster) { Cluster(cluster, out); });
  }

 private:
  Precompiled() = default;

  // fn(cluster) for each extended grapheme cluster of `in`, in order.
  template <typename Fn>
  static void ForEachCluster(std::string_view in, Fn fn) {
    int32_t state = 0;
    size_t begin = 0, i = 0;
    char32_t previous = 0;
    while (i < in.size()) {
      const size_t at = i;
      const char32_t c = NextCodePoint(in, i);
      if (at > begin && GraphemeBreak(previous, c, state)) {
        fn(in.substr(begin, at - begin));
        begin = at;
      }
      previous = c;
    }
    if (i > begin) fn(in.substr(begin, i - begin));
  }

  void Cluster(std::string_view cluster, std::string& out) const {
    if (cluster.size() < 6) {
      if (const std::optional<std::string_view> r = Transform(cluster)) {
        out.append(*r);
        return;
      }
    }
    for (size_t i = 0; i < cluster.size();) {
      const size_t at = i;
      NextCodePoint(cluster, i);
      const std::string_view code_point = cluster.substr(at, i - at);
      const std::optional<std::string_view> r = Transform(code_point);
      out.append(r ? *r : code_point);
    }
  }

  // The replacement of the first key of the trie that `chunk` begins with (darts-clone's common
  // prefix search, stopped at a NUL byte as Hugging Face's is), if any. A unit that points
  // outside the trie ends the search (a damaged blob: no replacement, never a read past it).
  std::optional<std::string_view> Transform(std::string_view chunk) const {
    const auto offset = [](uint32_t unit) -> size_t {
      const size_t base = unit >> 10;
      return base << ((unit & (1u << 9)) >> 6);
    };
    size_t node = offset(trie_[0]);
    for (const char ch : chunk) {
      const uint8_t c = static_cast<uint8_t>(ch);
      if (c == 0) break;
      node ^= c;
      if (node >= trie_.size()) return std::nullopt;
      const uint32_t unit = trie_[node];
      if ((unit & ((1u << 31) | 0xFFu)) != c) return std::nullopt;  // the unit's label
      node ^= offset(unit);
      if (node >= trie_.size()) return std::nullopt;
      if ((unit >> 8) & 1) {  // has a leaf: its value, the replacement's offset
        const size_t value = trie_[node] & ((1u << 31) - 1);
        if (value >= replacements_.size()) return std::nullopt;
        const size_t length = strnlen(replacements_.data() + value, replacements_.size() - value);
        return std::string_view(replacements_).substr(value, length);
      }
    }
    return std::nullopt;
  }

  std::vector<uint32_t> trie_;
  std::string replacements_;
};

// Standard base64 (RFC 4648, with padding, as serde writes Vec<u8> in tokenizer.json).
std::optional<std::string> DecodeBase64(std::string_view text) {
  const auto sextet = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    const int v = sextet(c);
    if (v < 0) return std::nullopt;
    bits = bits << 6 | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return out;
}

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void Apply(std::string_view in, std::string& out) const override {
    if (steps_.empty()) {
      out.assign(in);
      return;
    }
    // Ping-pong between `out` and a per-thread buffer; the last step writes into `out`.
    thread_local std::string buffer;
    std::string* dst = (steps_.size() % 2 == 1) ? &out : &buffer;
    std::string* other = (dst == &out) ? &buffer : &out;
    steps_[0]->Apply(in, *dst);
    for (size_t i = 1; i < steps_.size(); ++i) {
      std::swap(dst, other);
      steps_[i]->Apply(*other, *dst);
    }
  }

  // Each step's alignment composed onto the ones before it; untraced if any step is.
  bool ApplyAligned(std::string_view in, std::string& out, std::vector<uint32_t>& begin,
                    std::vector<uint32_t>& end) const override {
    thread_local std::string current;
    thread_local std::vector<uint32_t> step_begin, step_end;
    out.assign(in);
    IdentityAlignment(in, begin, end);
    for (const std::unique_ptr<Normalizer>& step : steps_) {
      current.swap(out);
      if (!step->ApplyAligned(current, out, step_begin, step_end)) return false;
      // Output byte k covers [step_begin[k], step_end[k]) of `current`, whose bytes cover
      // [begin[.], end[.]) of `in`.
      for (size_t k = 0; k < out.size(); ++k) {
        const uint32_t b = step_begin[k], e = step_end[k];
        if (e > b) {
          step_begin[k] = begin[b];
          step_end[k] = end[e - 1];
        } else {
          const uint32_t at = b < begin.size() ? begin[b] : static_cast<uint32_t>(in.size());
          step_begin[k] = step_end[k] = at;
        }
      }
      begin.assign(step_begin.begin(), step_begin.begin() + static_cast<ptrdiff_t>(out.size()));
      end.assign(step_end.begin(), step_end.begin() + static_cast<ptrdiff_t>(out.size()));
    }
    return true;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Replace's and Split's "pattern": {"String": "..."} or {"Regex": "..."}.
absl::StatusOr<std::shared_ptr<const Regex>> MakePattern(const JsonValue& json) {
  const JsonValue* pattern = json.Find("pattern");
  if (pattern == nullptr || !pattern->is_object()) {
    return absl::InvalidArgumentError("missing object field 'pattern'");
  }
  if (const JsonValue* s = pattern->Find("String"); s && s->is_string()) {
    return Regex::Literal(s->as_string());
  }
  if (const JsonValue* r = pattern->Find("Regex"); r && r->is_string()) {
    return Regex::Compile(r->as_string());
  }
  return absl::InvalidArgumentError("'pattern' must hold \"String\" or \"Regex\"");
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Regex>> MakeSplitPattern(const JsonValue& json) {
  return MakePattern(json);
}

absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const JsonValue& json) {
  QUIVER_ASSIGN_OR_RETURN(std::string type, JsonString(json, "type"));
  if (type == "BertNormalizer") {
    QUIVER_ASSIGN_OR_RETURN(bool clean_text, JsonBool(json, "clean_text", true));
    QUIVER_ASSIGN_OR_RETURN(bool chinese, JsonBool(json, "handle_chinese_chars", true));
    QUIVER_ASSIGN_OR_RETURN(bool lowercase, JsonBool(json, "lowercase", true));
    // strip_accents: null means "follow lowercase".
    QUIVER_ASSIGN_OR_RETURN(bool strip_accents, JsonBool(json, "strip_accents", lowercase));
    return std::make_unique<BertNormalizer>(clean_text, chinese, strip_accents, lowercase);
  }
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalizationForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalizationForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalizationForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalizationForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Replace") {
    QUIVER_ASSIGN_OR_RETURN(std::shared_ptr<const Regex> pattern, MakePattern(json));
    QUIVER_ASSIGN_OR_RETURN(std::string content, JsonString(json, "content"));
    return std::make_unique<Replace>(std::move(pattern), std::move(content));
  }
  if (type == "Prepend") {
    QUIVER_ASSIGN_OR_RETURN(std::string prefix, JsonString(json, "prepend"));
    return std::make_unique<Prepend>(std::move(prefix));
  }
  if (type == "Strip") {
    QUIVER_ASSIGN_OR_RETURN(bool left, JsonBool(json, "strip_left", true));
    QUIVER_ASSIGN_OR_RETURN(bool right, JsonBool(json, "strip_right", true));
    return std::make_unique<Strip>(left, right);
  }
  if (type == "Precompiled") {
    QUIVER_ASSIGN_OR_RETURN(std::string charsmap, JsonString(json, "precompiled_charsmap"));
    const std::optional<std::string> blob = DecodeBase64(charsmap);
    if (!blob) return absl::InvalidArgumentError("precompiled_charsmap: not base64");
    QUIVER_ASSIGN_OR_RETURN(std::unique_ptr<Precompiled> p, Precompiled::FromCharsmap(*blob));
    return p;
  }
  if (type == "Sequence") {
    const JsonValue* list = json.Find("normalizers");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("Sequence: missing list 'normalizers'");
    }
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list->items().size(); ++i) {
      absl::StatusOr<std::unique_ptr<Normalizer>> step = MakeNormalizer(list->items()[i]);
      if (!step.ok()) return WithContext(step.status(), StrCat("normalizers[", i, "]"));
      steps.push_back(*std::move(step));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  return absl::InvalidArgumentError(StrCat("unsupported normalizer '", type, "'"));
}

}  // namespace quiver::tokenizer
