// Models: WordPiece (greedy longest match), BPE (ranked merges; byte fallback, continuing
// subword prefix, end-of-word suffix, ignore_merges; dropout is a training option and ignored),
// Unigram (Viterbi, unknown pieces fused, byte fallback).
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>

#include "common/status.h"
#include "common/strings.h"
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace quiver::tokenizer {

WordCache::WordCache() {
  static std::atomic<uint64_t> next{1};
  instance_ = next.fetch_add(1);
}

WordCache::Table& WordCache::ForThisThread() const {
  // One table per (thread, model instance). Instances are numbered, never reused, so a table
  // found here always belongs to this cache.
  thread_local absl::flat_hash_map<uint64_t, std::unique_ptr<Table>> tables;
  thread_local uint64_t last_instance = 0;
  thread_local Table* last_table = nullptr;
  if (last_instance == instance_) return *last_table;  // the common case: one model per thread
  std::unique_ptr<Table>& table = tables[instance_];
  if (table == nullptr) table = std::make_unique<Table>();
  last_instance = instance_;
  last_table = table.get();
  return *table;
}

bool WordCache::Lookup(std::string_view word, std::vector<uint32_t>& ids) const {
  if (word.size() > kMaxWordBytes) return false;
  const Table& table = ForThisThread();
  auto it = table.words.find(absl::string_view(word.data(), word.size()));
  if (it == table.words.end()) return false;
  ids.insert(ids.end(), table.arena.begin() + it->second.first,
             table.arena.begin() + it->second.first + it->second.second);
  return true;
}

void WordCache::Insert(std::string_view word, const std::vector<uint32_t>& ids,
                       size_t first) const {
  if (word.size() > kMaxWordBytes) return;
  Table& table = ForThisThread();
  if (table.words.size() >= kMaxEntries) {
    table.words.clear();
    table.arena.clear();
  }
  const auto offset = static_cast<uint32_t>(table.arena.size());
  table.arena.insert(table.arena.end(), ids.begin() + static_cast<std::ptrdiff_t>(first),
                     ids.end());
  table.words.emplace(std::string(word),
                      std::make_pair(offset, static_cast<uint32_t>(ids.size() - first)));
}

namespace {

absl::StatusOr<Vocab> ParseVocabObject(const JsonValue& model) {
  const JsonValue* vocab_json = model.Find("vocab");
  if (vocab_json == nullptr || !vocab_json->is_object()) {
    return absl::InvalidArgumentError("model: missing object 'vocab'");
  }
  Vocab vocab;
  vocab.reserve(vocab_json->members().size());
  for (const auto& [token, id] : vocab_json->members()) {
    if (!id.is_int() || id.as_int() < 0 || id.as_int() > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(StrCat("model.vocab['", token, "'] is not a valid id"));
    }
    vocab.emplace(token, static_cast<uint32_t>(id.as_int()));
  }
  return vocab;
}

std::vector<std::string> InvertVocab(const Vocab& vocab) {
  uint32_t max_id = 0;
  for (const auto& [token, id] : vocab) max_id = std::max(max_id, id);
  std::vector<std::string> tokens(vocab.empty() ? 0 : max_id + 1);
  for (const auto& [token, id] : vocab) tokens[id] = token;
  return tokens;
}

// A model whose tokens are the keys of one vocabulary (WordPiece, BPE): ids and tokens both ways.
class VocabModel : public Model {
 public:
  explicit VocabModel(Vocab vocab) : vocab_(std::move(vocab)), tokens_(InvertVocab(vocab_)) {}

  std::optional<uint32_t> TokenToId(std::string_view token) const override {
    return Lookup(vocab_, token);
  }
  std::optional<std::string> IdToToken(uint32_t id) const override {
    if (id >= tokens_.size()) return std::nullopt;
    return tokens_[id];
  }
  size_t vocab_size() const override { return vocab_.size(); }

 protected:
  const Vocab& vocab() const { return vocab_; }
  // Each id's token ("" for an id the vocabulary skips).
  const std::vector<std::string>& tokens() const { return tokens_; }

 private:
  Vocab vocab_;
  std::vector<std::string> tokens_;
};

// ---- WordPiece
// -----------------------------------------------------------------------------------

class WordPiece final : public VocabModel {
 public:
  WordPiece(Vocab vocab, uint32_t unk_id, std::string prefix, size_t max_chars)
      : VocabModel(std::move(vocab)),
        unk_id_(unk_id),
        prefix_(std::move(prefix)),
        max_chars_(max_chars) {}

  void Tokenize(std::string_view word, std::vector<uint32_t>& ids) const override {
    if (CountCodePoints(word) > max_chars_) {
      ids.push_back(unk_id_);
      return;
    }
    thread_local std::string candidate;
    const size_t first = ids.size();
    size_t start = 0;
    while (start < word.size()) {
      size_t end = word.size();
      std::optional<uint32_t> found;
      while (start < end) {
        std::string_view piece = word.substr(start, end - start);
        if (start > 0) {
          candidate.assign(prefix_);
          candidate.append(piece);
          piece = candidate;
        }
        found = Lookup(vocab(), piece);
        if (found) break;
        // Step back one code point.
        do {
          --end;
        } while (end > start && (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80);
      }
      if (!found) {
        ids.resize(first);
        ids.push_back(unk_id_);
        return;
      }
      ids.push_back(*found);
      start = end;
    }
  }

  // Each token is the next piece of the word (after the continuation prefix); an unknown word is
  // one [UNK] over the whole word.
  bool Spans(std::string_view word, const uint32_t* ids, size_t n,
             std::vector<std::pair<uint32_t, uint32_t>>& spans) const override {
    if (n == 1 && ids[0] == unk_id_) {
      spans.emplace_back(0, static_cast<uint32_t>(word.size()));
      return true;
    }
    size_t pos = 0;
    for (size_t k = 0; k < n; ++k) {
      if (ids[k] >= tokens().size()) return false;
      std::string_view token = tokens()[ids[k]];
      if (k > 0) {
        if (!token.starts_with(prefix_)) return false;
        token.remove_prefix(prefix_.size());
      }
      if (word.substr(pos, token.size()) != token) return false;
      spans.emplace_back(static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + token.size()));
      pos += token.size();
    }
    return pos == word.size();
  }

 private:
  uint32_t unk_id_;
  std::string prefix_;
  size_t max_chars_;
};

// ---- BPE
// -----------------------------------------------------------------------------------------

class Bpe final : public VocabModel {
 public:
  struct MergeInfo {
    uint32_t rank;
    uint32_t new_id;
  };
  using Merges = absl::flat_hash_map<uint64_t, MergeInfo>;

  Bpe(Vocab vocab, Merges merges, std::optional<uint32_t> unk_id, std::string prefix,
      std::string suffix, bool fuse_unk, bool byte_fallback, bool ignore_merges)
      : VocabModel(std::move(vocab)),
        merges_(std::move(merges)),
        unk_id_(unk_id),
        prefix_(std::move(prefix)),
        suffix_(std::move(suffix)),
        fuse_unk_(fuse_unk),
        byte_fallback_(byte_fallback),
        ignore_merges_(ignore_merges) {}

  // Tokens are consecutive pieces of the word when no prefix, suffix or byte fallback rewrites
  // them.
  bool Spans(std::string_view word, const uint32_t* ids, size_t n,
             std::vector<std::pair<uint32_t, uint32_t>>& spans) const override {
    if (!prefix_.empty() || !suffix_.empty() || byte_fallback_) return false;
    size_t pos = 0;
    for (size_t k = 0; k < n; ++k) {
      if (ids[k] >= tokens().size() || (unk_id_ && ids[k] == *unk_id_)) return false;
      const std::string_view token = tokens()[ids[k]];
      if (word.substr(pos, token.size()) != token) return false;
      spans.emplace_back(static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + token.size()));
      pos += token.size();
    }
    return pos == word.size();
  }

  void Tokenize(std::string_view word, std::vector<uint32_t>& ids) const override {
    if (word.empty()) return;
    if (cache_.Lookup(word, ids)) return;
    const size_t first = ids.size();
    Merge(word, ids);
    cache_.Insert(word, ids, first);
  }

  void Merge(std::string_view word, std::vector<uint32_t>& ids) const {
    if (ignore_merges_) {
      if (std::optional<uint32_t> id = Lookup(vocab(), word)) {
        ids.push_back(*id);
        return;
      }
    }
    thread_local std::vector<Symbol> symbols;
    InitialSymbols(word, symbols);
    ApplyMerges(symbols);
    for (const Symbol& s : symbols) {
      if (s.alive) ids.push_back(s.id);
    }
  }

  static uint64_t Key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

 private:
  // A doubly linked list over the word's pieces; merged-away pieces stay, not alive.
  struct Symbol {
    uint32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };

  // The word's initial pieces: one per character (with the continuing prefix and end-of-word
  // suffix where the model has them), its bytes' <0xNN> tokens under byte fallback, else the unk
  // token (one for a run of unknown characters when fuse_unk).
  void InitialSymbols(std::string_view word, std::vector<Symbol>& symbols) const {
    symbols.clear();
    thread_local std::string candidate;
    bool last_was_unk = false;
    for (size_t i = 0; i < word.size();) {
      const size_t start = i;
      i += Utf8Length(static_cast<uint8_t>(word[i]));
      std::string_view ch = word.substr(start, i - start);
      std::string_view key = ch;
      if ((start > 0 && !prefix_.empty()) || (i == word.size() && !suffix_.empty())) {
        candidate.clear();
        if (start > 0) candidate.append(prefix_);
        candidate.append(ch);
        if (i == word.size()) candidate.append(suffix_);
        key = candidate;
      }
      if (std::optional<uint32_t> id = Lookup(vocab(), key)) {
        symbols.push_back({*id, 0, 0, true});
        last_was_unk = false;
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        const size_t mark = symbols.size();
        for (char b : ch) {
          char name[8];
          std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<uint8_t>(b));
          std::optional<uint32_t> id = Lookup(vocab(), name);
          if (!id) {
            all = false;
            break;
          }
          symbols.push_back({*id, 0, 0, true});
        }
        if (all) {
          last_was_unk = false;
          continue;
        }
        symbols.resize(mark);
      }
      if (unk_id_) {
        if (!(fuse_unk_ && last_was_unk)) symbols.push_back({*unk_id_, 0, 0, true});
        last_was_unk = true;
      }
    }
  }

  // Merges neighbouring symbols, lowest rank first, then leftmost: the order Hugging Face applies
  // merges in.
  void ApplyMerges(std::vector<Symbol>& symbols) const {
    const auto n = static_cast<int32_t>(symbols.size());
    for (int32_t k = 0; k < n; ++k) {
      symbols[k].prev = k - 1;
      symbols[k].next = k + 1 < n ? k + 1 : -1;
    }
    struct Candidate {
      uint32_t rank;
      int32_t pos;
      uint32_t new_id;
      bool operator>(const Candidate& o) const {
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    // A binary heap kept in a per-thread vector (std::priority_queue would own and free it).
    thread_local std::vector<Candidate> heap;
    heap.clear();
    auto push_pair = [&](int32_t left) {
      if (left < 0) return;
      int32_t right = symbols[left].next;
      if (right < 0) return;
      auto it = merges_.find(Key(symbols[left].id, symbols[right].id));
      if (it == merges_.end()) return;
      heap.push_back({it->second.rank, left, it->second.new_id});
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    };
    for (int32_t k = 0; k + 1 < n; ++k) push_pair(k);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      const Candidate top = heap.back();
      heap.pop_back();
      Symbol& left = symbols[top.pos];
      if (!left.alive || left.next < 0) continue;
      Symbol& right = symbols[left.next];
      auto it = merges_.find(Key(left.id, right.id));
      if (it == merges_.end() || it->second.rank != top.rank) continue;  // stale entry
      left.id = top.new_id;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.pos;
      push_pair(left.prev);
      push_pair(top.pos);
    }
  }

  Merges merges_;
  std::optional<uint32_t> unk_id_;
  std::string prefix_, suffix_;
  bool fuse_unk_, byte_fallback_, ignore_merges_;
  WordCache cache_;
};

absl::StatusOr<std::unique_ptr<Model>> MakeBpe(const JsonValue& json) {
  QUIVER_ASSIGN_OR_RETURN(Vocab vocab, ParseVocabObject(json));
  const JsonValue* merges_json = json.Find("merges");
  if (merges_json == nullptr || !merges_json->is_array()) {
    return absl::InvalidArgumentError("BPE: missing list 'merges'");
  }
  Bpe::Merges merges;
  merges.reserve(merges_json->items().size());
  QUIVER_ASSIGN_OR_RETURN(std::string prefix, JsonString(json, "continuing_subword_prefix", ""));
  for (size_t rank = 0; rank < merges_json->items().size(); ++rank) {
    const JsonValue& m = merges_json->items()[rank];
    std::string left, right;
    if (m.is_string()) {  // "a b" (files before tokenizers 0.20)
      const std::string& s = m.as_string();
      size_t space = s.find(' ', 1);
      if (space == std::string::npos) {
        return absl::InvalidArgumentError(StrCat("BPE: merges[", rank, "] '", s, "' has no space"));
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.items().size() == 2 && m.items()[0].is_string() &&
               m.items()[1].is_string()) {
      left = m.items()[0].as_string();
      right = m.items()[1].as_string();
    } else {
      return absl::InvalidArgumentError(StrCat("BPE: merges[", rank, "] is malformed"));
    }
    std::optional<uint32_t> a = Lookup(vocab, left);
    std::optional<uint32_t> b = Lookup(vocab, right);
    // The merged token drops the right part's continuing-subword prefix.
    std::string_view right_body = right;
    if (!prefix.empty() && right_body.starts_with(prefix)) right_body.remove_prefix(prefix.size());
    std::optional<uint32_t> merged = Lookup(vocab, left + std::string(right_body));
    if (!a || !b || !merged) {
      return absl::InvalidArgumentError(StrCat("BPE: merges[", rank, "] ('", left, "', '", right,
                                               "') uses a token not in vocab"));
    }
    merges.try_emplace(Bpe::Key(*a, *b), Bpe::MergeInfo{static_cast<uint32_t>(rank), *merged});
  }
  std::optional<uint32_t> unk_id;
  if (const JsonValue* unk = json.Find("unk_token"); unk && unk->is_string()) {
    unk_id = Lookup(vocab, unk->as_string());
    if (!unk_id) {
      return absl::InvalidArgumentError(
          StrCat("BPE: unk_token '", unk->as_string(), "' is not in vocab"));
    }
  }
  QUIVER_ASSIGN_OR_RETURN(std::string suffix, JsonString(json, "end_of_word_suffix", ""));
  QUIVER_ASSIGN_OR_RETURN(bool fuse_unk, JsonBool(json, "fuse_unk", false));
  QUIVER_ASSIGN_OR_RETURN(bool byte_fallback, JsonBool(json, "byte_fallback", false));
  QUIVER_ASSIGN_OR_RETURN(bool ignore_merges, JsonBool(json, "ignore_merges", false));
  return std::make_unique<Bpe>(std::move(vocab), std::move(merges), unk_id, std::move(prefix),
                               std::move(suffix), fuse_unk, byte_fallback, ignore_merges);
}

// ---- Unigram
// -------------------------------------------------------------------------------------

class Unigram final : public Model {
 public:
  Unigram(std::vector<std::string> pieces, std::vector<double> scores,
          std::optional<uint32_t> unk_id, bool byte_fallback)
      : pieces_(std::move(pieces)),
        scores_(std::move(scores)),
        unk_id_(unk_id),
        byte_fallback_(byte_fallback) {
    double min_score = std::numeric_limits<double>::infinity();
    for (double s : scores_) min_score = std::min(min_score, s);
    unk_score_ = min_score - 10.0;  // sentencepiece's kUnkPenalty
    for (uint32_t id = 0; id < pieces_.size(); ++id) {
      vocab_.try_emplace(pieces_[id], id);
      Insert(pieces_[id], id);
    }
  }

  void Tokenize(std::string_view word, std::vector<uint32_t>& ids) const override {
    if (word.empty()) return;
    if (cache_.Lookup(word, ids)) return;
    const size_t first = ids.size();
    Viterbi(word, ids);
    cache_.Insert(word, ids, first);
  }

  // Each token's byte range of the word: the best path again (Tokenize may have answered from
  // its cache), its pieces and fused unknown runs. Not where byte fallback spelled an unknown
  // run in byte tokens (false).
  bool Spans(std::string_view word, const uint32_t* ids, size_t n,
             std::vector<std::pair<uint32_t, uint32_t>>& spans) const override {
    thread_local std::vector<uint32_t> again;
    again.clear();
    const std::vector<std::pair<size_t, size_t>>& path_spans = Viterbi(word, again);
    if (again.size() != n || !std::equal(again.begin(), again.end(), ids) ||
        path_spans.size() != n) {
      return false;
    }
    for (size_t k = path_spans.size(); k-- > 0;) {  // the path runs from the end
      spans.emplace_back(static_cast<uint32_t>(path_spans[k].first),
                         static_cast<uint32_t>(path_spans[k].second));
    }
    return true;
  }

  // Appends the ids of the best segmentation of `word`; returns the tokens' byte ranges before
  // byte fallback, last token first (a thread's buffer, valid until its next call).
  const std::vector<std::pair<size_t, size_t>>& Viterbi(std::string_view word,
                                                        std::vector<uint32_t>& ids) const {
    struct Best {
      double score;
      int32_t start;  // -1: unreached
      uint32_t id;
    };
    thread_local std::vector<Best> best;
    best.assign(word.size() + 1, Best{0.0, -1, 0});
    best[0].start = 0;
    for (size_t start = 0; start < word.size();) {
      const size_t char_len = Utf8Length(static_cast<uint8_t>(word[start]));
      const double base = best[start].score;
      bool single_char_piece = false;
      // Common-prefix search through the trie.
      uint32_t node = 0;
      for (size_t pos = start; pos < word.size(); ++pos) {
        node = Child(node, static_cast<uint8_t>(word[pos]));
        if (node == kNone) break;
        const int32_t id = nodes_[node].piece;
        if (id < 0) continue;
        const size_t end = pos + 1;
        const double candidate = base + scores_[id];
        if (best[end].start < 0 || candidate > best[end].score) {
          best[end] = {candidate, static_cast<int32_t>(start), static_cast<uint32_t>(id)};
        }
        if (end - start == char_len) single_char_piece = true;
      }
      if (!single_char_piece) {
        const size_t end = start + char_len;
        const double candidate = base + unk_score_;
        if (best[end].start < 0 || candidate > best[end].score) {
          best[end] = {candidate, static_cast<int32_t>(start), unk_id_.value_or(0)};
        }
      }
      start += char_len;
    }
    // Backtrack, fusing consecutive unknown pieces into one.
    thread_local std::vector<std::pair<size_t, size_t>> spans;  // [begin, end) per token
    thread_local std::vector<uint32_t> path;
    spans.clear();
    path.clear();
    for (size_t end = word.size(); end > 0;) {
      const Best& b = best[end];
      const auto begin = static_cast<size_t>(b.start);
      const bool unk = unk_id_ && b.id == *unk_id_;
      if (unk && !path.empty() && unk_id_ && path.back() == *unk_id_) {
        spans.back().first = begin;  // extend the unknown piece to the left
      } else {
        path.push_back(b.id);
        spans.emplace_back(begin, end);
      }
      end = begin;
    }
    for (size_t k = path.size(); k-- > 0;) {
      if (byte_fallback_ && unk_id_ && path[k] == *unk_id_) {
        const size_t mark = ids.size();
        bool all = true;
        for (size_t p = spans[k].first; p < spans[k].second; ++p) {
          char name[8];
          std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<uint8_t>(word[p]));
          std::optional<uint32_t> id = Lookup(vocab_, name);
          if (!id) {
            all = false;
            break;
          }
          ids.push_back(*id);
        }
        if (all) continue;
        ids.resize(mark);
      }
      ids.push_back(path[k]);
    }
    return spans;
  }

  std::optional<uint32_t> TokenToId(std::string_view token) const override {
    return Lookup(vocab_, token);
  }
  std::optional<std::string> IdToToken(uint32_t id) const override {
    if (id >= pieces_.size()) return std::nullopt;
    return pieces_[id];
  }
  size_t vocab_size() const override { return pieces_.size(); }

 private:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  struct Node {
    int32_t piece = -1;
  };

  uint32_t Child(uint32_t node, uint8_t byte) const {
    auto it = edges_.find((uint64_t{node} << 8) | byte);
    return it == edges_.end() ? kNone : it->second;
  }

  void Insert(const std::string& piece, uint32_t id) {
    if (nodes_.empty()) nodes_.emplace_back();
    uint32_t node = 0;
    for (char ch : piece) {
      const uint64_t key = (uint64_t{node} << 8) | static_cast<uint8_t>(ch);
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        nodes_.emplace_back();
        it = edges_.emplace(key, static_cast<uint32_t>(nodes_.size() - 1)).first;
      }
      node = it->second;
    }
    if (nodes_[node].piece < 0) nodes_[node].piece = static_cast<int32_t>(id);
  }

  std::vector<std::string> pieces_;
  std::vector<double> scores_;
  std::optional<uint32_t> unk_id_;
  bool byte_fallback_;
  double unk_score_ = 0;
  Vocab vocab_;
  std::vector<Node> nodes_;
  absl::flat_hash_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> child
  WordCache cache_;
};

