// Decoders: WordPiece, ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence.
#include <memory>

#include "common/status.h"
#include "common/strings.h"
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace quiver::tokenizer {
namespace {

void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i > 0) {
        if (t.starts_with(prefix_)) {
          t.erase(0, prefix_.size());
        } else {
          t.insert(0, " ");
        }
      }
      if (cleanup_) {
        for (auto [from, to] : {std::pair{" .", "."},
                                {" ?", "?"},
                                {" !", "!"},
                                {" ,", ","},
                                {" ' ", "'"},
                                {" n't", "n't"},
                                {" 'm", "'m"},
                                {" do not", " don't"},
                                {" 's", "'s"},
                                {" 've", "'ve"},
                                {" 're", "'re"}}) {
          ReplaceAll(t, from, to);
        }
      }
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class ByteLevelDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      for (size_t i = 0; i < t.size();) {
        size_t start = i;
        char32_t c = NextCodePoint(t, i);
        if (std::optional<uint8_t> b = UnicodeToByte(c)) {
          bytes.push_back(static_cast<char>(*b));
        } else {
          bytes.append(t, start, i - start);
        }
      }
    }
    tokens.assign(1, Lossy(bytes));
  }

  // Invalid UTF-8 sequences become U+FFFD, as String::from_utf8_lossy does.
  static std::string Lossy(const std::string& bytes);
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      ReplaceAll(tokens[i], replacement_, " ");
      if (i == 0 && strip_first_ && tokens[i].starts_with(' ')) tokens[i].erase(0, 1);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) ReplaceAll(t, from_, to_);
  }

 private:
  std::string from_, to_;
};

class FuseDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const std::string& t : tokens) joined += t;
    tokens.assign(1, joined);
  }
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (!pending.empty()) out.push_back(ByteLevelDecoder::Lossy(pending));
      pending.clear();
    };
    for (const std::string& t : tokens) {
      if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>') {
        pending.push_back(static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
      } else {
        flush();
        out.push_back(t);
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      for (size_t k = 0; k < start_ && t.starts_with(content_); ++k) t.erase(0, content_.size());
      for (size_t k = 0; k < stop_ && t.ends_with(content_); ++k) {
        t.erase(t.size() - content_.size());
      }
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->DecodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

std::string ByteLevelDecoder::Lossy(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    size_t len = Utf8Length(b);
    bool ok = b < 0x80 || (b >= 0xC2 && b <= 0xF4);
    if (ok && i + len <= bytes.size()) {
      for (size_t k = 1; k < len; ++k) ok &= (static_cast<uint8_t>(bytes[i + k]) & 0xC0) == 0x80;
    } else {
      ok = false;
    }
    if (ok) {
      out.append(bytes, i, len);
      i += len;
    } else {
      out.append("\xEF\xBF\xBD");
      ++i;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const JsonValue& json) {
  QUIVER_ASSIGN_OR_RETURN(std::string type, JsonString(json, "type"));
  if (type == "WordPiece") {
    QUIVER_ASSIGN_OR_RETURN(std::string prefix, JsonString(json, "prefix", "##"));
    QUIVER_ASSIGN_OR_RETURN(bool cleanup, JsonBool(json, "cleanup", true));
    return std::make_unique<WordPieceDecoder>(std::move(prefix), cleanup);
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    QUIVER_ASSIGN_OR_RETURN(std::string replacement, JsonString(json, "replacement", "\u2581"));
    QUIVER_ASSIGN_OR_RETURN(std::string scheme, JsonString(json, "prepend_scheme", "always"));
    return std::make_unique<MetaspaceDecoder>(std::move(replacement), scheme != "never");
  }
  if (type == "Replace") {
    const JsonValue* pattern = json.Find("pattern");
    const JsonValue* literal = pattern ? pattern->Find("String") : nullptr;
    if (literal == nullptr || !literal->is_string()) {
      return absl::InvalidArgumentError("Replace decoder: only String patterns are supported");
    }
    QUIVER_ASSIGN_OR_RETURN(std::string content, JsonString(json, "content"));
    return std::make_unique<ReplaceDecoder>(literal->as_string(), std::move(content));
  }
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Strip") {
    QUIVER_ASSIGN_OR_RETURN(std::string content, JsonString(json, "content", " "));
    QUIVER_ASSIGN_OR_RETURN(int64_t start, JsonInt(json, "start", 0));
    QUIVER_ASSIGN_OR_RETURN(int64_t stop, JsonInt(json, "stop", 0));
    return std::make_unique<StripDecoder>(std::move(content), static_cast<size_t>(start),
                                          static_cast<size_t>(stop));
  }
  if (type == "Sequence") {
    const JsonValue* list = json.Find("decoders");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("Sequence: missing list 'decoders'");
    }
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const JsonValue& item : list->items()) {
      QUIVER_ASSIGN_OR_RETURN(std::unique_ptr<Decoder> step, MakeDecoder(item));
      steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  return absl::InvalidArgumentError(StrCat("unsupported decoder '", type, "'"));
}

}  // namespace quiver::tokenizer
