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

}  // namespace quiver
