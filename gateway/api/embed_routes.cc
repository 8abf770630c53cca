// The embedding routes: OpenAI's /v1/embeddings, Perplexity's contextualized embeddings, TEI's
// /embed, /embed_all, /embed_sparse, /similarity and POST / (by model kind), Cohere's /v1 and /v2
// embed.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/base64.h"
#include "common/half.h"
#include "common/json.h"
#include "common/json_writer.h"
#include "common/strings.h"
#include "gateway/api/answers.h"
#include "gateway/api/api.h"
#include "gateway/api/scores.h"

namespace quiver::gateway::api {
namespace {

// Row `i` of a result's packed rows.
std::string_view Row(const ReplicaResult& r, int64_t i) {
  const size_t row_bytes = r.data.size() / static_cast<size_t>(std::max<int64_t>(1, r.num_seqs));
  return std::string_view(r.data).substr(static_cast<size_t>(i) * row_bytes, row_bytes);
}

std::vector<float> Floats(std::string_view row) {
  std::vector<float> v(row.size() / sizeof(float));
  std::memcpy(v.data(), row.data(), v.size() * sizeof(float));
  return v;
}

quiver::v1::OutputType EngineType(EmbeddingFormat format) {
  switch (format) {
    case EmbeddingFormat::kFloatList:
    case EmbeddingFormat::kBase64F32:
      return quiver::v1::OUTPUT_F32;
    case EmbeddingFormat::kBase64Int8:
      return quiver::v1::OUTPUT_INT8;
    case EmbeddingFormat::kBase64Binary:
      return quiver::v1::OUTPUT_BINARY;
  }
  return quiver::v1::OUTPUT_F32;
}

// A row of little-endian f32 values in vLLM's embed_dtype and endianness.
std::string Reencoded(std::string_view row, const Base64Layout& layout) {
  const std::vector<float> values = Floats(row);
  const size_t width = layout.values == Base64Values::kF32 ? 4 : 2;
  std::string out(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    if (layout.values == Base64Values::kF32) {
      std::memcpy(&bits, &values[i], sizeof(bits));
    } else {
      bits = layout.values == Base64Values::kF16 ? FloatToHalf(values[i]) : FloatToBf16(values[i]);
    }
    for (size_t b = 0; b < width; ++b) {  // least significant byte first, then reversed if big
      const size_t at = layout.big_endian ? width - 1 - b : b;
      out[i * width + at] = static_cast<char>((bits >> (8 * b)) & 0xffu);
    }
  }
  return out;
}

// One embedding in OpenAI's forms: floats, or base64 of the row's bytes (for "base64", in the
// request's embed_dtype and endianness).
void WriteEmbedding(JsonWriter& w, std::string_view row, EmbeddingFormat format,
                    const Base64Layout& layout = {}) {
  if (format == EmbeddingFormat::kFloatList) {
    w.FloatArray(Floats(row));
  } else if (format == EmbeddingFormat::kBase64F32 &&
             (layout.values != Base64Values::kF32 || layout.big_endian)) {
    w.String(Base64(Reencoded(row, layout)));
  } else {
    w.String(Base64(row));
  }
}

void WriteUsage(JsonWriter& w, int64_t tokens) {
  w.Key("usage").BeginObject();
  w.Key("prompt_tokens").Int(tokens).Key("total_tokens").Int(tokens);
  w.EndObject();
}

}  // namespace

HttpResponse Api::OpenAiEmbeddings(const JsonView& body, Call& call) {
  absl::StatusOr<EmbedRequest> request = ParseOpenAiEmbed(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Embeddings> out;
  if (request->late_chunking) {  // Jina's: the inputs as the chunks of one document
    ContextualizedRequest document{request->model, {{}}, request->dimensions, request->format};
    for (const Input& in : request->inputs) document.documents[0].push_back(in.text);
    out = service_.EmbedContextualized(document, EngineType(request->format), call.context);
  } else {
    out = service_.Embed(*request, EngineType(request->format), call.context);
  }
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  JsonWriter w;
  w.BeginObject().Key("object").String("list").Key("data").BeginArray();
  for (int64_t i = 0; i < out->result.num_seqs; ++i) {
    w.BeginObject().Key("object").String("embedding").Key("index").Int(i).Key("embedding");
    WriteEmbedding(w, Row(out->result, i), request->format, request->base64);
    w.EndObject();
  }
  w.EndArray().Key("model").String(service_.model().name);
  WriteUsage(w, out->tokens);
  w.EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::Contextualized(const JsonView& body, Call& call) {
  absl::StatusOr<ContextualizedRequest> request = ParseContextualized(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Embeddings> out =
      service_.EmbedContextualized(*request, EngineType(request->format), call.context);
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  JsonWriter w;
  w.BeginObject().Key("object").String("list").Key("data").BeginArray();
  int64_t row = 0;
  for (size_t d = 0; d < request->documents.size(); ++d) {
    w.BeginObject().Key("object").String("list").Key("index").Int(static_cast<int64_t>(d));
    w.Key("data").BeginArray();
    for (size_t j = 0; j < request->documents[d].size(); ++j, ++row) {
      w.BeginObject().Key("object").String("embedding").Key("index").Int(static_cast<int64_t>(j));
      w.Key("embedding");
      WriteEmbedding(w, Row(out->result, row), request->format);
      w.EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray().Key("model").String(service_.model().name);
  WriteUsage(w, out->tokens);
  w.EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::TeiEmbed(const JsonView& body, Call& call) {
  absl::StatusOr<EmbedRequest> request = ParseTeiEmbed(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Embeddings> out = service_.Embed(*request, quiver::v1::OUTPUT_F32, call.context);
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  JsonWriter w;
  w.BeginArray();
  for (int64_t i = 0; i < out->result.num_seqs; ++i) w.FloatArray(Floats(Row(out->result, i)));
  w.EndArray();
  return Json(std::move(w).Take());
}

// TEI's /embed_all: per input, every token's embedding (the encoder's last hidden state, no
// pooling, no Dense modules, not normalized), the special tokens' and a prompt's included.
HttpResponse Api::TeiEmbedAll(const JsonView& body, Call& call) {
  for (const char* field : {"normalize", "dimensions"}) {
    if (const std::optional<JsonView> v = body.Find(field); v.has_value() && !v->is_null()) {
      return ErrorResponse(call.dialect,
                           FieldError(absl::StatusCode::kInvalidArgument, field,
                                      StrCat("'", field,
                                             "' does not apply to /embed_all, which answers each "
                                             "token's hidden state as the model computes it")));
    }
  }
  absl::StatusOr<EmbedRequest> request = ParseTeiEmbed(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<TokenEmbeddings> out = service_.EmbedAll(*request, call.context);
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  JsonWriter w;
  w.BeginArray();
  int64_t row = 0;
  for (const int64_t rows : out->rows) {
    w.BeginArray();
    for (int64_t i = 0; i < rows; ++i) w.FloatArray(Floats(Row(out->result, row++)));
    w.EndArray();
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

// TEI's POST /: a reranker's /rerank, an embedding model's /embed; as huggingface_hub's
// InferenceClient also posts sentence_similarity's {"inputs": {"source_sentence", ...}} there,
// that body shape goes to /similarity.
HttpResponse Api::TeiRoot(const JsonView& body, Call& call) {
  if (service_.model().can_score) return TeiRerank(body, call);
  if (service_.model().sparse_width > 0) return EmbedSparse(body, call);
  if (const std::optional<JsonView> inputs = body.Find("inputs"); inputs && inputs->is_object()) {
    return TeiSimilarity(body, call);
  }
  return TeiEmbed(body, call);
}

HttpResponse Api::TeiSimilarity(const JsonView& body, Call& call) {
  absl::StatusOr<SimilarityRequest> request = ParseSimilarity(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (!service_.model().can_embed) {
    return ErrorResponse(call.dialect,
                         FieldError(absl::StatusCode::kInvalidArgument, "",
                                    "/similarity needs an embedding model; this one scores "
                                    "(use /rerank)"));
  }
  EmbedRequest embed;
  embed.inputs.push_back({request->source_sentence, {}, false});
  for (const std::string& s : request->sentences) embed.inputs.push_back({s, {}, false});
  embed.truncation = request->truncation;
  embed.prompt_name = request->prompt_name;
  embed.normalize = true;  // cosine similarity
  absl::StatusOr<Embeddings> out = service_.Embed(embed, quiver::v1::OUTPUT_F32, call.context);
  if (!out.ok()) return ErrorResponse(call.dialect, out.status());
  const std::vector<float> source = Floats(Row(out->result, 0));
  JsonWriter w;
  w.BeginArray();
  for (int64_t i = 1; i < out->result.num_seqs; ++i) {
    const std::vector<float> v = Floats(Row(out->result, i));
    w.Float(Dot(source.data(), v.data(), v.size()));
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

// ---- Cohere embed ------------------------------------------------------------------------------

namespace {

// The prompt Cohere's input_type asks for, where the model has one of that purpose: "query" for
// search_query, "document" or else "passage" for search_document; "" otherwise.
std::string CoherePromptName(const std::string& input_type,
                             const std::map<std::string, std::string>& prompts) {
  if (input_type == "search_query" && prompts.contains("query")) return "query";
  if (input_type == "search_document") {
    for (const char* name : {"document", "passage"}) {
      if (prompts.contains(name)) return name;
    }
  }
  return "";
}

// e's rows as arrays of integers: each byte (signed or not) plus `offset`.
void WriteByteRows(JsonWriter& w, const Embeddings& e, int offset, bool is_signed) {
  w.BeginArray();
  for (int64_t i = 0; i < e.result.num_seqs; ++i) {
    w.BeginArray();
    for (char c : Row(e.result, i)) {
      const int v = is_signed ? static_cast<int>(static_cast<int8_t>(c))
                              : static_cast<int>(static_cast<uint8_t>(c));
      w.Int(v + offset);
    }
    w.EndArray();
  }
  w.EndArray();
}

// Cohere's embeddings_by_type object: one key per type asked for, from the engine's encoding
// that carries it (floats; int8 for int8 and uint8; bits for binary and ubinary).
void WriteCohereEmbeddingsByType(JsonWriter& w, const std::vector<CohereEmbeddingType>& types,
                                 const std::optional<Embeddings>& f32,
                                 const std::optional<Embeddings>& int8,
                                 const std::optional<Embeddings>& bits) {
  w.BeginObject();
  for (CohereEmbeddingType t : types) {
    switch (t) {
      case CohereEmbeddingType::kFloat:
        w.Key("float").BeginArray();
        for (int64_t i = 0; i < f32->result.num_seqs; ++i) {
          w.FloatArray(Floats(Row(f32->result, i)));
        }
        w.EndArray();
        break;
      case CohereEmbeddingType::kInt8:
        w.Key("int8");
        WriteByteRows(w, *int8, 0, true);
        break;
      case CohereEmbeddingType::kUint8:
        w.Key("uint8");
        WriteByteRows(w, *int8, 128, true);
        break;
      case CohereEmbeddingType::kBinary:
        w.Key("binary");
        WriteByteRows(w, *bits, -128, false);
        break;
      case CohereEmbeddingType::kUbinary:
        w.Key("ubinary");
        WriteByteRows(w, *bits, 0, false);
        break;
    }
  }
  w.EndObject();
}

}  // namespace

HttpResponse Api::CohereEmbedV1(const JsonView& body, Call& call) {
  return CohereEmbed(body, call, 1);
}
HttpResponse Api::CohereEmbedV2(const JsonView& body, Call& call) {
  return CohereEmbed(body, call, 2);
}

HttpResponse Api::CohereEmbed(const JsonView& body, Call& call, int version) {
  absl::StatusOr<EmbedRequest> request = ParseCohereEmbed(body, service_.limits(), version);
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  request->truncation.max_tokens =
      std::min(request->truncation.max_tokens, service_.model().max_input_tokens);
  // input_type picks the model's own prompt of that purpose where it has one.
  if (std::string name = CoherePromptName(request->input_type, service_.model().prompts);
      !name.empty()) {
    request->prompt_name = std::move(name);
  }
  // One pass per engine encoding the types need: floats, int8 (int8 and uint8), bits (binary and
  // ubinary).
  std::optional<Embeddings> f32, int8, bits;
  const auto run = [&](std::optional<Embeddings>& slot, quiver::v1::OutputType type) {
    absl::StatusOr<Embeddings> out = service_.Embed(*request, type, call.context);
    if (!out.ok()) return out.status();
    slot = *std::move(out);
    return absl::OkStatus();
  };
  const std::vector<CohereEmbeddingType> types = request->embedding_types.empty()
                                                     ? std::vector{CohereEmbeddingType::kFloat}
                                                     : request->embedding_types;
  for (CohereEmbeddingType t : types) {
    absl::Status s;
    if (t == CohereEmbeddingType::kFloat && !f32) s = run(f32, quiver::v1::OUTPUT_F32);
    if ((t == CohereEmbeddingType::kInt8 || t == CohereEmbeddingType::kUint8) && !int8) {
      s = run(int8, quiver::v1::OUTPUT_INT8);
    }
    if ((t == CohereEmbeddingType::kBinary || t == CohereEmbeddingType::kUbinary) && !bits) {
      s = run(bits, quiver::v1::OUTPUT_BINARY);
    }
    if (!s.ok()) return ErrorResponse(call.dialect, s);
  }
  const Embeddings& any = f32 ? *f32 : int8 ? *int8 : *bits;
  JsonWriter w;
  w.BeginObject().Key("id").String(StrCat("embed-", next_id_++));
  const bool by_type = version >= 2 || !request->embedding_types.empty();
  w.Key("response_type").String(by_type ? "embeddings_by_type" : "embeddings_floats");
  w.Key("embeddings");
  if (!by_type) {
    w.BeginArray();
    for (int64_t i = 0; i < f32->result.num_seqs; ++i) w.FloatArray(Floats(Row(f32->result, i)));
    w.EndArray();
  } else {
    WriteCohereEmbeddingsByType(w, types, f32, int8, bits);
  }
  w.Key("texts").BeginArray();
  for (const Input& input : request->inputs) w.String(input.text);
  w.EndArray();
  w.Key("meta").BeginObject();
  w.Key("api_version").BeginObject().Key("version").String(StrCat(version)).EndObject();
  w.Key("billed_units").BeginObject().Key("input_tokens").Int(any.tokens).EndObject();
  w.EndObject();
  w.EndObject();
  return Json(std::move(w).Take());
}

// TEI's /embed_sparse: per input, its nonzero terms as {"index", "value"} in index order.
HttpResponse Api::EmbedSparse(const JsonView& body, Call& call) {
  absl::StatusOr<EmbedRequest> request = ParseTeiEmbed(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<std::vector<std::vector<float>>> rows =
      service_.EmbedSparse(*request, call.context);
  if (!rows.ok()) return ErrorResponse(call.dialect, rows.status());
  JsonWriter w;
  w.BeginArray();
  for (const std::vector<float>& row : *rows) {
    w.BeginArray();
    for (size_t j = 0; j < row.size(); ++j) {
      if (!(row[j] > 0.0f)) continue;
      w.BeginObject();
      w.Key("index");
      w.Int(static_cast<int64_t>(j));
      w.Key("value");
      w.Float(row[j]);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

}  // namespace quiver::gateway::api
