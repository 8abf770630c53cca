// `quiver tokenize`: JSON lines {"text": ...} or {"text": ..., "text_pair": ...} on stdin,
// {"ids": [...], "type_ids": [...]} lines on stdout, one per input line, for scripted
// comparisons with other tokenizers. A bad line gets {"error": "..."} and the exit status is 1.
#include <cstdio>
#include <iostream>
#include <string>

#include "app/commands.h"
#include "common/json.h"
#include "common/strings.h"
#include "tokenizer/tokenizer.h"

namespace quiver::app {
namespace {

void WriteIds(std::string& out, const char* key, const std::vector<uint32_t>& ids) {
  out += '"';
  out += key;
  out += "\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
}

}  // namespace

int RunTokenize(const TokenizeOptions& options) {
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok =
      tokenizer::Tokenizer::FromFile(options.tokenizer_path);
  if (!tok.ok()) {
    std::fprintf(stderr, "quiver tokenize: %s\n", std::string(tok.status().message()).c_str());
    return 2;
  }
  tokenizer::EncodeOptions encode;
  if (options.max_length > 0) {
    tokenizer::Truncation t;
    t.max_length = static_cast<size_t>(options.max_length);
    t.side = options.truncation_side == "left" ? tokenizer::TruncationSide::kLeft
                                               : tokenizer::TruncationSide::kRight;
    encode.truncation = t;
  }
  tokenizer::Encoding enc;
  std::string line, out;
  int failures = 0;
  size_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    out.clear();
    absl::Status status = [&]() -> absl::Status {
      absl::StatusOr<JsonValue> json = JsonValue::Parse(line);
      if (!json.ok()) return json.status();
      absl::StatusOr<std::string> text = JsonString(*json, "text");
      if (!text.ok()) return text.status();
      const JsonValue* pair = json->Find("text_pair");
      if (options.pairs || (pair != nullptr && !pair->is_null())) {
        absl::StatusOr<std::string> second = JsonString(*json, "text_pair");
        if (!second.ok()) return second.status();
        return (*tok)->EncodePair(*text, *second, encode, &enc);
      }
      return (*tok)->Encode(*text, encode, &enc);
    }();
    if (status.ok()) {
      out += '{';
      WriteIds(out, "ids", enc.ids);
      out += ',';
      WriteIds(out, "type_ids", enc.type_ids);
      out += "}\n";
    } else {
      ++failures;
      out = StrCat("{\"error\":\"line ", line_number, ": ", JsonEscape(ToStd(status.message())),
                   "\"}\n");
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace quiver::app
