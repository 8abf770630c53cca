// The scoring routes: TEI's /rerank and /predict, vLLM's and Cohere's rerank, vLLM's /v1/score
// and /classify.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/json_writer.h"
#include "common/strings.h"
#include "gateway/api/answers.h"
#include "gateway/api/api.h"
#include "gateway/api/scores.h"

namespace quiver::gateway::api {
namespace {

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Indices of `scores` from highest to lowest (ties in input order), cut to top_n.
std::vector<size_t> Ranked(const std::vector<float>& scores, std::optional<int64_t> top_n) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (top_n && *top_n < static_cast<int64_t>(order.size())) {
    order.resize(static_cast<size_t>(*top_n));
  }
  return order;
}

}  // namespace

HttpResponse Api::TeiRerank(const JsonView& body, Call& call) {
  // /rerank is TEI's (texts) and vLLM's / Jina's (documents): the body says which.
  if (!body.Find("texts") && body.Find("documents")) {
    call.dialect = Dialect::kOpenAi;
    return VllmRerank(body, call);
  }
  absl::StatusOr<RerankRequest> request = ParseRerank(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Scores> scores =
      service_.Score({request->query}, request->documents, request->raw_scores, request->truncation,
                     "texts", call.context);
  if (!scores.ok()) return ErrorResponse(call.dialect, scores.status());
  JsonWriter w;
  w.BeginArray();
  for (size_t i : Ranked(scores->scores, request->top_n)) {
    w.BeginObject().Key("index").Int(static_cast<int64_t>(i));
    if (request->return_documents) w.Key("text").String(request->documents[i]);
    w.Key("score").Float(scores->scores[i]).EndObject();
  }
  w.EndArray();
  return Json(std::move(w).Take());
}

namespace {

// Cohere's and vLLM's rerank answer, in one shape both clients read: results sorted by
// relevance_score with the document where asked, id, model, usage and Cohere's meta.
std::string RenderRerank(const RerankRequest& request, const Scores& scores, const std::string& id,
                         const std::string& model) {
  JsonWriter w;
  w.BeginObject().Key("id").String(id).Key("object").String("rerank");
  w.Key("created").Int(UnixSeconds()).Key("model").String(model);
  w.Key("results").BeginArray();
  for (size_t i : Ranked(scores.scores, request.top_n)) {
    w.BeginObject().Key("index").Int(static_cast<int64_t>(i));
    w.Key("relevance_score").Float(scores.scores[i]);
    if (request.return_documents) {
      w.Key("document").BeginObject().Key("text").String(request.documents[i]).EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("usage").BeginObject();
  w.Key("prompt_tokens").Int(scores.tokens).Key("total_tokens").Int(scores.tokens).EndObject();
  w.Key("meta").BeginObject();
  w.Key("api_version").BeginObject().Key("version").String("2").EndObject();
  w.Key("billed_units").BeginObject().Key("search_units").Int(1).EndObject();
  w.EndObject();
  w.EndObject();
  return std::move(w).Take();
}

}  // namespace

HttpResponse Api::VllmRerank(const JsonView& body, Call& call) {
  absl::StatusOr<RerankRequest> request = ParseRerank(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  return Rerank(*request, call);
}

HttpResponse Api::CohereRerank(const JsonView& body, Call& call) {
  absl::StatusOr<RerankRequest> request = ParseRerank(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  // Cohere cuts long documents (max_tokens_per_doc) rather than refusing them.
  if (!request->truncation.enabled) request->truncation.enabled = true;
  return Rerank(*request, call);
}

HttpResponse Api::Rerank(const RerankRequest& request, Call& call) {
  if (absl::Status s = service_.CheckModel(request.model); !s.ok()) {
    return ErrorResponse(call.dialect, s);
  }
  std::vector<std::string> cut;
  if (request.max_tokens_per_doc > 0) {
    absl::StatusOr<std::vector<std::string>> kept = service_.KeepFirstTokens(
        request.documents, request.max_tokens_per_doc, "documents", call.context);
    if (!kept.ok()) return ErrorResponse(call.dialect, kept.status());
    cut = *std::move(kept);
  }
  absl::StatusOr<Scores> scores =
      service_.Score({request.query}, request.max_tokens_per_doc > 0 ? cut : request.documents,
                     request.raw_scores, request.truncation, "documents", call.context);
  if (!scores.ok()) return ErrorResponse(call.dialect, scores.status());
  return Json(RenderRerank(request, *scores, StrCat("rerank-", next_id_++), service_.model().name));
}

HttpResponse Api::Score(const JsonView& body, Call& call) {
  absl::StatusOr<ScoreRequest> request = ParseScore(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (absl::Status s = service_.CheckModel(request->model); !s.ok()) {
    return ErrorResponse(call.dialect, s);
  }
  absl::StatusOr<Scores> s = service_.Score(request->text_1, request->text_2, !request->activation,
                                            request->truncation, "text_2", call.context);
  if (!s.ok()) return ErrorResponse(call.dialect, s.status());
  const std::vector<float>& all = s->scores;
  const int64_t tokens = s->tokens;
  JsonWriter w;
  w.BeginObject().Key("id").String(StrCat("score-", next_id_++)).Key("object").String("list");
  w.Key("created").Int(UnixSeconds()).Key("model").String(service_.model().name);
  w.Key("data").BeginArray();
  for (size_t i = 0; i < all.size(); ++i) {
    w.BeginObject().Key("index").Int(static_cast<int64_t>(i)).Key("object").String("score");
    w.Key("score").Float(all[i]).EndObject();
  }
  w.EndArray();
  w.Key("usage").BeginObject();
  w.Key("prompt_tokens").Int(tokens).Key("total_tokens").Int(tokens);
  w.Key("completion_tokens").Int(0).EndObject();
  w.EndObject();
  return Json(std::move(w).Take());
}

namespace {

// A classifier's logits as probabilities, as transformers' pipelines and vLLM make them: the
// sigmoid for one label, the softmax over several.
void Activate(std::vector<float>& scores) {
  if (scores.size() == 1) {
    scores[0] = Sigmoid(scores[0]);
    return;
  }
  const float top = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (float& v : scores) sum += (v = std::exp(v - top));
  for (float& v : scores) v = static_cast<float>(v / sum);
}

}  // namespace

// TEI's /predict: for each input its labels with scores, highest first (softmax over the labels,
// sigmoid for one, unless raw_scores); one list for one input, a list of lists for a batch.
HttpResponse Api::Predict(const JsonView& body, Call& call) {
  absl::StatusOr<PredictRequest> request = ParsePredict(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  absl::StatusOr<Classified> classified =
      service_.Classify(request->inputs, request->truncation, true, "inputs", call.context);
  if (!classified.ok()) return ErrorResponse(call.dialect, classified.status());
  const std::vector<std::string>& names = service_.model().labels;
  JsonWriter w;
  if (request->batch) w.BeginArray();
  for (std::vector<float>& scores : classified->logits) {
    if (!request->raw_scores) Activate(scores);
    w.BeginArray();
    for (size_t i : Ranked(scores, std::nullopt)) {
      w.BeginObject().Key("score").Float(scores[i]);
      w.Key("label").String(i < names.size() ? names[i] : StrCat("LABEL_", i)).EndObject();
    }
    w.EndArray();
  }
  if (request->batch) w.EndArray();
  return Json(std::move(w).Take());
}

HttpResponse Api::Classify(const JsonView& body, Call& call) {
  absl::StatusOr<ClassifyRequest> request = ParseClassify(body, service_.limits());
  if (!request.ok()) return ErrorResponse(call.dialect, request.status());
  if (absl::Status s = service_.CheckModel(request->model); !s.ok()) {
    return ErrorResponse(call.dialect, s);
  }
  absl::StatusOr<Classified> classified = service_.Classify(
      request->inputs, request->truncation, request->add_special_tokens, "input", call.context);
  if (!classified.ok()) return ErrorResponse(call.dialect, classified.status());
  const std::vector<std::string>& names = service_.model().labels;
  JsonWriter w;
  w.BeginObject().Key("id").String(StrCat("classify-", next_id_++)).Key("object").String("list");
  w.Key("created").Int(UnixSeconds()).Key("model").String(service_.model().name);
  w.Key("data").BeginArray();
  for (size_t i = 0; i < classified->logits.size(); ++i) {
    std::vector<float>& probs = classified->logits[i];
    // vLLM's choice by the config's problem_type: a regression's values as they are, a
    // multi-label classifier's a sigmoid per label, any other the softmax (a sigmoid for one).
    const std::string& problem = service_.model().problem_type;
    if (!request->activation || problem == "regression") {
    } else if (problem == "multi_label_classification") {
      for (float& v : probs) v = Sigmoid(v);
    } else {
      Activate(probs);
    }
    // The label of the highest value (the first of equals, as numpy's argmax).
    const size_t top =
        static_cast<size_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
    w.BeginObject().Key("index").Int(static_cast<int64_t>(i));
    w.Key("label").String(top < names.size() ? names[top] : StrCat("LABEL_", top));
    w.Key("probs").BeginArray();
    for (float v : probs) w.Float(v);
    w.EndArray();
    w.Key("num_classes").Int(static_cast<int64_t>(probs.size())).EndObject();
  }
  w.EndArray();
  w.Key("usage").BeginObject();
  w.Key("prompt_tokens").Int(classified->tokens).Key("total_tokens").Int(classified->tokens);
  w.Key("completion_tokens").Int(0).Key("prompt_tokens_details").Null().EndObject();
  w.EndObject();
  return Json(std::move(w).Take());
}

}  // namespace quiver::gateway::api
