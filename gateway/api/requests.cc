#include "gateway/api/requests.h"

#include <cmath>
#include <limits>

#include "common/status.h"
#include "common/strings.h"
#include "gateway/api/errors.h"

namespace quiver::gateway::api {
namespace {

using Type = JsonView::Type;

absl::Status WrongType(std::string_view field, std::string_view expected, const JsonView& got) {
  return FieldError(
      absl::StatusCode::kFailedPrecondition, field,
      StrCat("'", field, "' must be ", expected, ", got ", JsonValue::TypeName(got.type())));
}

absl::Status Missing(std::string_view field) {
  return FieldError(absl::StatusCode::kFailedPrecondition, field,
                    StrCat("missing field '", field, "'"));
}

absl::Status CheckObject(const JsonView& body) {
  if (body.is_object()) return absl::OkStatus();
  return FieldError(
      absl::StatusCode::kFailedPrecondition, "",
      StrCat("the body must be a JSON object, got ", JsonValue::TypeName(body.type())));
}

// A member that is absent or null counts as not sent.
std::optional<JsonView> Field(const JsonView& body, std::string_view key) {
  std::optional<JsonView> v = body.Find(key);
  if (v && v->is_null()) return std::nullopt;
  return v;
}

absl::StatusOr<std::optional<bool>> OptBool(const JsonView& body, std::string_view key) {
  const std::optional<JsonView> v = Field(body, key);
  if (v == std::nullopt) return std::optional<bool>();
  if (!v->is_bool()) return WrongType(key, "a boolean", *v);
  return std::optional<bool>(v->as_bool());
}

absl::StatusOr<bool> Bool(const JsonView& body, std::string_view key, bool fallback) {
  QUIVER_ASSIGN_OR_RETURN(std::optional<bool> v, OptBool(body, key));
  return v.value_or(fallback);
}

// An integer, also written as a number with no fractional part (5.0): JSON Schema's "integer".
std::optional<int64_t> AsInteger(const JsonView& v) {
  if (v.is_int()) return v.as_int();
  if (v.is_number()) {
    const double d = v.as_double();
    if (std::floor(d) == d && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<int64_t>> OptInt(const JsonView& body, std::string_view key) {
  const std::optional<JsonView> v = Field(body, key);
  if (v == std::nullopt) return std::optional<int64_t>();
  const std::optional<int64_t> i = AsInteger(*v);
  if (!i) return WrongType(key, "an integer", *v);
  return i;
}

// A positive integer, or 0 when absent.
absl::StatusOr<int64_t> PositiveInt(const JsonView& body, std::string_view key) {
  QUIVER_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptInt(body, key));
  if (!v) return 0;
  if (*v <= 0) {
    return FieldError(absl::StatusCode::kFailedPrecondition, key,
                      StrCat("'", key, "' must be a positive integer, got ", *v));
  }
  return *v;
}

absl::StatusOr<std::optional<std::string>> OptString(const JsonView& body, std::string_view key) {
  const std::optional<JsonView> v = Field(body, key);
  if (v == std::nullopt) return std::optional<std::string>();
  if (!v->is_string()) return WrongType(key, "a string", *v);
  return std::optional<std::string>(std::string(v->as_string()));
}

absl::StatusOr<std::string> String(const JsonView& body, std::string_view key) {
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> v, OptString(body, key));
  if (!v) return Missing(key);
  return *std::move(v);
}

absl::Status CheckCount(size_t count, std::string_view field, std::string_view what,
                        const ApiLimits& limits) {
  if (count == 0) {
    return FieldError(absl::StatusCode::kInvalidArgument, field,
                      StrCat("'", field, "' is empty: send at least one ", what), Reason::kEmpty);
  }
  if (static_cast<int64_t>(count) > limits.max_inputs) {
    return FieldError(
        absl::StatusCode::kOutOfRange, field,
        StrCat("'", field, "' has ", count, " ", what, "s; this server takes at most ",
               limits.max_inputs, " per request (--max-inputs)"),
        Reason::kTooManyInputs);
  }
  return absl::OkStatus();
}

// A string, or a list of strings (`what` names one item in messages).
absl::StatusOr<std::vector<std::string>> Strings(const JsonView& v, std::string_view field,
                                                 std::string_view what, const ApiLimits& limits) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.emplace_back(v.as_string());
    return out;
  }
  if (!v.is_array()) return WrongType(field, "a string or a list of strings", v);
  const JsonView::Items items = v.items();
  QUIVER_RETURN_IF_ERROR(CheckCount(items.size(), field, what, limits));
  out.reserve(items.size());
  size_t i = 0;
  for (const JsonView item : items) {
    if (!item.is_string()) return WrongType(StrCat(field, "[", i, "]"), "a string", item);
    out.emplace_back(item.as_string());
    ++i;
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> RequiredStrings(const JsonView& body, std::string_view key,
                                                         std::string_view what,
                                                         const ApiLimits& limits) {
  const std::optional<JsonView> v = Field(body, key);
  if (v == std::nullopt) return Missing(key);
  return Strings(*v, key, what, limits);
}

// A list of token ids, each in [0, 2^31).
absl::StatusOr<std::vector<uint32_t>> TokenIds(const JsonView& v, std::string_view field) {
  if (!v.is_array()) return WrongType(field, "a list of token ids", v);
  std::vector<uint32_t> ids;
  const JsonView::Items items = v.items();
  ids.reserve(items.size());
  size_t i = 0;
  for (const JsonView item : items) {
    const std::optional<int64_t> id = AsInteger(item);
    if (!id) return WrongType(StrCat(field, "[", i, "]"), "an integer token id", item);
    if (*id < 0 || *id > std::numeric_limits<int32_t>::max()) {
      return FieldError(absl::StatusCode::kFailedPrecondition, field,
                        StrCat("'", field, "[", i, "]': token id ", *id, " is not a valid id"));
    }
    ids.push_back(static_cast<uint32_t>(*id));
    ++i;
  }
  return ids;
}

bool IsIdList(const JsonView& v) {
  if (!v.is_array()) return false;
  const JsonView::Items items = v.items();
  return !items.empty() && (*items.begin()).is_number();
}

// TEI's and OpenAI's inputs: a string, a list of token ids, or a list whose items are each a
// string or a list of token ids.
absl::StatusOr<std::vector<Input>> Inputs(const JsonView& body, std::string_view key,
                                          const ApiLimits& limits) {
  const std::optional<JsonView> v = Field(body, key);
  if (v == std::nullopt) return Missing(key);
  std::vector<Input> out;
  if (v->is_string()) {
    out.push_back({std::string(v->as_string()), {}, false});
    return out;
  }
  if (!v->is_array()) {
    return WrongType(key, "a string, a list of strings, or token ids (a list or a list of lists)",
                     *v);
  }
  if (IsIdList(*v)) {
    QUIVER_ASSIGN_OR_RETURN(std::vector<uint32_t> ids, TokenIds(*v, key));
    out.push_back({"", std::move(ids), true});
    return out;
  }
  const JsonView::Items items = v->items();
  QUIVER_RETURN_IF_ERROR(CheckCount(items.size(), key, "input", limits));
  out.reserve(items.size());
  size_t i = 0;
  for (const JsonView item : items) {
    const std::string field = StrCat(key, "[", i++, "]");
    if (item.is_string()) {
      out.push_back({std::string(item.as_string()), {}, false});
    } else if (item.is_array()) {
      QUIVER_ASSIGN_OR_RETURN(std::vector<uint32_t> ids, TokenIds(item, field));
      if (ids.empty()) {
        return FieldError(absl::StatusCode::kInvalidArgument, field,
                          StrCat("'", field, "' is an empty list of token ids"), Reason::kEmpty);
      }
      out.push_back({"", std::move(ids), true});
    } else {
      return WrongType(field, "a string or a list of token ids", item);
    }
  }
  return out;
}

// TEI's truncate + truncation_direction ("Left" / "Right", either case).
absl::StatusOr<TruncationRequest> TeiTruncation(const JsonView& body) {
  TruncationRequest t;
  QUIVER_ASSIGN_OR_RETURN(t.enabled, OptBool(body, "truncate"));
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> direction,
                          OptString(body, "truncation_direction"));
  if (direction) {
    if (*direction == "Right" || *direction == "right") {
      t.side = TruncationSide::kRight;
    } else if (*direction == "Left" || *direction == "left") {
      t.side = TruncationSide::kLeft;
    } else {
      return FieldError(
          absl::StatusCode::kFailedPrecondition, "truncation_direction",
          StrCat("'truncation_direction' must be Right or Left, got '", *direction, "'"));
    }
  }
  return t;
}

// vLLM's truncate_prompt_tokens: -1 cuts to the model's limit, k > 0 to k tokens.
absl::Status VllmTruncation(const JsonView& body, TruncationRequest& t) {
  t.ask = "\"truncate_prompt_tokens\": -1";
  QUIVER_ASSIGN_OR_RETURN(std::optional<int64_t> k, OptInt(body, "truncate_prompt_tokens"));
  if (!k) return absl::OkStatus();
  t.ids_side = TruncationSide::kLeft;  // vLLM keeps a token-id prompt's last k ids
  if (*k == -1) {
    t.enabled = true;
  } else if (*k > 0) {
    t.enabled = true;
    t.max_tokens = *k;
  } else {
    return FieldError(absl::StatusCode::kFailedPrecondition, "truncate_prompt_tokens",
                      StrCat("'truncate_prompt_tokens' must be -1 (the model's limit) or a "
                             "positive integer, got ",
                             *k));
  }
  return absl::OkStatus();
}

// vLLM's truncation_side ("left" or "right"): which end truncation cuts, for texts and token ids.
absl::Status VllmTruncationSide(const JsonView& body, TruncationRequest& t) {
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> side, OptString(body, "truncation_side"));
  if (!side) return absl::OkStatus();
  if (*side != "left" && *side != "right") {
    return FieldError(absl::StatusCode::kFailedPrecondition, "truncation_side",
                      StrCat("'truncation_side' must be left or right, got '", *side, "'"));
  }
  t.side = *side == "left" ? TruncationSide::kLeft : TruncationSide::kRight;
  t.ids_side.reset();
  return absl::OkStatus();
}

// One boolean under several names (a field and its earlier names): unset when none is sent,
// 422 naming the second when two disagree.
absl::StatusOr<std::optional<bool>> AgreeingBool(const JsonView& body,
                                                 std::initializer_list<std::string_view> names) {
  std::optional<bool> value;
  std::string_view first;
  for (std::string_view name : names) {
    QUIVER_ASSIGN_OR_RETURN(std::optional<bool> v, OptBool(body, name));
    if (!v) continue;
    if (value && *v != *value) {
      return FieldError(absl::StatusCode::kFailedPrecondition, name,
                        StrCat("'", name, "' disagrees with '", first, "'"));
    }
    if (!value) first = name;
    value = v;
  }
  return value;
}

// OpenAI's encoding_format, with quiver's and Perplexity's base64_int8 and base64_binary.
absl::StatusOr<EmbeddingFormat> Format(const JsonView& body, EmbeddingFormat fallback) {
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> f, OptString(body, "encoding_format"));
  if (!f) return fallback;
  if (*f == "float") return EmbeddingFormat::kFloatList;
  if (*f == "base64") return EmbeddingFormat::kBase64F32;
  if (*f == "base64_int8") return EmbeddingFormat::kBase64Int8;
  if (*f == "base64_binary") return EmbeddingFormat::kBase64Binary;
  return FieldError(absl::StatusCode::kFailedPrecondition, "encoding_format",
                    StrCat("'encoding_format' must be float, base64, base64_int8 or "
                           "base64_binary, got '",
                           *f, "'"));
}