// The value serde_json (the JSON parser Hugging Face tokenizers uses, without its
// float_roundtrip feature) gives for the decimal that was written for `value`. Unigram scores are
// written as the shortest decimal that round-trips; serde_json reads it as
// float(all digits as an integer) / 10^k, which for 17-digit scores can be one ulp away from the
// correctly rounded value. Viterbi ties between paths then break the way Hugging Face's do only
// if the scores match it bit for bit.
double SerdeJsonF64(double value) {
  if (!std::isfinite(value) || value == 0.0) return value;
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  if (ec != std::errc()) return value;
  // buf: [-]d[.ddd]e[+-]xx, the shortest round-trip digits.
  std::string_view text(buf, static_cast<size_t>(end - buf));
  const bool negative = text.front() == '-';
  if (negative) text.remove_prefix(1);
  uint64_t significand = 0;
  int exponent = 0;
  size_t i = 0;
  bool after_point = false;
  for (; i < text.size() && text[i] != 'e'; ++i) {
    if (text[i] == '.') {
      after_point = true;
      continue;
    }
    significand = significand * 10 + static_cast<uint64_t>(text[i] - '0');
    if (after_point) --exponent;
  }
  exponent += std::atoi(std::string(text.substr(i + 1)).c_str());
  double f = static_cast<double>(significand);
  while (true) {
    const int magnitude = exponent < 0 ? -exponent : exponent;
    if (magnitude <= 308) {
      const double pow10 = std::strtod(("1e" + std::to_string(magnitude)).c_str(), nullptr);
      f = exponent >= 0 ? f * pow10 : f / pow10;
      break;
    }
    if (f == 0.0 || exponent >= 0) break;
    f /= 1e308;
    exponent += 308;
  }
  return negative ? -f : f;
}

