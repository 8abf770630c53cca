#include <algorithm>

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace quiver::tokenizer {
namespace {

bool IsWordChar(char32_t c) { return c == '_' || IsAlphanumeric(c) || IsCombiningMark(c); }

char32_t LastCodePoint(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  return NextCodePoint(s, i);
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  Build(raw_, false, normalizer);
  Build(normalized_, true, normalizer);
}

void AddedVocabulary::Build(PatternSet& set, bool normalized, const Normalizer* normalizer) {
  set.by_first_byte.assign(256, {});
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& token = tokens_[i];
    if (token.normalized != normalized || token.content.empty()) continue;
    std::string pattern = token.content;
    if (normalized && normalizer != nullptr) normalizer->Apply(token.content, pattern);
    if (pattern.empty()) continue;
    set.patterns.emplace_back(std::move(pattern), i);
  }
  for (uint32_t p = 0; p < set.patterns.size(); ++p) {
    set.by_first_byte[static_cast<uint8_t>(set.patterns[p].first[0])].push_back(p);
  }
  // Longest first, so the first hit at a position is the leftmost-longest match; among equal
  // lengths the token listed first wins.
  for (auto& bucket : set.by_first_byte) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](uint32_t a, uint32_t b) {
      return set.patterns[a].first.size() > set.patterns[b].first.size();
    });
  }
}

void AddedVocabulary::Split(std::string_view text, bool normalized, std::vector<Match>& out) const {
  out.clear();
  const PatternSet& set = normalized ? normalized_ : raw_;
  size_t section_start = 0;  // end of the previous accepted match
  if (!set.patterns.empty()) {
    size_t pos = 0;
    while (pos < text.size()) {
      const auto& bucket = set.by_first_byte[static_cast<uint8_t>(text[pos])];
      const std::pair<std::string, size_t>* hit = nullptr;
      for (uint32_t p : bucket) {
        const std::string& pattern = set.patterns[p].first;
        if (text.compare(pos, pattern.size(), pattern) == 0) {
          hit = &set.patterns[p];
          break;
        }
      }
      if (hit == nullptr) {
        ++pos;
        continue;
      }
      size_t begin = pos;
      size_t end = pos + hit->first.size();
      pos = end;
      const AddedToken& token = tokens_[hit->second];
      if (token.single_word) {
        const bool space_before = begin == 0 || !IsWordChar(LastCodePoint(text.substr(0, begin)));
        size_t probe = end;
        const bool space_after = end == text.size() || !IsWordChar(NextCodePoint(text, probe));
        if (!space_before || !space_after) continue;
      }
      if (token.lstrip) {
        size_t b = begin;
        while (b > section_start) {
          size_t prev = b - 1;
          while (prev > 0 && (static_cast<uint8_t>(text[prev]) & 0xC0) == 0x80) --prev;
          size_t probe = prev;
          if (!IsWhitespace(NextCodePoint(text, probe))) break;
          b = prev;
        }
        begin = b;
      }
      if (token.rstrip) {
        while (end < text.size()) {
          size_t probe = end;
          if (!IsWhitespace(NextCodePoint(text, probe))) break;
          end = probe;
        }
        pos = end;
      }
      if (section_start < begin) {
        out.push_back({static_cast<uint32_t>(section_start), static_cast<uint32_t>(begin), -1});
      }
      out.push_back({static_cast<uint32_t>(begin), static_cast<uint32_t>(end),
                     static_cast<int64_t>(token.id)});
      section_start = end;
    }
  }
  if (section_start < text.size() || out.empty()) {
    out.push_back({static_cast<uint32_t>(section_start), static_cast<uint32_t>(text.size()), -1});
  }
}

std::optional<uint32_t> AddedVocabulary::TokenToId(std::string_view token) const {
  for (const AddedToken& t : tokens_) {
    if (t.content == token) return t.id;
  }
  return std::nullopt;
}

const AddedToken* AddedVocabulary::FindById(uint32_t id) const {
  for (const AddedToken& t : tokens_) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

}  // namespace quiver::tokenizer