absl::StatusOr<std::string> Model(const JsonView& body) {
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> m, OptString(body, "model"));
  return m.value_or("");
}

// Rerank documents: strings, or objects with a "text" string (Cohere v1's form).
absl::StatusOr<std::vector<std::string>> Documents(const JsonView& v, std::string_view field,
                                                   const ApiLimits& limits) {
  if (!v.is_array()) return WrongType(field, "a list of strings or of {\"text\": ...} objects", v);
  const JsonView::Items items = v.items();
  QUIVER_RETURN_IF_ERROR(CheckCount(items.size(), field, "document", limits));
  std::vector<std::string> out;
  out.reserve(items.size());
  size_t i = 0;
  for (const JsonView item : items) {
    const std::string name = StrCat(field, "[", i++, "]");
    if (item.is_string()) {
      out.emplace_back(item.as_string());
    } else if (item.is_object()) {
      const std::optional<JsonView> text = item.Find("text");
      if (!text || !text->is_string()) {
        return FieldError(absl::StatusCode::kFailedPrecondition, name,
                          StrCat("'", name, "' must have a string field 'text'"));
      }
      out.emplace_back(text->as_string());
    } else {
      return WrongType(name, "a string or a {\"text\": ...} object", item);
    }
  }
  return out;
}

// TEI refuses an empty text ("`inputs` cannot be empty", 400 Empty): it has nothing to embed.
absl::Status NoEmptyText(const std::vector<std::string>& texts, std::string_view field) {
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].empty()) {
      return FieldError(absl::StatusCode::kInvalidArgument, field,
                        texts.size() == 1 ? StrCat("'", field, "' is an empty string")
                                          : StrCat("'", field, "[", i, "]' is an empty string"),
                        Reason::kEmpty);
    }
  }
  return absl::OkStatus();
}

