// The HTTP APIs users call: OpenAI /v1/embeddings, TEI /embed and /rerank (Cohere-style fields
// too), /v1/score, /tokenize, /decode, /health, /ready, /info, /metrics. Requests are validated
// with errors that name the field or limit, tokenized here (on the handler pool), and computed
// through the Dispatcher.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "common/metrics.h"
#include "gateway/dispatcher.h"
#include "gateway/http_server.h"
#include "tokenizer/tokenizer.h"

namespace quiver::gateway {

// What the gateway knows of the model it fronts (from the replicas' ModelInfo).
struct ModelDescription {
  std::string name;
  std::string architecture;
  int64_t max_input_tokens = 512;  // per sequence, special tokens included
  int64_t hidden_size = 0;
  bool normalize = false;          // the model's own default
  bool can_embed = true;
  bool can_score = false;
  bool qwen3_reranker = false;     // scores with the yes/no prompt template
  bool mean_pooling = false;       // late chunking (contextualized embeddings) needs it
};

struct ApiLimits {
  // Inputs (texts or token lists) per request. Larger requests are split into chunks anyway;
  // this bounds one request's memory and latency.
  int64_t max_inputs = 2048;
  // Characters per input, cut before tokenizing (a guard against huge texts).
  int64_t max_input_chars = 200000;
  // Seconds a request may take, queueing and retries included.
  double request_timeout_s = 60;
  std::string api_key;  // empty: no authentication
};

class Api {
 public:
  Api(ModelDescription model, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
      std::shared_ptr<Dispatcher> dispatcher, ApiLimits limits, MetricsRegistry* metrics);

  HttpResponse Handle(const HttpRequest& request);
  void set_ready(bool ready) { ready_ = ready; }

 private:
  struct Context;
  HttpResponse Embeddings(const HttpRequest& request, Context& ctx);
  HttpResponse TeiEmbed(const HttpRequest& request, Context& ctx);
  HttpResponse Rerank(const HttpRequest& request, Context& ctx);
  HttpResponse Contextualized(const HttpRequest& request, Context& ctx);
  HttpResponse Score(const HttpRequest& request, Context& ctx);
  HttpResponse Tokenize(const HttpRequest& request, Context& ctx);
  HttpResponse Decode(const HttpRequest& request, Context& ctx);
  HttpResponse Info() const;

  ModelDescription model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::shared_ptr<Dispatcher> dispatcher_;
  ApiLimits limits_;
  MetricsRegistry* metrics_;
  std::atomic<bool> ready_{false};
  Histogram* tokenize_ms_;
  Histogram* inference_ms_;
  Histogram* queue_ms_;
  Histogram* input_tokens_;
};

}  // namespace quiver::gateway
