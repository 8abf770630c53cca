// Post-processors: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (ids
// unchanged) and Sequence. They add special tokens and set type ids.
#include <memory>

#include "common/status.h"
#include "common/strings.h"
#include "tokenizer/components.h"

namespace quiver::tokenizer {
namespace {

// One element of a template: a special token's ids, or sequence A / B.
struct TemplatePiece {
  enum class Kind { kSpecial, kA, kB } kind = Kind::kA;
  std::vector<uint32_t> ids;  // kSpecial
  uint32_t type_id = 0;
};
using Template = std::vector<TemplatePiece>;

class TemplateProcessing final : public PostProcessor {
 public:
  TemplateProcessing(Template single, Template pair)
      : single_(std::move(single)), pair_(std::move(pair)) {}

  size_t NumAddedTokens(bool pair) const override {
    size_t n = 0;
    for (const TemplatePiece& p : pair ? pair_ : single_) n += p.ids.size();
    return n;
  }

  void Process(const std::vector<uint32_t>& a, const std::vector<uint32_t>* b,
               bool add_special_tokens, std::vector<uint32_t>& ids,
               std::vector<uint32_t>& type_ids) const override {
    ids.clear();
    type_ids.clear();
    for (const TemplatePiece& p : b ? pair_ : single_) {
      const std::vector<uint32_t>* src = nullptr;
      if (p.kind == TemplatePiece::Kind::kSpecial) {
        if (!add_special_tokens) continue;
        src = &p.ids;
      } else {
        src = (p.kind == TemplatePiece::Kind::kA) ? &a : b;
      }
      ids.insert(ids.end(), src->begin(), src->end());
      type_ids.insert(type_ids.end(), src->size(), p.type_id);
    }
  }

 private:
  Template single_, pair_;
};

// BertProcessing: [CLS] A [SEP] (B [SEP]); RobertaProcessing: <s> A </s> (</s> B </s>).
class ClsSepProcessing final : public PostProcessor {
 public:
  ClsSepProcessing(uint32_t cls, uint32_t sep, bool roberta)
      : cls_(cls), sep_(sep), roberta_(roberta) {}

  size_t NumAddedTokens(bool pair) const override { return pair ? (roberta_ ? 4 : 3) : 2; }

  void Process(const std::vector<uint32_t>& a, const std::vector<uint32_t>* b,
               bool add_special_tokens, std::vector<uint32_t>& ids,
               std::vector<uint32_t>& type_ids) const override {
    ids.clear();
    type_ids.clear();
    const uint32_t b_type = roberta_ ? 0 : 1;
    if (!add_special_tokens) {
      ids.insert(ids.end(), a.begin(), a.end());
      type_ids.insert(type_ids.end(), a.size(), 0);
      if (b) {
        ids.insert(ids.end(), b->begin(), b->end());
        type_ids.insert(type_ids.end(), b->size(), 1);
      }
      return;
    }
    ids.push_back(cls_);
    ids.insert(ids.end(), a.begin(), a.end());
    ids.push_back(sep_);
    type_ids.insert(type_ids.end(), ids.size(), 0);
    if (b) {
      if (roberta_) ids.push_back(sep_);
      ids.insert(ids.end(), b->begin(), b->end());
      ids.push_back(sep_);
      type_ids.resize(ids.size(), b_type);
    }
  }

