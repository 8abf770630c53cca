// String building for messages. Debian's Abseil has its own absl::string_view (not
// std::string_view), so absl::StrCat does not take std::string_view; this StrCat takes anything
// fmt can format, absl::string_view included.
#pragma once

#include <iterator>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.data(), s.size()), ctx);
  }
};

namespace quiver {

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", args), ...);
  return out;
}

inline std::string_view ToStd(absl::string_view s) { return {s.data(), s.size()}; }

// Appends `s` as the inside of a JSON string literal (quotes, backslashes and control characters
// escaped; UTF-8 passes through).
inline void AppendJsonEscaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
}

// The length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or 0 if it is not one.
inline size_t Utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  }
  return n;
}

// `s` with every byte that does not start a well-formed UTF-8 sequence replaced by U+FFFD: text
// that must be valid UTF-8 (JSON for log collectors and trace collectors) whatever it came from.
inline std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = Utf8SequenceLength(s.substr(i));
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

inline std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendJsonEscaped(out, s);
  return out;
}

}  // namespace quiver
