#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/strings.h"

namespace quiver::tokenizer {
namespace {

// Per-thread PCRE2 state shared by every pattern: one match data block (only group 0 is read)
// and a JIT stack large enough for lookahead over long runs of whitespace.
struct ThreadState {
  pcre2_match_data* match_data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  ThreadState() {
    match_data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(PCRE2_SIZE{32} << 10, PCRE2_SIZE{8} << 20, nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadState() {
    pcre2_match_data_free(match_data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

ThreadState& State() {
  thread_local ThreadState state;
  return state;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Regex>> Regex::Compile(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(StrCat("regex '", pattern, "' at offset ", offset, ": ",
                                             reinterpret_cast<const char*>(message)));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT fails
  std::shared_ptr<Regex> regex(new Regex());
  regex->code_ = code;
  return std::shared_ptr<const Regex>(std::move(regex));
}

absl::StatusOr<std::shared_ptr<const Regex>> Regex::Literal(std::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("empty split/replace pattern");
  std::shared_ptr<Regex> regex(new Regex());
  regex->literal_ = std::string(text);
  regex->is_literal_ = true;
  return std::shared_ptr<const Regex>(std::move(regex));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& spans) const {
  if (is_literal_) {
    size_t pos = 0;
    while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
      spans.emplace_back(pos, pos + literal_.size());
      pos += literal_.size();
    }
    return;
  }
  ThreadState& state = State();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.match_data,
                         state.context);
    if (rc < 0) break;  // no match (or a resource limit: treat the rest as unmatched)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.match_data);
    size_t b = ov[0], e = ov[1];
    if (e == b) {
      // Empty match: Oniguruma's find_iter skips it and moves on one character.
      if (b >= text.size()) break;
      start = b + 1;
      while (start < text.size() && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) ++start;
      continue;
    }
    spans.emplace_back(b, e);
    start = e;
  }
}

}  // namespace quiver::tokenizer