// Jina's embedding_type: float or base64 (its binary forms are this server's base64_binary),
// over `format` from encoding_format, which must then agree.
absl::Status JinaEmbeddingType(const JsonView& body, EmbeddingFormat& format) {
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> type, OptString(body, "embedding_type"));
  if (type) {
    const std::optional<EmbeddingFormat> as = *type == "float" ? EmbeddingFormat::kFloatList
                                              : *type == "base64"
                                                  ? EmbeddingFormat::kBase64F32
                                                  : std::optional<EmbeddingFormat>();
    if (!as) {
      return FieldError(absl::StatusCode::kFailedPrecondition, "embedding_type",
                        StrCat("'embedding_type' must be float or base64, got '", *type,
                               "' (bits: 'encoding_format': 'base64_binary')"));
    }
    if (Field(body, "encoding_format") && *as != format) {
      return FieldError(absl::StatusCode::kFailedPrecondition, "embedding_type",
                        "'embedding_type' and 'encoding_format' ask for different forms");
    }
    format = *as;
  }
  return absl::OkStatus();
}

// vLLM's embed_dtype (float32, float16, bfloat16) and endianness (native, little, big): the
// bytes "base64" carries per value.
absl::Status VllmBase64Layout(const JsonView& body, Base64Layout& layout) {
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> dtype, OptString(body, "embed_dtype"));
  if (dtype) {
    if (*dtype == "float32") {
      layout.values = Base64Values::kF32;
    } else if (*dtype == "float16") {
      layout.values = Base64Values::kF16;
    } else if (*dtype == "bfloat16") {
      layout.values = Base64Values::kBf16;
    } else {
      return FieldError(
          absl::StatusCode::kFailedPrecondition, "embed_dtype",
          StrCat("'embed_dtype' must be float32, float16 or bfloat16, got '", *dtype, "'"));
    }
  }
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> endianness, OptString(body, "endianness"));
  if (endianness) {
    if (*endianness != "native" && *endianness != "little" && *endianness != "big") {
      return FieldError(
          absl::StatusCode::kFailedPrecondition, "endianness",
          StrCat("'endianness' must be native, little or big, got '", *endianness, "'"));
    }
    // native: this server's, little-endian on every host it builds for.
    layout.big_endian = *endianness == "big";
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EmbedRequest> ParseOpenAiEmbed(const JsonView& body, const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  EmbedRequest r;
  QUIVER_ASSIGN_OR_RETURN(r.model, Model(body));
  QUIVER_ASSIGN_OR_RETURN(r.inputs, Inputs(body, "input", limits));
  QUIVER_ASSIGN_OR_RETURN(r.format, Format(body, EmbeddingFormat::kFloatList));
  QUIVER_ASSIGN_OR_RETURN(r.dimensions, PositiveInt(body, "dimensions"));
  // OpenAI re-normalizes shortened embeddings; without dimensions the model's default holds.
  if (r.dimensions > 0) r.normalize = true;
  // Extensions its clients send with extra_body: truncate (as TEI's), truncate_prompt_tokens
  // (as vLLM's), prompt_name.
  QUIVER_ASSIGN_OR_RETURN(r.truncation.enabled, OptBool(body, "truncate"));
  const std::optional<bool> truncate = r.truncation.enabled;
  QUIVER_RETURN_IF_ERROR(VllmTruncation(body, r.truncation));
  r.truncation.ask = "\"truncate\": true or \"truncate_prompt_tokens\": -1";
  if (truncate == false && r.truncation.enabled == true) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "truncate_prompt_tokens",
                      "'truncate_prompt_tokens' asks for truncation and 'truncate' is false");
  }
  QUIVER_RETURN_IF_ERROR(VllmTruncationSide(body, r.truncation));
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> prompt, OptString(body, "prompt_name"));
  // Jina's task names the model's prompt of that name (its sentence-transformers folders name
  // them retrieval.query, retrieval.passage, ...).
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> task, OptString(body, "task"));
  if (task && prompt && *task != *prompt) {
    return FieldError(
        absl::StatusCode::kFailedPrecondition, "task",
        StrCat("'task' '", *task, "' and 'prompt_name' '", *prompt, "' name different prompts"));
  }
  r.prompt_name = prompt ? *prompt : task.value_or("");
  if (const std::optional<JsonView> user = Field(body, "user"); user && !user->is_string()) {
    return WrongType("user", "a string", *user);
  }
  // Jina's embedding_type and late_chunking.
  QUIVER_RETURN_IF_ERROR(JinaEmbeddingType(body, r.format));
  QUIVER_ASSIGN_OR_RETURN(r.late_chunking, Bool(body, "late_chunking", false));
  if (r.late_chunking) {
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      if (r.inputs[i].is_ids || r.inputs[i].text.empty()) {
        return FieldError(absl::StatusCode::kInvalidArgument, "input",
                          StrCat("late_chunking: input ", i,
                                 " must be a non-empty text (the chunks of one text)"));
      }
    }
  }
  // Infinity's modality: text is all this server embeds.
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> modality, OptString(body, "modality"));
  if (modality && *modality != "text") {
    return FieldError(
        absl::StatusCode::kInvalidArgument, "modality",
        StrCat("'modality' '", *modality, "' is not served: this server embeds text"));
  }
  // vLLM's extensions: use_activation (for an embedding model, whether to normalize; its earlier
  // name normalize, also TEI's), add_special_tokens, and the bytes of "base64".
  QUIVER_ASSIGN_OR_RETURN(std::optional<bool> normalize,
                          AgreeingBool(body, {"use_activation", "normalize", "normalized"}));
  if (normalize) r.normalize = normalize;
  QUIVER_ASSIGN_OR_RETURN(r.add_special_tokens, Bool(body, "add_special_tokens", true));
  QUIVER_RETURN_IF_ERROR(VllmBase64Layout(body, r.base64));
  if (r.late_chunking && (!r.prompt_name.empty() || normalize || !r.add_special_tokens)) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "late_chunking",
                      "late_chunking embeds the chunks as /v1/contextualizedembeddings does: "
                      "without a prompt (prompt_name, task), with the model's own normalization "
                      "and its special tokens");
  }
  return r;
}

