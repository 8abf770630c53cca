#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <vector>

namespace quiver::tokenizer {

char32_t NextCodePoint(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
  const uint8_t b = p[0];
  if (b < 0x80) {
    i += 1;
    return b;
  }
  if (b < 0xE0) {
    i += 2;
    return (char32_t(b & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b < 0xF0) {
    i += 3;
    return (char32_t(b & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  i += 4;
  return (char32_t(b & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) |
         (p[3] & 0x3F);
}

void AppendUtf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (char ch : s) n += (static_cast<uint8_t>(ch) & 0xC0) != 0x80;
  return n;
}

namespace {

utf8proc_category_t Category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

}  // namespace

bool IsWhitespace(char32_t c) {
  if (c <= 0x7F) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsBertWhitespace(char32_t c) { return c == '\t' || c == '\n' || c == '\r' || IsWhitespace(c); }

bool IsBertControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
      return true;
    default:
      return false;
  }
}

bool IsPunctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  }
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool IsCombiningMark(char32_t c) {
  if (c < 0x300) return false;
  utf8proc_category_t cat = Category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

bool IsNonspacingMark(char32_t c) { return c >= 0x300 && Category(c) == UTF8PROC_CATEGORY_MN; }

bool IsChineseChar(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsAlphanumeric(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool IsDigit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  utf8proc_category_t cat = Category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

void AppendLowercase(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    return;
  }
  if (c == 0x130) {  // the one unconditional multi-code-point lowercase in SpecialCasing.txt
    out.append("i\xCC\x87");
    return;
  }
  AppendUtf8(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))), out);
}

namespace {

// Code points that no normalization form changes and that never combine with a neighbour, per
// form: a string made only of these is its own normal form. The sets are deliberately narrow
// (scripts of the corpus); anything else goes through utf8proc.
bool IsStable(char32_t c, NormalizationForm form) {
  if (c < 0x80) return true;
  const bool cjk =
      (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3041 && c <= 0x3096) || (c >= 0x30A1 && c <= 0x30FA);
  switch (form) {
    case NormalizationForm::kNFC:
      // Below U+0300 every precomposed letter is its own NFC and nothing composes onto a
      // following character; the Cyrillic block has no composition exclusions.
      return c < 0x300 || (c >= 0x400 && c <= 0x4FF) || cjk;
    case NormalizationForm::kNFKC:
      return cjk;
    case NormalizationForm::kNFD:
    case NormalizationForm::kNFKD:
      return false;
  }
  return false;
}

}  // namespace

bool GraphemeBreak(char32_t a, char32_t b, int32_t& state) {
  return utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(a),
                                          static_cast<utf8proc_int32_t>(b), &state);
}

void Normalize(std::string_view in, NormalizationForm form, std::string& out) {
  out.clear();
  bool stable = true;
  for (size_t i = 0; i < in.size() && stable;) {
    const auto b = static_cast<uint8_t>(in[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    stable = IsStable(NextCodePoint(in, i), form);
  }
  if (stable) {
    out.assign(in);
    return;
  }
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalizationForm::kNFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalizationForm::kNFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalizationForm::kNFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalizationForm::kNFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  // utf8proc_map's steps without its malloc, and without its canonical ordering, a bubble sort
  // that is quadratic in a run of combining marks (16,000 marks of alternating classes took
  // seconds): each code point is decomposed on its own into a per-thread buffer, each run of
  // non-starters is stable-sorted by combining class (the canonical ordering algorithm, in
  // O(n log n)), then utf8proc composes and re-encodes in place.
  thread_local std::vector<utf8proc_int32_t> buffer;
  const auto options_t = static_cast<utf8proc_option_t>(options);
  buffer.clear();
  utf8proc_int32_t one[32];
  for (size_t i = 0; i < in.size();) {
    const char32_t c = NextCodePoint(in, i);
    utf8proc_ssize_t k =
        utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), one, 32, options_t, nullptr);
    if (k < 0 || k > 32) {  // unreachable for validated UTF-8 (the longest decomposition is 18)
      out.assign(in);
      return;
    }
    buffer.insert(buffer.end(), one, one + k);
  }
  auto ccc = [](utf8proc_int32_t c) { return utf8proc_get_property(c)->combining_class; };
  for (size_t i = 0; i < buffer.size();) {
    if (ccc(buffer[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < buffer.size() && ccc(buffer[end]) != 0) ++end;
    if (end - i > 1) {
      std::stable_sort(buffer.begin() + static_cast<std::ptrdiff_t>(i),
                       buffer.begin() + static_cast<std::ptrdiff_t>(end),
                       [&](utf8proc_int32_t a, utf8proc_int32_t b) { return ccc(a) < ccc(b); });
    }
    i = end;
  }
  buffer.push_back(0);  // room: reencode may write one more code unit than code points in place
  utf8proc_ssize_t n = static_cast<utf8proc_ssize_t>(buffer.size() - 1);
  n = utf8proc_normalize_utf32(buffer.data(), n, options_t);
  if (n >= 0) n = utf8proc_reencode(buffer.data(), n, options_t);
  if (n < 0) {
    out.assign(in);  // unreachable for validated UTF-8
    return;
  }
  out.assign(reinterpret_cast<const char*>(buffer.data()), static_cast<size_t>(n));
}

}  // namespace quiver::tokenizer