absl::StatusOr<std::unique_ptr<Model>> MakeUnigram(const JsonValue& json) {
  const JsonValue* vocab = json.Find("vocab");
  if (vocab == nullptr || !vocab->is_array()) {
    return absl::InvalidArgumentError("Unigram: missing list 'vocab'");
  }
  std::vector<std::string> pieces;
  std::vector<double> scores;
  for (size_t i = 0; i < vocab->items().size(); ++i) {
    const JsonValue& entry = vocab->items()[i];
    if (!entry.is_array() || entry.items().size() != 2 || !entry.items()[0].is_string() ||
        !entry.items()[1].is_number()) {
      return absl::InvalidArgumentError(StrCat("Unigram: vocab[", i, "] must be [piece, score]"));
    }
    pieces.push_back(entry.items()[0].as_string());
    scores.push_back(SerdeJsonF64(entry.items()[1].as_double()));
  }
  std::optional<uint32_t> unk_id;
  if (const JsonValue* unk = json.Find("unk_id"); unk && unk->is_int()) {
    if (unk->as_int() < 0 || static_cast<size_t>(unk->as_int()) >= pieces.size()) {
      return absl::InvalidArgumentError("Unigram: unk_id outside the vocabulary");
    }
    unk_id = static_cast<uint32_t>(unk->as_int());
  }
  QUIVER_ASSIGN_OR_RETURN(bool byte_fallback, JsonBool(json, "byte_fallback", false));
  return std::make_unique<Unigram>(std::move(pieces), std::move(scores), unk_id, byte_fallback);
}