absl::StatusOr<EmbedRequest> ParseTeiEmbed(const JsonView& body, const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  EmbedRequest r;
  QUIVER_ASSIGN_OR_RETURN(r.inputs, Inputs(body, "inputs", limits));
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (!r.inputs[i].is_ids && r.inputs[i].text.empty()) {
      return FieldError(absl::StatusCode::kInvalidArgument, "inputs",
                        r.inputs.size() == 1 ? std::string("'inputs' is an empty string")
                                             : StrCat("'inputs[", i, "]' is an empty string"),
                        Reason::kEmpty);
    }
  }
  QUIVER_ASSIGN_OR_RETURN(r.truncation, TeiTruncation(body));
  QUIVER_ASSIGN_OR_RETURN(bool normalize, Bool(body, "normalize", true));
  r.normalize = normalize;
  QUIVER_ASSIGN_OR_RETURN(r.dimensions, PositiveInt(body, "dimensions"));
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> prompt, OptString(body, "prompt_name"));
  r.prompt_name = prompt.value_or("");
  return r;
}

namespace {

// Cohere's texts; images and mixed inputs refused naming the field.
absl::StatusOr<std::vector<std::string>> CohereTexts(const JsonView& body,
                                                     const ApiLimits& limits) {
  const std::optional<JsonView> texts_json = Field(body, "texts");
  if (texts_json == std::nullopt) {
    for (std::string_view other : {"images", "inputs"}) {
      if (Field(body, other)) {
        return FieldError(absl::StatusCode::kInvalidArgument, other,
                          StrCat("'", other,
                                 "' (image or mixed content) is not served: this "
                                 "server embeds text; send 'texts'"));
      }
    }
    return Missing("texts");
  }
  if (!texts_json->is_array()) return WrongType("texts", "a list of strings", *texts_json);
  return Strings(*texts_json, "texts", "text", limits);
}

// Cohere's input_type, one of its four values; "" when absent.
absl::StatusOr<std::string> CohereInputType(const JsonView& body) {
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> input_type, OptString(body, "input_type"));
  if (input_type) {
    static constexpr std::string_view kTypes[] = {"search_document", "search_query",
                                                  "classification", "clustering"};
    bool known = false;
    for (std::string_view t : kTypes) known = known || *input_type == t;
    if (!known) {
      return FieldError(absl::StatusCode::kFailedPrecondition, "input_type",
                        StrCat("'input_type' must be search_document, search_query, "
                               "classification or clustering, got '",
                               *input_type, "'"));
    }
  }
  return input_type.value_or("");
}

