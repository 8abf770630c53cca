// The tokenizer routes: TEI's /tokenize and /decode, vLLM's /tokenize (with prompt) and
// /detokenize.
#include <string>
#include <vector>

#include "common/json.h"
#include "common/json_writer.h"
#include "gateway/api/answers.h"
#include "gateway/api/api.h"

namespace quiver::gateway::api {

HttpResponse Api::Tokenize(const JsonView& body, Call& call) {
  // /tokenize is TEI's (inputs) and vLLM's (prompt, or its chat form's messages): the body says.
  if (!body.Find("inputs") && (body.Find("prompt") || body.Find("messages"))) {
    call.dialect = Dialect::kOpenAi;
    return VllmTokenize(body, call);
  }
  absl::StatusOr<TokenizeRequest> request = ParseTokenize(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<std::vector<std::vector<TokenPiece>>> pieces =
      service_.TokenizeForDisplay(*request);
  if (!pieces.ok()) return ErrorResponse(call.dialect, pieces.status());
  JsonWriter w;
  w.BeginArray();
  for (const std::vector<TokenPiece>& text : *pieces) {
    w.BeginArray();
    for (const TokenPiece& p : text) {
      // start and stop: byte offsets into the text tokenized, null for special tokens (and for
      // tokenizers whose pipeline quiver does not trace back to the input yet).
      w.BeginObject().Key("id").Int(p.id).Key("text").String(p.text);
      w.Key("special").Bool(p.special).Key("start");
      p.start ? w.Uint(*p.start) : w.Null();
      w.Key("stop");
      p.stop ? w.Uint(*p.stop) : w.Null();
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

HttpResponse Api::VllmTokenize(const JsonView& body, Call& call) {
  absl::StatusOr<VllmTokenizeRequest> request = ParseVllmTokenize(body);
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (absl::Status s = service_.CheckModel(request->model); !s.ok()) {
    return ErrorResponse(call.dialect, s);
  }
  absl::StatusOr<std::vector<uint32_t>> ids =
      service_.TokenIds(request->prompt, request->add_special_tokens, "prompt");
  if (!ids.ok()) return ErrorResponse(call.dialect, ids.status());
  JsonWriter w;
  w.BeginObject().Key("count").Int(static_cast<int64_t>(ids->size()));
  w.Key("max_model_len").Int(service_.model().max_input_tokens);
  w.Key("tokens").BeginArray();
  for (uint32_t id : *ids) w.Uint(id);
  w.EndArray().Key("token_strs");
  if (request->return_token_strs) {
    w.BeginArray();
    for (uint32_t id : *ids) w.String(service_.TokenString(id));
    w.EndArray();
  } else {
    w.Null();
  }
  w.EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::Detokenize(const JsonView& body, Call& call) {
  std::string model;
  absl::StatusOr<DecodeRequest> request = ParseVllmDetokenize(body, &model);
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (absl::Status s = service_.CheckModel(model); !s.ok()) return ErrorResponse(call.dialect, s);
  absl::StatusOr<std::vector<std::string>> texts = service_.Decode(*request);
  if (!texts.ok()) return ErrorResponse(call.dialect, texts.status());
  JsonWriter w;
  w.BeginObject().Key("prompt").String(texts->front()).EndObject();
  return Json(std::move(w).Take());
}

HttpResponse Api::Decode(const JsonView& body, Call& call) {
  absl::StatusOr<DecodeRequest> request = ParseDecode(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<std::vector<std::string>> texts = service_.Decode(*request);
  if (!texts.ok()) return ErrorResponse(call.dialect, texts.status());
  JsonWriter w;
  w.BeginArray();
  for (const std::string& text : *texts) w.String(text);
  w.EndArray();
  return Json(std::move(w).Take());
}

}  // namespace quiver::gateway::api
