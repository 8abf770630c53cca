// PCRE2 (UTF + UCP, JIT-compiled) behind a small interface, for the Split pre-tokenizer and the
// Replace normalizer. Hugging Face compiles these patterns with Oniguruma; PCRE2 accepts the
// same syntax for the patterns tokenizer.json files use (\p{L}, lookahead, (?i:...)).
//
// A Regex is immutable after Compile and safe to use from many threads: match data and the JIT
// stack are per thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace quiver::tokenizer {

class Regex {
 public:
  static absl::StatusOr<std::shared_ptr<const Regex>> Compile(std::string_view pattern);
  // A literal string (Hugging Face's String pattern), matched as-is.
  static absl::StatusOr<std::shared_ptr<const Regex>> Literal(std::string_view text);
  ~Regex();

  // Appends the [begin, end) byte spans of every non-overlapping match, left to right.
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& spans) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  std::string literal_;   // non-empty: plain substring search instead of PCRE2
  bool is_literal_ = false;
};

}  // namespace quiver::tokenizer