// Cohere's embedding_types, each once, in the order asked.
absl::StatusOr<std::vector<CohereEmbeddingType>> CohereEmbeddingTypes(const JsonView& body) {
  std::vector<CohereEmbeddingType> out;
  if (const std::optional<JsonView> types = Field(body, "embedding_types")) {
    if (!types->is_array()) return WrongType("embedding_types", "a list of strings", *types);
    size_t i = 0;
    for (const JsonView t : types->items()) {
      const std::string field = StrCat("embedding_types[", i++, "]");
      if (!t.is_string()) return WrongType(field, "a string", t);
      const std::string_view s = t.as_string();
      CohereEmbeddingType type;
      if (s == "float") {
        type = CohereEmbeddingType::kFloat;
      } else if (s == "int8") {
        type = CohereEmbeddingType::kInt8;
      } else if (s == "uint8") {
        type = CohereEmbeddingType::kUint8;
      } else if (s == "binary") {
        type = CohereEmbeddingType::kBinary;
      } else if (s == "ubinary") {
        type = CohereEmbeddingType::kUbinary;
      } else {
        return FieldError(absl::StatusCode::kFailedPrecondition, field,
                          StrCat("'", field,
                                 "' must be float, int8, uint8, binary or ubinary, "
                                 "got '",
                                 s, "'"));
      }
      bool seen = false;
      for (CohereEmbeddingType e : out) seen = seen || e == type;
      if (!seen) out.push_back(type);
    }
  }
  return out;
}

// Cohere's truncate: NONE refuses over-long texts, START cuts their start, END (the default)
// their end.
absl::StatusOr<TruncationRequest> CohereTruncation(const JsonView& body) {
  TruncationRequest truncation;
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> truncate, OptString(body, "truncate"));
  const std::string mode = truncate.value_or("END");
  if (mode == "END") {
    truncation.enabled = true;
  } else if (mode == "START") {
    truncation.enabled = true;
    truncation.side = TruncationSide::kLeft;
  } else if (mode == "NONE") {
    truncation.enabled = false;
    truncation.ask = "\"truncate\": \"END\"";
  } else {
    return FieldError(absl::StatusCode::kFailedPrecondition, "truncate",
                      StrCat("'truncate' must be NONE, START or END, got '", mode, "'"));
  }
  return truncation;
}

}  // namespace

absl::StatusOr<EmbedRequest> ParseCohereEmbed(const JsonView& body, const ApiLimits& limits,
                                              int version) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  EmbedRequest r;
  QUIVER_ASSIGN_OR_RETURN(r.model, Model(body));
  QUIVER_ASSIGN_OR_RETURN(std::vector<std::string> texts, CohereTexts(body, limits));
  for (std::string& t : texts) r.inputs.push_back({std::move(t), {}, false});
  QUIVER_ASSIGN_OR_RETURN(r.input_type, CohereInputType(body));
  QUIVER_ASSIGN_OR_RETURN(r.embedding_types, CohereEmbeddingTypes(body));
  // v2 always answers by type; floats when none were asked for.
  if (version >= 2 && r.embedding_types.empty()) {
    r.embedding_types.push_back(CohereEmbeddingType::kFloat);
  }
  QUIVER_ASSIGN_OR_RETURN(r.truncation, CohereTruncation(body));
  QUIVER_ASSIGN_OR_RETURN(r.dimensions, PositiveInt(body, "output_dimension"));
  // v2's max_tokens (read on v1's route too): each text's first (START: last) max_tokens
  // tokens, or, with truncate NONE, a text longer than that refused. The model's own limit caps
  // it (Api::CohereEmbed).
  QUIVER_ASSIGN_OR_RETURN(r.truncation.max_tokens, PositiveInt(body, "max_tokens"));
  if (r.truncation.max_tokens > std::numeric_limits<int32_t>::max()) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "max_tokens",
                      StrCat("'max_tokens' ", r.truncation.max_tokens, " is past 2^31 - 1"));
  }
  return r;
}