 private:
  uint32_t cls_, sep_;
  bool roberta_;
};

// ByteLevel changes offsets only; ids are A then B, with B's type id 1.
class PassThrough final : public PostProcessor {
 public:
  size_t NumAddedTokens(bool) const override { return 0; }
  void Process(const std::vector<uint32_t>& a, const std::vector<uint32_t>* b, bool,
               std::vector<uint32_t>& ids, std::vector<uint32_t>& type_ids) const override {
    ids.assign(a.begin(), a.end());
    type_ids.assign(a.size(), 0);
    if (b) {
      ids.insert(ids.end(), b->begin(), b->end());
      type_ids.insert(type_ids.end(), b->size(), 1);
    }
  }
};

absl::StatusOr<Template> ParseTemplate(const JsonValue& json, std::string_view key,
                                       const JsonValue* specials) {
  const JsonValue* list = json.Find(key);
  if (list == nullptr || !list->is_array()) {
    return absl::InvalidArgumentError(StrCat("TemplateProcessing: missing list '", key, "'"));
  }
  Template out;
  for (const JsonValue& item : list->items()) {
    TemplatePiece piece;
    if (const JsonValue* special = item.Find("SpecialToken")) {
      QUIVER_ASSIGN_OR_RETURN(std::string name, JsonString(*special, "id"));
      QUIVER_ASSIGN_OR_RETURN(int64_t type_id, JsonInt(*special, "type_id", 0));
      const JsonValue* entry = specials ? specials->Find(name) : nullptr;
      const JsonValue* ids = entry ? entry->Find("ids") : nullptr;
      if (ids == nullptr) {
        return absl::InvalidArgumentError(
            StrCat("TemplateProcessing: special token '", name, "' not in special_tokens"));
      }
      QUIVER_ASSIGN_OR_RETURN(std::vector<int64_t> values, JsonIntArray(*ids, "ids"));
      piece.kind = TemplatePiece::Kind::kSpecial;
      piece.ids.assign(values.begin(), values.end());
      piece.type_id = static_cast<uint32_t>(type_id);
    } else if (const JsonValue* seq = item.Find("Sequence")) {
      QUIVER_ASSIGN_OR_RETURN(std::string id, JsonString(*seq, "id"));
      QUIVER_ASSIGN_OR_RETURN(int64_t type_id, JsonInt(*seq, "type_id", 0));
      if (id != "A" && id != "B") {
        return absl::InvalidArgumentError(StrCat("TemplateProcessing: sequence id '", id, "'"));
      }
      piece.kind = id == "A" ? TemplatePiece::Kind::kA : TemplatePiece::Kind::kB;
      piece.type_id = static_cast<uint32_t>(type_id);
    } else {
      return absl::InvalidArgumentError("TemplateProcessing: unknown template element");
    }
    out.push_back(std::move(piece));
  }
  return out;
}

absl::StatusOr<uint32_t> TokenPairId(const JsonValue& json, std::string_view key) {
  const JsonValue* pair = json.Find(key);
  if (pair == nullptr || !pair->is_array() || pair->items().size() != 2 ||
      !pair->items()[1].is_int()) {
    return absl::InvalidArgumentError(StrCat("post_processor: '", key, "' must be [token, id]"));
  }
  return static_cast<uint32_t>(pair->items()[1].as_int());
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(const JsonValue& json) {
  QUIVER_ASSIGN_OR_RETURN(std::string type, JsonString(json, "type"));
  if (type == "TemplateProcessing") {
    const JsonValue* specials = json.Find("special_tokens");
    QUIVER_ASSIGN_OR_RETURN(Template single, ParseTemplate(json, "single", specials));
    QUIVER_ASSIGN_OR_RETURN(Template pair, ParseTemplate(json, "pair", specials));
    return std::make_unique<TemplateProcessing>(std::move(single), std::move(pair));
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    QUIVER_ASSIGN_OR_RETURN(uint32_t cls, TokenPairId(json, "cls"));
    QUIVER_ASSIGN_OR_RETURN(uint32_t sep, TokenPairId(json, "sep"));
    auto p = std::make_unique<ClsSepProcessing>(cls, sep, type == "RobertaProcessing");
    if (type == "RobertaProcessing") {
      QUIVER_ASSIGN_OR_RETURN(p->trims_offsets, JsonBool(json, "trim_offsets", true));
    }
    return p;
  }
  if (type == "ByteLevel") {
    auto p = std::make_unique<PassThrough>();
    QUIVER_ASSIGN_OR_RETURN(p->trims_offsets, JsonBool(json, "trim_offsets", true));
    return p;
  }
  if (type == "Sequence") {
    const JsonValue* list = json.Find("processors");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("Sequence: missing list 'processors'");
    }
    // ByteLevel steps only touch offsets; at most one step may change ids.
    std::unique_ptr<PostProcessor> chosen;
    bool trims = false;
    for (size_t i = 0; i < list->items().size(); ++i) {
      absl::StatusOr<std::unique_ptr<PostProcessor>> step = MakePostProcessor(list->items()[i]);
      if (!step.ok()) return WithContext(step.status(), StrCat("processors[", i, "]"));
      trims = trims || (*step)->trims_offsets;
      if (dynamic_cast<PassThrough*>(step->get()) != nullptr) continue;
      if (chosen) {
        return absl::InvalidArgumentError(
            "post_processor Sequence with two id-changing steps is not supported");
      }
      chosen = *std::move(step);
    }
    if (!chosen) chosen = std::make_unique<PassThrough>();
    chosen->trims_offsets = trims;
    return chosen;
  }
  return absl::InvalidArgumentError(StrCat("unsupported post_processor '", type, "'"));
}

std::unique_ptr<PostProcessor> MakeDefaultPostProcessor() {
  return std::make_unique<PassThrough>();
}

}  // namespace quiver::tokenizer