absl::StatusOr<std::unique_ptr<Model>> MakeWordPiece(const JsonValue& json) {
  QUIVER_ASSIGN_OR_RETURN(Vocab vocab, ParseVocabObject(json));
  QUIVER_ASSIGN_OR_RETURN(std::string unk, JsonString(json, "unk_token", "[UNK]"));
  std::optional<uint32_t> unk_id = Lookup(vocab, unk);
  if (!unk_id) {
    return absl::InvalidArgumentError(StrCat("WordPiece: unk_token '", unk, "' is not in vocab"));
  }
  QUIVER_ASSIGN_OR_RETURN(std::string prefix, JsonString(json, "continuing_subword_prefix", "##"));
  QUIVER_ASSIGN_OR_RETURN(int64_t max_chars, JsonInt(json, "max_input_chars_per_word", 100));
  return std::make_unique<WordPiece>(std::move(vocab), *unk_id, std::move(prefix),
                                     static_cast<size_t>(std::max<int64_t>(0, max_chars)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const JsonValue& json) {
  QUIVER_ASSIGN_OR_RETURN(std::string type, JsonString(json, "type"));
  if (type == "WordPiece") return MakeWordPiece(json);
  if (type == "BPE") return MakeBpe(json);
  if (type == "Unigram") return MakeUnigram(json);
  return absl::InvalidArgumentError(StrCat("unsupported model '", type, "'"));
}

}  // namespace quiver::tokenizer