absl::StatusOr<ContextualizedRequest> ParseContextualized(const JsonView& body,
                                                          const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  ContextualizedRequest r;
  QUIVER_ASSIGN_OR_RETURN(r.model, Model(body));
  const std::optional<JsonView> input = Field(body, "input");
  if (input == std::nullopt) return Missing("input");
  if (!input->is_array()) {
    return WrongType("input", "a list of documents (lists of strings)", *input);
  }
  QUIVER_RETURN_IF_ERROR(CheckCount(input->items().size(), "input", "document", limits));
  int64_t chunks = 0;
  size_t d = 0;
  for (const JsonView doc : input->items()) {
    const std::string field = StrCat("input[", d++, "]");
    if (!doc.is_array()) return WrongType(field, "a list of chunk strings", doc);
    const JsonView::Items doc_items = doc.items();
    if (doc_items.empty()) {
      return FieldError(absl::StatusCode::kInvalidArgument, field,
                        StrCat("'", field, "' has no chunks"), Reason::kEmpty);
    }
    chunks += static_cast<int64_t>(doc_items.size());
    if (chunks > limits.max_inputs) {
      return FieldError(
          absl::StatusCode::kOutOfRange, "input",
          StrCat("'input' has more than ", limits.max_inputs, " chunks; this server takes at most ",
                 limits.max_inputs, " per request (--max-inputs)"),
          Reason::kTooManyInputs);
    }
    std::vector<std::string> texts;
    size_t j = 0;
    for (const JsonView chunk : doc_items) {
      if (!chunk.is_string()) return WrongType(StrCat(field, "[", j, "]"), "a string", chunk);
      texts.emplace_back(chunk.as_string());
      ++j;
    }
    r.documents.push_back(std::move(texts));
  }
  QUIVER_ASSIGN_OR_RETURN(r.dimensions, PositiveInt(body, "dimensions"));
  QUIVER_ASSIGN_OR_RETURN(r.format, Format(body, EmbeddingFormat::kBase64Int8));
  return r;
}

absl::StatusOr<RerankRequest> ParseRerank(const JsonView& body, const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  RerankRequest r;
  QUIVER_ASSIGN_OR_RETURN(r.model, Model(body));
  QUIVER_ASSIGN_OR_RETURN(r.query, String(body, "query"));
  if (const std::optional<JsonView> texts = Field(body, "texts")) {
    // TEI: texts, raw_scores, return_text, truncate, truncation_direction.
    if (!texts->is_array()) return WrongType("texts", "a list of strings", *texts);
    QUIVER_ASSIGN_OR_RETURN(r.documents, Strings(*texts, "texts", "text", limits));
    QUIVER_ASSIGN_OR_RETURN(r.return_documents, Bool(body, "return_text", false));
    QUIVER_ASSIGN_OR_RETURN(r.truncation, TeiTruncation(body));
  } else if (const std::optional<JsonView> docs = Field(body, "documents")) {
    // Cohere, vLLM, Jina: documents, top_n, return_documents (vLLM always returns them).
    QUIVER_ASSIGN_OR_RETURN(r.documents, Documents(*docs, "documents", limits));
    QUIVER_ASSIGN_OR_RETURN(r.return_documents, Bool(body, "return_documents", true));
    QUIVER_RETURN_IF_ERROR(VllmTruncation(body, r.truncation));
    QUIVER_ASSIGN_OR_RETURN(const std::optional<bool> truncate, OptBool(body, "truncate"));
    if (truncate) r.truncation.enabled = truncate;
    r.truncation.ask = "\"truncate\": true or \"truncate_prompt_tokens\": -1";
    QUIVER_ASSIGN_OR_RETURN(r.max_tokens_per_doc, PositiveInt(body, "max_tokens_per_doc"));
  } else {
    return FieldError(absl::StatusCode::kFailedPrecondition, "texts",
                      "missing field 'texts' (TEI) or 'documents' (Cohere, vLLM)");
  }
  QUIVER_ASSIGN_OR_RETURN(r.raw_scores, Bool(body, "raw_scores", false));
  // vLLM's use_activation (false: the logits, as raw_scores asks).
  QUIVER_ASSIGN_OR_RETURN(std::optional<bool> activation,
                          AgreeingBool(body, {"use_activation", "activation", "softmax"}));
  if (activation && Field(body, "raw_scores") && *activation == r.raw_scores) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "use_activation",
                      "'use_activation' and 'raw_scores' disagree");
  }
  if (activation) r.raw_scores = !*activation;
  if (const std::optional<JsonView> top_n = Field(body, "top_n")) {
    const std::optional<int64_t> n = AsInteger(*top_n);
    if (!n || *n < 0) {
      return FieldError(
          absl::StatusCode::kFailedPrecondition, "top_n",
          StrCat("'top_n' must be a positive integer (or 0: every document, as vLLM reads it), "
                 "got ",
                 n                    ? StrCat(*n)
                 : top_n->is_number() ? StrCat(top_n->as_double())
                                      : std::string(JsonValue::TypeName(top_n->type()))));
    }
    if (*n > 0) r.top_n = *n;  // 0: vLLM's default, every document
  }
  return r;
}

absl::StatusOr<ScoreRequest> ParseScore(const JsonView& body, const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  ScoreRequest r;
  QUIVER_ASSIGN_OR_RETURN(r.model, Model(body));
  // vLLM's four spellings of the two sides: text_1 / text_2, queries / documents, queries /
  // items, data_1 / data_2 (text only).
  std::string_view first = "text_1", second = "text_2";
  if (Field(body, "queries")) {
    first = "queries";
    second = Field(body, "items") && !Field(body, "documents") ? "items" : "documents";
  } else if (Field(body, "data_1")) {
    first = "data_1";
    second = "data_2";
  }
  QUIVER_ASSIGN_OR_RETURN(r.text_1, RequiredStrings(body, first, "text", limits));
  QUIVER_ASSIGN_OR_RETURN(r.text_2, RequiredStrings(body, second, "text", limits));
  if (r.text_1.size() != 1 && r.text_1.size() != r.text_2.size()) {
    return FieldError(absl::StatusCode::kFailedPrecondition, first,
                      StrCat("'", first, "' must be one text or as many as '", second, "' (",
                             r.text_2.size(), "), got ", r.text_1.size()));
  }
  QUIVER_RETURN_IF_ERROR(VllmTruncation(body, r.truncation));
  QUIVER_ASSIGN_OR_RETURN(std::optional<bool> activation,
                          AgreeingBool(body, {"use_activation", "activation", "softmax"}));
  r.activation = activation.value_or(true);
  return r;
}

absl::StatusOr<SimilarityRequest> ParseSimilarity(const JsonView& body, const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  SimilarityRequest r;
  const std::optional<JsonView> inputs = Field(body, "inputs");
  if (inputs == std::nullopt) return Missing("inputs");
  if (!inputs->is_object()) {
    return WrongType("inputs", "an object with source_sentence and sentences", *inputs);
  }
  QUIVER_ASSIGN_OR_RETURN(r.source_sentence, String(*inputs, "source_sentence"));
  const std::optional<JsonView> sentences = Field(*inputs, "sentences");
  if (sentences == std::nullopt) return Missing("sentences");
  if (!sentences->is_array()) return WrongType("sentences", "a list of strings", *sentences);
  // The source sentence is embedded with them.
  QUIVER_ASSIGN_OR_RETURN(r.sentences, Strings(*sentences, "sentences", "sentence", limits));
  QUIVER_RETURN_IF_ERROR(NoEmptyText({r.source_sentence}, "source_sentence"));
  QUIVER_RETURN_IF_ERROR(NoEmptyText(r.sentences, "sentences"));
  if (static_cast<int64_t>(r.sentences.size()) + 1 > limits.max_inputs) {
    return FieldError(absl::StatusCode::kOutOfRange, "sentences",
                      StrCat("'sentences' has ", r.sentences.size(),
                             " sentences; with the source sentence this server takes at most ",
                             limits.max_inputs, " per request (--max-inputs)"),
                      Reason::kTooManyInputs);
  }
  if (const std::optional<JsonView> params = Field(body, "parameters")) {
    if (!params->is_object()) return WrongType("parameters", "an object", *params);
    QUIVER_ASSIGN_OR_RETURN(r.truncation, TeiTruncation(*params));
    QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> prompt, OptString(*params, "prompt_name"));
    r.prompt_name = prompt.value_or("");
  }
  r.truncation.ask = "\"parameters\": {\"truncate\": true}";
  return r;
}

absl::StatusOr<TokenizeRequest> ParseTokenize(const JsonView& body, const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  TokenizeRequest r;
  QUIVER_ASSIGN_OR_RETURN(r.texts, RequiredStrings(body, "inputs", "input", limits));
  QUIVER_RETURN_IF_ERROR(NoEmptyText(r.texts, "inputs"));
  QUIVER_ASSIGN_OR_RETURN(r.add_special_tokens, Bool(body, "add_special_tokens", true));
  QUIVER_ASSIGN_OR_RETURN(std::optional<std::string> prompt, OptString(body, "prompt_name"));
  r.prompt_name = prompt.value_or("");
  return r;
}

absl::StatusOr<PredictRequest> ParsePredict(const JsonView& body, const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  PredictRequest r;
  const std::optional<JsonView> inputs = Field(body, "inputs");
  if (!inputs) return Missing("inputs");
  // One sequence: a text, or a list of one or two texts.
  const auto sequence = [](const JsonView& v,
                           const std::string& field) -> absl::StatusOr<PredictInput> {
    if (v.is_string()) return PredictInput{std::string(v.as_string()), std::nullopt};
    const JsonView::Items items = v.items();
    if (!v.is_array() || items.empty() || items.size() > 2) {
      return WrongType(field, "a text, or a list of one text or of two (a pair)", v);
    }
    PredictInput in;
    size_t k = 0;
    for (const JsonView item : items) {
      if (!item.is_string()) return WrongType(StrCat(field, "[", k, "]"), "a string", item);
      if (k++ == 0) {
        in.text = std::string(item.as_string());
      } else {
        in.pair = std::string(item.as_string());
      }
    }
    return in;
  };
  const bool all_strings = [&] {
    if (!inputs->is_array()) return false;
    for (const JsonView item : inputs->items()) {
      if (!item.is_string()) return false;
    }
    return true;
  }();
  if (inputs->is_string() || (all_strings && inputs->items().size() == 2)) {
    QUIVER_ASSIGN_OR_RETURN(PredictInput in, sequence(*inputs, "inputs"));
    r.inputs.push_back(std::move(in));
  } else if (inputs->is_array()) {
    const JsonView::Items items = inputs->items();
    QUIVER_RETURN_IF_ERROR(CheckCount(items.size(), "inputs", "input", limits));
    r.batch = true;
    size_t i = 0;
    for (const JsonView item : items) {
      QUIVER_ASSIGN_OR_RETURN(PredictInput in, sequence(item, StrCat("inputs[", i++, "]")));
      r.inputs.push_back(std::move(in));
    }
  } else {
    return WrongType("inputs", "a text, a pair of texts, or a list of them", *inputs);
  }
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (r.inputs[i].text.empty() || (r.inputs[i].pair && r.inputs[i].pair->empty())) {
      return FieldError(absl::StatusCode::kInvalidArgument, "inputs",
                        r.batch ? StrCat("'inputs[", i, "]' has an empty text")
                                : std::string("'inputs' has an empty text"),
                        Reason::kEmpty);
    }
  }
  QUIVER_ASSIGN_OR_RETURN(r.raw_scores, Bool(body, "raw_scores", false));
  QUIVER_ASSIGN_OR_RETURN(r.truncation, TeiTruncation(body));
  return r;
}

absl::StatusOr<ClassifyRequest> ParseClassify(const JsonView& body, const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  ClassifyRequest r;
  if (Field(body, "messages") && !Field(body, "input")) {
    return FieldError(absl::StatusCode::kInvalidArgument, "messages",
                      "'messages' (chat-style classification) is not supported: send 'input'");
  }
  QUIVER_ASSIGN_OR_RETURN(r.model, Model(body));
  QUIVER_ASSIGN_OR_RETURN(std::vector<Input> inputs, Inputs(body, "input", limits));
  const bool one = Field(body, "input")->is_string();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_ids && inputs[i].text.empty()) {
      return FieldError(absl::StatusCode::kInvalidArgument, "input",
                        one ? std::string("'input' is an empty string")
                            : StrCat("'input[", i, "]' is an empty string"),
                        Reason::kEmpty);
    }
    r.inputs.push_back(
        {std::move(inputs[i].text), std::nullopt, std::move(inputs[i].ids), inputs[i].is_ids});
  }
  QUIVER_RETURN_IF_ERROR(VllmTruncation(body, r.truncation));
  QUIVER_RETURN_IF_ERROR(VllmTruncationSide(body, r.truncation));
  // use_activation, or vLLM's earlier names for it (activation, softmax).
  QUIVER_ASSIGN_OR_RETURN(std::optional<bool> activation,
                          AgreeingBool(body, {"use_activation", "activation", "softmax"}));
  r.activation = activation.value_or(true);
  QUIVER_ASSIGN_OR_RETURN(r.add_special_tokens, Bool(body, "add_special_tokens", true));
  if (const std::optional<JsonView> user = Field(body, "user"); user && !user->is_string()) {
    return WrongType("user", "a string", *user);
  }
  QUIVER_ASSIGN_OR_RETURN(std::optional<int64_t> priority, OptInt(body, "priority"));
  if (priority.value_or(0) != 0) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "priority",
                      StrCat("'priority' ", *priority,
                             ": this server schedules first come, first served (only 0)"));
  }
  return r;
}

absl::StatusOr<VllmTokenizeRequest> ParseVllmTokenize(const JsonView& body) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  VllmTokenizeRequest r;
  if (Field(body, "messages") && !Field(body, "prompt")) {
    return FieldError(absl::StatusCode::kInvalidArgument, "messages",
                      "'messages' (chat-style tokenization) is not supported: send 'prompt'");
  }
  QUIVER_ASSIGN_OR_RETURN(r.model, Model(body));
  QUIVER_ASSIGN_OR_RETURN(r.prompt, String(body, "prompt"));
  QUIVER_ASSIGN_OR_RETURN(r.add_special_tokens, Bool(body, "add_special_tokens", true));
  QUIVER_ASSIGN_OR_RETURN(r.return_token_strs, Bool(body, "return_token_strs", false));
  return r;
}

absl::StatusOr<DecodeRequest> ParseVllmDetokenize(const JsonView& body, std::string* model) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  QUIVER_ASSIGN_OR_RETURN(*model, Model(body));
  const std::optional<JsonView> tokens = Field(body, "tokens");
  if (tokens == std::nullopt) return Missing("tokens");
  DecodeRequest r;
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint32_t> ids, TokenIds(*tokens, "tokens"));
  r.ids.push_back(std::move(ids));
  r.skip_special_tokens = false;
  r.field = "tokens";
  return r;
}

absl::StatusOr<DecodeRequest> ParseDecode(const JsonView& body, const ApiLimits& limits) {
  QUIVER_RETURN_IF_ERROR(CheckObject(body));
  DecodeRequest r;
  const std::optional<JsonView> ids = Field(body, "ids");
  if (ids == std::nullopt) return Missing("ids");
  if (!ids->is_array()) return WrongType("ids", "a list of token ids or a list of lists", *ids);
  const JsonView::Items items = ids->items();
  if (!items.empty() && (*items.begin()).is_array()) {
    QUIVER_RETURN_IF_ERROR(CheckCount(items.size(), "ids", "list", limits));
    size_t i = 0;
    for (const JsonView list_json : items) {
      QUIVER_ASSIGN_OR_RETURN(std::vector<uint32_t> list,
                              TokenIds(list_json, StrCat("ids[", i++, "]")));
      r.ids.push_back(std::move(list));
    }
  } else {
    QUIVER_ASSIGN_OR_RETURN(std::vector<uint32_t> list, TokenIds(*ids, "ids"));
    r.ids.push_back(std::move(list));
  }
  QUIVER_ASSIGN_OR_RETURN(r.skip_special_tokens, Bool(body, "skip_special_tokens", true));
  return r;
}

}  // namespace quiver::gateway::api
