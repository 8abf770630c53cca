#include "gateway/api.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/json.h"
#include "common/strings.h"
#include "gateway/http_status.h"

namespace quiver::gateway {
namespace {

using Clock = std::chrono::steady_clock;

std::string Base64(const std::string& bytes) {
  static constexpr char kTable[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += kTable[v >> 18];
    out += kTable[(v >> 12) & 63];
    out += kTable[(v >> 6) & 63];
    out += kTable[v & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= uint8_t(bytes[i + 1]) << 8;
    out += kTable[v >> 18];
    out += kTable[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kTable[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// An error answer. OpenAI-style endpoints get {"error": {message, type, param, code}}; TEI-style
// ones {"error": message, "error_type": type}.
struct ApiError {
  int status;
  std::string message;
  std::string param;
  std::string code;
};

std::string ErrorType(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "payload_too_large";
    case 429: return "overloaded";
    case 503: case 504: return "unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

HttpResponse ErrorResponse(const ApiError& e, bool openai) {
  HttpResponse r;
  r.status = e.status;
  if (openai) {
    r.body = StrCat("{\"error\":{\"message\":\"", JsonEscape(e.message), "\",\"type\":\"",
                    ErrorType(e.status), "\",\"param\":",
                    e.param.empty() ? std::string("null") : "\"" + JsonEscape(e.param) + "\"",
                    ",\"code\":", e.code.empty() ? std::string("null") : "\"" + e.code + "\"",
                    "}}");
  } else {
    r.body = StrCat("{\"error\":\"", JsonEscape(e.message), "\",\"error_type\":\"",
                    ErrorType(e.status), "\"}");
  }
  if (e.status == 429) r.headers["Retry-After"] = "1";
  return r;
}

ApiError FromStatus(const absl::Status& s) {
  return {HttpStatusFor(s), std::string(s.message()), "", ""};
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The OpenAI-style output fields shared by /v1/embeddings and /v1/contextualizedembeddings:
// encoding_format (float, base64, base64_int8, base64_binary) and dimensions (Matryoshka,
// re-normalized as OpenAI does for shortened embeddings).
std::optional<ApiError> ParseOpenAiOutput(const JsonValue& body, int64_t hidden_size,
                                          quiver::v1::OutputOptions& output, std::string& format) {
  format = "float";
  if (const JsonValue* f = body.Find("encoding_format"); f && !f->is_null()) {
    if (!f->is_string()) return ApiError{422, "'encoding_format' must be a string", "encoding_format", ""};
    format = f->as_string();
  }
  if (format == "base64_int8") {
    output.set_output_type(quiver::v1::OUTPUT_INT8);
  } else if (format == "base64_binary") {
    output.set_output_type(quiver::v1::OUTPUT_BINARY);
  } else if (format != "float" && format != "base64") {
    return ApiError{422, StrCat("'encoding_format' must be float, base64, base64_int8 or base64_binary, got '", format, "'"), "encoding_format", ""};
  }
  if (const JsonValue* d = body.Find("dimensions"); d && !d->is_null()) {
    if (!d->is_int() || d->as_int() <= 0) return ApiError{422, "'dimensions' must be a positive integer", "dimensions", ""};
    if (d->as_int() > hidden_size) {
      return ApiError{400, StrCat("'dimensions' is ", d->as_int(), "; the model has ", hidden_size), "dimensions", ""};
    }
    output.set_dimensions(static_cast<uint32_t>(d->as_int()));
    output.set_normalize(true);
  }
  return std::nullopt;
}

// One packed row as JSON: a list of floats (f32 rows) or a base64 string of its bytes.
void AppendRow(std::string& out, std::string_view row, bool as_floats) {
  if (!as_floats) {
    out += "\"" + Base64(std::string(row)) + "\"";
    return;
  }
  out += '[';
  char buf[32];  // fmt's shortest form that reads back as the same float, without a string each
  for (size_t j = 0; j < row.size() / 4; ++j) {
    float v;
    std::memcpy(&v, row.data() + 4 * j, 4);
    if (j > 0) out += ',';
    out.append(buf, fmt::format_to(buf, "{}", v));
  }
  out += ']';
}

}  // namespace

struct Api::Context {
  bool openai = false;
  Clock::time_point start = Clock::now();
  std::chrono::system_clock::time_point deadline;
  double tokenize_ms = 0;
};

Api::Api(ModelDescription model, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
         std::shared_ptr<Dispatcher> dispatcher, ApiLimits limits, MetricsRegistry* metrics)
    : model_(std::move(model)), tokenizer_(std::move(tokenizer)),
      dispatcher_(std::move(dispatcher)), limits_(std::move(limits)), metrics_(metrics) {
  const auto ms = MetricsRegistry::ExponentialBuckets(0.1, 2, 18);
  tokenize_ms_ = &metrics->GetHistogram("quiver_http_tokenize_ms", "Tokenization time per request", ms);
  queue_ms_ = &metrics->GetHistogram("quiver_http_queue_ms", "Time waiting in the replica's queue", ms);
  inference_ms_ = &metrics->GetHistogram("quiver_http_inference_ms", "Compute time per request", ms);
  input_tokens_ = &metrics->GetHistogram("quiver_http_input_tokens", "Tokens per input",
                                         MetricsRegistry::ExponentialBuckets(4, 2, 14));
}

namespace {

// Texts from a field that is a string or a list of strings.
absl::StatusOr<std::vector<std::string>> Strings(const JsonValue& v, std::string_view field) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.as_string());
    return out;
  }
  if (!v.is_array()) {
    return absl::FailedPreconditionError(StrCat("'", field, "' must be a string or a list of strings"));
  }
  for (size_t i = 0; i < v.items().size(); ++i) {
    if (!v.items()[i].is_string()) {
      return absl::FailedPreconditionError(StrCat("'", field, "[", i, "]' must be a string"));
    }
    out.push_back(v.items()[i].as_string());
  }
  return out;
}

}  // namespace

HttpResponse Api::Handle(const HttpRequest& request) {
  Context ctx;
  ctx.openai = request.target.starts_with("/v1/");
  ctx.deadline = std::chrono::system_clock::now() +
                 std::chrono::milliseconds(static_cast<int64_t>(limits_.request_timeout_s * 1000));
  HttpResponse response;
  const std::string& path = request.target;
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  const bool open_path = path == "/health" || path == "/ready" || path == "/metrics";
  if (!limits_.api_key.empty() && !open_path) {
    auto it = request.headers.find("authorization");
    if (it == request.headers.end() || it->second != "Bearer " + limits_.api_key) {
      response = ErrorResponse({401, "missing or wrong API key (Authorization: Bearer <key>)", "",
                                "invalid_api_key"}, ctx.openai);
    }
  }
  if (response.status == 200) {
    if (get && path == "/health") {
      response.status = dispatcher_->any_healthy() ? 200 : 503;
      response.body = response.status == 200 ? "{\"status\":\"ok\"}" : "{\"status\":\"no healthy replica\"}";
    } else if (get && path == "/ready") {
      const bool ready = ready_ && dispatcher_->any_healthy();
      response.status = ready ? 200 : 503;
      response.body = StrCat("{\"ready\":", ready ? "true" : "false", "}");
    } else if (get && path == "/metrics") {
      response.content_type = "text/plain; version=0.0.4";
      response.body = metrics_->Render();
    } else if (get && (path == "/info" || path == "/v1/models")) {
      response = Info();
    } else if (post && path == "/v1/embeddings") {
      response = Embeddings(request, ctx);
    } else if (post && path == "/v1/contextualizedembeddings") {
      response = Contextualized(request, ctx);
    } else if (post && path == "/embed") {
      response = TeiEmbed(request, ctx);
    } else if (post && (path == "/rerank" || path == "/v1/rerank")) {
      response = Rerank(request, ctx);
    } else if (post && (path == "/v1/score" || path == "/score")) {
      response = Score(request, ctx);
    } else if (post && path == "/tokenize") {
      response = Tokenize(request, ctx);
    } else if (post && path == "/decode") {
      response = Decode(request, ctx);
    } else {
      response = ErrorResponse({404, StrCat("no route for ", request.method, " ", path), "", ""},
                               ctx.openai);
    }
  }
  const std::string labels = StrCat("endpoint=\"", path.size() < 40 ? path : "other",
                                    "\",status=\"", response.status, "\"");
  metrics_->GetCounter("quiver_http_requests_total", "HTTP requests by endpoint and status", labels)
      .Inc();
  metrics_->GetHistogram("quiver_http_request_ms", "Request latency by endpoint",
                         MetricsRegistry::ExponentialBuckets(0.1, 2, 18),
                         StrCat("endpoint=\"", path.size() < 40 ? path : "other", "\""))
      .Observe(std::chrono::duration<double, std::milli>(Clock::now() - ctx.start).count());
  return response;
}

HttpResponse Api::Info() const {
  HttpResponse r;
  r.body = StrCat("{\"model_id\":\"", JsonEscape(model_.name), "\",\"architecture\":\"",
                  model_.architecture, "\",\"model_type\":\"",
                  model_.can_score ? "reranker" : "embedding", "\",\"max_input_length\":",
                  model_.max_input_tokens, ",\"hidden_size\":", model_.hidden_size,
                  ",\"max_client_batch_size\":", limits_.max_inputs, ",\"version\":\"",
                  QUIVER_VERSION, "\",\"data\":[{\"id\":\"", JsonEscape(model_.name),
                  "\",\"object\":\"model\",\"owned_by\":\"quiver\"}]}");
  return r;
}

// ---- shared pieces ---------------------------------------------------------------------------

namespace {

struct Parsed {
  JsonValue json;
  std::optional<ApiError> error;
};

Parsed ParseBody(const std::string& body) {
  Parsed p;
  absl::StatusOr<JsonValue> json = JsonValue::Parse(body);
  if (!json.ok()) {
    p.error = ApiError{400, StrCat("malformed JSON body: ", json.status().message()), "", ""};
  } else if (!json->is_object()) {
    p.error = ApiError{422, "the body must be a JSON object", "", ""};
  } else {
    p.json = *std::move(json);
  }
  return p;
}

}  // namespace

// Tokenizes `texts` into sequences; 413 naming the input and the limit when one is too long and
// truncation was not asked for.
static std::optional<ApiError> TokenizeAll(const tokenizer::Tokenizer& tok,
                                           const std::vector<std::string>& texts,
                                           const std::vector<std::string>* pairs, bool truncate,
                                           bool truncate_left, int64_t max_tokens,
                                           int64_t max_chars, std::vector<Sequence>& out,
                                           int64_t& total_tokens) {
  tokenizer::EncodeOptions options;
  options.max_input_chars = static_cast<size_t>(max_chars);
  if (truncate) {
    options.truncation = tokenizer::Truncation{
        static_cast<size_t>(max_tokens), tokenizer::TruncationStrategy::kLongestFirst,
        truncate_left ? tokenizer::TruncationSide::kLeft : tokenizer::TruncationSide::kRight};
  }
  tokenizer::Encoding enc;
  for (size_t i = 0; i < texts.size(); ++i) {
    absl::Status s = pairs ? tok.EncodePair(texts[i], (*pairs)[i], options, &enc)
                           : tok.Encode(texts[i], options, &enc);
    if (!s.ok()) return ApiError{400, StrCat("input ", i, ": ", s.message()), "input", ""};
    if (static_cast<int64_t>(enc.ids.size()) > max_tokens) {
      return ApiError{413,
                      StrCat("input ", i, " has ", enc.ids.size(), " tokens; the model accepts at "
                             "most ", max_tokens, " (send shorter inputs or ask for truncation)"),
                      "input", "input_too_long"};
    }
    if (enc.ids.empty()) return ApiError{422, StrCat("input ", i, " is empty after tokenization"), "input", ""};
    out.push_back({enc.ids, enc.type_ids});
    total_tokens += static_cast<int64_t>(enc.ids.size());
  }
  return std::nullopt;
}

HttpResponse Api::Embeddings(const HttpRequest& request, Context& ctx) {
  Parsed p = ParseBody(request.body);
  if (p.error) return ErrorResponse(*p.error, true);
  const JsonValue& body = p.json;
  if (!model_.can_embed) {
    return ErrorResponse({400, StrCat("model '", model_.name, "' is a scoring model; use /rerank or /v1/score"), "model", ""}, true);
  }
  if (const JsonValue* m = body.Find("model"); m && m->is_string() && m->as_string() != model_.name) {
    return ErrorResponse({404, StrCat("model '", m->as_string(), "' is not served here; this server serves '", model_.name, "'"), "model", "model_not_found"}, true);
  }
  const JsonValue* input = body.Find("input");
  if (input == nullptr) return ErrorResponse({422, "missing field 'input'", "input", ""}, true);
  std::vector<Sequence> seqs;
  int64_t total_tokens = 0;
  const auto start = Clock::now();
  // input: a string, a list of strings, a list of token ids, or a list of lists of token ids.
  const bool token_list = input->is_array() && !input->items().empty() && input->items()[0].is_int();
  const bool token_lists = input->is_array() && !input->items().empty() && input->items()[0].is_array();
  if (token_list || token_lists) {
    std::vector<const JsonValue*> lists;
    if (token_list) {
      lists.push_back(input);
    } else {
      for (const JsonValue& v : input->items()) lists.push_back(&v);
    }
    if (static_cast<int64_t>(lists.size()) > limits_.max_inputs) {
      return ErrorResponse({413, StrCat("'input' has ", lists.size(), " items; at most ", limits_.max_inputs, " per request"), "input", ""}, true);
    }
    for (size_t i = 0; i < lists.size(); ++i) {
      absl::StatusOr<std::vector<int64_t>> ids = JsonIntArray(*lists[i], StrCat("input[", i, "]"));
      if (!ids.ok()) return ErrorResponse({422, std::string(ids.status().message()), "input", ""}, true);
      if (ids->empty()) return ErrorResponse({422, StrCat("input[", i, "] is empty"), "input", ""}, true);
      if (static_cast<int64_t>(ids->size()) > model_.max_input_tokens) {
        return ErrorResponse({413, StrCat("input ", i, " has ", ids->size(), " tokens; the model accepts at most ", model_.max_input_tokens), "input", "input_too_long"}, true);
      }
      Sequence s;
      for (int64_t id : *ids) {
        // The upper bound is the replica's to check: it knows the model's vocabulary.
        if (id < 0 || id > INT32_MAX) {
          return ErrorResponse({422, StrCat("input[", i, "]: token id ", id, " is not a valid id"), "input", ""}, true);
        }
        s.ids.push_back(static_cast<uint32_t>(id));
      }
      total_tokens += static_cast<int64_t>(s.ids.size());
      seqs.push_back(std::move(s));
    }
  } else {
    absl::StatusOr<std::vector<std::string>> texts = Strings(*input, "input");
    if (!texts.ok()) return ErrorResponse({422, std::string(texts.status().message()), "input", ""}, true);
    if (texts->empty()) return ErrorResponse({422, "'input' is empty", "input", ""}, true);
    if (static_cast<int64_t>(texts->size()) > limits_.max_inputs) {
      return ErrorResponse({413, StrCat("'input' has ", texts->size(), " items; at most ", limits_.max_inputs, " per request"), "input", ""}, true);
    }
    // An extension to OpenAI's API (its clients send it with extra_body): "truncate": true cuts
    // inputs to the model's limit, as sentence-transformers does, instead of refusing them.
    absl::StatusOr<bool> truncate = JsonBool(body, "truncate", false);
    if (!truncate.ok()) return ErrorResponse({422, std::string(truncate.status().message()), "truncate", ""}, true);
    if (auto e = TokenizeAll(*tokenizer_, *texts, nullptr, *truncate, false, model_.max_input_tokens, limits_.max_input_chars, seqs, total_tokens)) {
      return ErrorResponse(*e, true);
    }
  }
  ctx.tokenize_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  tokenize_ms_->Observe(ctx.tokenize_ms);
  for (const Sequence& s : seqs) input_tokens_->Observe(static_cast<double>(s.ids.size()));

  quiver::v1::OutputOptions output;
  std::string format;
  if (auto e = ParseOpenAiOutput(body, model_.hidden_size, output, format)) return ErrorResponse(*e, true);
  absl::StatusOr<ReplicaResult> result = dispatcher_->Run(CallKind::kEmbed, seqs, output, ctx.deadline);
  if (!result.ok()) return ErrorResponse(FromStatus(result.status()), true);
  queue_ms_->Observe(result->queue_wait_us / 1000.0);
  inference_ms_->Observe(result->compute_us / 1000.0);
  const size_t row_bytes = result->data.size() / static_cast<size_t>(std::max<int64_t>(1, result->num_seqs));
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (int64_t i = 0; i < result->num_seqs; ++i) {
    if (i > 0) out += ',';
    out += StrCat("{\"object\":\"embedding\",\"index\":", i, ",\"embedding\":");
    AppendRow(out, std::string_view(result->data).substr(static_cast<size_t>(i) * row_bytes, row_bytes),
              format == "float");
    out += '}';
  }
  out += StrCat("],\"model\":\"", JsonEscape(model_.name), "\",\"usage\":{\"prompt_tokens\":",
                total_tokens, ",\"total_tokens\":", total_tokens, "}}");
  HttpResponse r;
  r.body = std::move(out);
  return r;
}

// Perplexity's contextualized embeddings by late chunking: each document (a list of chunks) is one
// sequence, one forward pass; each chunk's embedding is the mean of its own tokens' states, which
// have seen the whole document.
HttpResponse Api::Contextualized(const HttpRequest& request, Context& ctx) {
  Parsed p = ParseBody(request.body);
  if (p.error) return ErrorResponse(*p.error, true);
  const JsonValue& body = p.json;
  if (!model_.can_embed || !model_.mean_pooling) {
    return ErrorResponse({400, StrCat("model '", model_.name, "' does not support contextualized "
                                      "embeddings (late chunking needs a mean-pooling embedding model)"), "model", ""}, true);
  }
  if (const JsonValue* m = body.Find("model"); m && m->is_string() && m->as_string() != model_.name) {
    return ErrorResponse({404, StrCat("model '", m->as_string(), "' is not served here"), "model", "model_not_found"}, true);
  }
  const JsonValue* input = body.Find("input");
  if (input == nullptr || !input->is_array() || input->items().empty()) {
    return ErrorResponse({422, "'input' must be a non-empty list of documents, each a list of chunk strings", "input", ""}, true);
  }
  int64_t chunks_total = 0;
  for (const JsonValue& doc : input->items()) chunks_total += doc.is_array() ? static_cast<int64_t>(doc.items().size()) : 0;
  if (chunks_total > limits_.max_inputs) {
    return ErrorResponse({413, StrCat("'input' has ", chunks_total, " chunks; at most ", limits_.max_inputs, " per request"), "input", ""}, true);
  }
  // Where the special tokens put the text: the index of a sentinel id after wrapping.
  tokenizer::Encoding probe;
  tokenizer_->AddSpecialTokens({UINT32_MAX}, &probe);
  const uint32_t prefix = static_cast<uint32_t>(
      std::find(probe.ids.begin(), probe.ids.end(), UINT32_MAX) - probe.ids.begin());
  tokenizer::EncodeOptions options;
  options.add_special_tokens = false;
  options.max_input_chars = static_cast<size_t>(limits_.max_input_chars);
  std::vector<Sequence> seqs;
  std::vector<size_t> chunk_counts;
  int64_t total_tokens = 0;
  tokenizer::Encoding enc;
  for (size_t d = 0; d < input->items().size(); ++d) {
    const JsonValue& doc = input->items()[d];
    absl::StatusOr<std::vector<std::string>> chunks = doc.is_array() ? Strings(doc, StrCat("input[", d, "]"))
                                                                    : absl::StatusOr<std::vector<std::string>>(absl::FailedPreconditionError(StrCat("'input[", d, "]' must be a list of strings")));
    if (!chunks.ok()) return ErrorResponse({422, std::string(chunks.status().message()), "input", ""}, true);
    if (chunks->empty()) return ErrorResponse({422, StrCat("input[", d, "] has no chunks"), "input", ""}, true);
    std::vector<uint32_t> ids;
    Sequence seq;
    for (size_t j = 0; j < chunks->size(); ++j) {
      absl::Status s = tokenizer_->Encode((*chunks)[j], options, &enc);
      if (!s.ok()) return ErrorResponse({400, StrCat("input[", d, "][", j, "]: ", s.message()), "input", ""}, true);
      if (enc.ids.empty()) return ErrorResponse({422, StrCat("input[", d, "][", j, "] is empty after tokenization"), "input", ""}, true);
      const uint32_t begin = prefix + static_cast<uint32_t>(ids.size());
      ids.insert(ids.end(), enc.ids.begin(), enc.ids.end());
      seq.spans.emplace_back(begin, prefix + static_cast<uint32_t>(ids.size()));
    }
    tokenizer_->AddSpecialTokens(ids, &enc);
    if (static_cast<int64_t>(enc.ids.size()) > model_.max_input_tokens) {
      return ErrorResponse({413, StrCat("document ", d, " has ", enc.ids.size(), " tokens with its special tokens; the model accepts at most ", model_.max_input_tokens), "input", "input_too_long"}, true);
    }
    seq.ids = enc.ids;
    total_tokens += static_cast<int64_t>(seq.ids.size());
    chunk_counts.push_back(chunks->size());
    seqs.push_back(std::move(seq));
  }
  quiver::v1::OutputOptions output;
  std::string format;
  if (auto e = ParseOpenAiOutput(body, model_.hidden_size, output, format)) return ErrorResponse(*e, true);
  absl::StatusOr<ReplicaResult> result = dispatcher_->Run(CallKind::kEmbed, seqs, output, ctx.deadline);
  if (!result.ok()) return ErrorResponse(FromStatus(result.status()), true);
  const size_t row_bytes = result->data.size() / static_cast<size_t>(std::max<int64_t>(1, result->num_seqs));
  std::string out = "{\"object\":\"list\",\"data\":[";
  size_t row = 0;
  for (size_t d = 0; d < chunk_counts.size(); ++d) {
    if (d > 0) out += ',';
    out += StrCat("{\"object\":\"list\",\"index\":", d, ",\"data\":[");
    for (size_t j = 0; j < chunk_counts[d]; ++j, ++row) {
      if (j > 0) out += ',';
      out += StrCat("{\"object\":\"embedding\",\"index\":", j, ",\"embedding\":");
      AppendRow(out, std::string_view(result->data).substr(row * row_bytes, row_bytes), format == "float");
      out += '}';
    }
    out += "]}";
  }
  out += StrCat("],\"model\":\"", JsonEscape(model_.name), "\",\"usage\":{\"prompt_tokens\":",
                total_tokens, ",\"total_tokens\":", total_tokens, "}}");
  HttpResponse r;
  r.body = std::move(out);
  return r;
}

HttpResponse Api::TeiEmbed(const HttpRequest& request, Context& ctx) {
  Parsed p = ParseBody(request.body);
  if (p.error) return ErrorResponse(*p.error, false);
  const JsonValue& body = p.json;
  if (!model_.can_embed) return ErrorResponse({400, "this model scores; use /rerank", "", ""}, false);
  const JsonValue* inputs = body.Find("inputs");
  if (inputs == nullptr) return ErrorResponse({422, "missing field 'inputs'", "inputs", ""}, false);
  absl::StatusOr<std::vector<std::string>> texts = Strings(*inputs, "inputs");
  if (!texts.ok()) return ErrorResponse({422, std::string(texts.status().message()), "inputs", ""}, false);
  if (texts->empty()) return ErrorResponse({422, "'inputs' is empty", "inputs", ""}, false);
  if (static_cast<int64_t>(texts->size()) > limits_.max_inputs) {
    return ErrorResponse({413, StrCat("'inputs' has ", texts->size(), " items; at most ", limits_.max_inputs, " per request"), "inputs", ""}, false);
  }
  absl::StatusOr<bool> normalize = JsonBool(body, "normalize", true);
  absl::StatusOr<bool> truncate = JsonBool(body, "truncate", false);
  absl::StatusOr<std::string> direction = JsonString(body, "truncation_direction", "Right");
  if (!normalize.ok() || !truncate.ok() || !direction.ok()) {
    return ErrorResponse({422, std::string((!normalize.ok() ? normalize.status() : !truncate.ok() ? truncate.status() : direction.status()).message()), "", ""}, false);
  }
  if (*direction != "Right" && *direction != "Left" && *direction != "right" && *direction != "left") {
    return ErrorResponse({422, "'truncation_direction' must be Right or Left", "truncation_direction", ""}, false);
  }
  std::vector<Sequence> seqs;
  int64_t total = 0;
  const auto start = Clock::now();
  if (auto e = TokenizeAll(*tokenizer_, *texts, nullptr, *truncate, (*direction)[0] == 'L' || (*direction)[0] == 'l', model_.max_input_tokens, limits_.max_input_chars, seqs, total)) {
    return ErrorResponse(*e, false);
  }
  tokenize_ms_->Observe(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  quiver::v1::OutputOptions output;
  output.set_normalize(*normalize);
  if (const JsonValue* d = body.Find("dimensions"); d && !d->is_null()) {
    if (!d->is_int() || d->as_int() <= 0 || d->as_int() > model_.hidden_size) {
      return ErrorResponse({422, StrCat("'dimensions' must be an integer in [1, ", model_.hidden_size, "]"), "dimensions", ""}, false);
    }
    output.set_dimensions(static_cast<uint32_t>(d->as_int()));
  }
  absl::StatusOr<ReplicaResult> result = dispatcher_->Run(CallKind::kEmbed, seqs, output, ctx.deadline);
  if (!result.ok()) return ErrorResponse(FromStatus(result.status()), false);
  const size_t row_bytes = static_cast<size_t>(result->dimensions) * 4;
  std::string out = "[";
  for (int64_t i = 0; i < result->num_seqs; ++i) {
    if (i > 0) out += ',';
    AppendRow(out, std::string_view(result->data).substr(static_cast<size_t>(i) * row_bytes, row_bytes), true);
  }
  out += ']';
  HttpResponse r;
  r.body = std::move(out);
  return r;
}

// Scores `query` against each of `docs` with whatever the model is: a cross-encoder or Qwen3
// reranker (kScore), or an embedding model (cosine similarity of normalized embeddings).
static absl::StatusOr<std::vector<float>> ScorePairs(
    const tokenizer::Tokenizer& tok, Dispatcher& dispatcher, const ModelDescription& model,
    const ApiLimits& limits, const std::string& query, const std::vector<std::string>& docs,
    bool raw_scores, std::chrono::system_clock::time_point deadline, std::optional<ApiError>& error) {
  std::vector<Sequence> seqs;
  int64_t total = 0;
  std::vector<float> scores;
  if (model.can_score) {
    std::vector<std::string> firsts, seconds;
    if (model.qwen3_reranker) {
      static const std::string kPrefix =
          "<|im_start|>system\nJudge whether the Document meets the requirements based on the "
          "Query and the Instruct provided. Note that the answer can only be \"yes\" or "
          "\"no\".<|im_end|>\n<|im_start|>user\n";
      static const std::string kSuffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
      for (const std::string& d : docs) {
        firsts.push_back(kPrefix + "<Instruct>: Given a web search query, retrieve relevant "
                         "passages that answer the query\n<Query>: " + query + "\n<Document>: " +
                         d + kSuffix);
      }
      error = TokenizeAll(tok, firsts, nullptr, true, false, model.max_input_tokens, limits.max_input_chars, seqs, total);
    } else {
      firsts.assign(docs.size(), query);
      error = TokenizeAll(tok, firsts, &docs, true, false, model.max_input_tokens, limits.max_input_chars, seqs, total);
    }
    if (error) return scores;
    absl::StatusOr<ReplicaResult> result = dispatcher.Run(CallKind::kScore, seqs, {}, deadline);
    if (!result.ok()) return result.status();
    const int64_t labels = result->dimensions;
    for (int64_t i = 0; i < result->num_seqs; ++i) {
      float v;
      std::memcpy(&v, result->data.data() + static_cast<size_t>(i * labels) * 4, 4);
      scores.push_back(raw_scores ? v : Sigmoid(v));
    }
    return scores;
  }
  std::vector<std::string> texts = {query};
  texts.insert(texts.end(), docs.begin(), docs.end());
  error = TokenizeAll(tok, texts, nullptr, true, false, model.max_input_tokens, limits.max_input_chars, seqs, total);
  if (error) return scores;
  quiver::v1::OutputOptions output;
  output.set_normalize(true);
  absl::StatusOr<ReplicaResult> result = dispatcher.Run(CallKind::kEmbed, seqs, output, deadline);
  if (!result.ok()) return result.status();
  const size_t dims = static_cast<size_t>(result->dimensions);
  const float* q = reinterpret_cast<const float*>(result->data.data());
  for (size_t i = 1; i < texts.size(); ++i) {
    const float* d = q + i * dims;
    float dot = 0;
    for (size_t j = 0; j < dims; ++j) dot += q[j] * d[j];
    scores.push_back(dot);
  }
  return scores;
}

HttpResponse Api::Rerank(const HttpRequest& request, Context& ctx) {
  Parsed p = ParseBody(request.body);
  if (p.error) return ErrorResponse(*p.error, false);
  const JsonValue& body = p.json;
  absl::StatusOr<std::string> query = JsonString(body, "query");
  if (!query.ok()) return ErrorResponse({422, std::string(query.status().message()), "query", ""}, false);
  const JsonValue* docs_json = body.Find("texts") ? body.Find("texts") : body.Find("documents");
  if (docs_json == nullptr) return ErrorResponse({422, "missing field 'texts' (or 'documents')", "texts", ""}, false);
  absl::StatusOr<std::vector<std::string>> docs = Strings(*docs_json, "texts");
  if (!docs.ok()) return ErrorResponse({422, std::string(docs.status().message()), "texts", ""}, false);
  if (docs->empty()) return ErrorResponse({422, "'texts' is empty", "texts", ""}, false);
  if (static_cast<int64_t>(docs->size()) > limits_.max_inputs) {
    return ErrorResponse({413, StrCat("'texts' has ", docs->size(), " items; at most ", limits_.max_inputs, " per request"), "texts", ""}, false);
  }
  absl::StatusOr<bool> raw = JsonBool(body, "raw_scores", false);
  absl::StatusOr<bool> return_text = JsonBool(body, "return_text", false);
  absl::StatusOr<bool> return_documents = JsonBool(body, "return_documents", false);
  absl::StatusOr<int64_t> top_n = JsonInt(body, "top_n", static_cast<int64_t>(docs->size()));
  if (!raw.ok() || !return_text.ok() || !return_documents.ok() || !top_n.ok()) {
    return ErrorResponse({422, "raw_scores, return_text and return_documents must be booleans; top_n an integer", "", ""}, false);
  }
  std::optional<ApiError> error;
  absl::StatusOr<std::vector<float>> scores = ScorePairs(*tokenizer_, *dispatcher_, model_, limits_, *query, *docs, *raw, ctx.deadline, error);
  if (error) return ErrorResponse(*error, false);
  if (!scores.ok()) return ErrorResponse(FromStatus(scores.status()), false);
  std::vector<size_t> order(scores->size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return (*scores)[a] > (*scores)[b]; });
  order.resize(static_cast<size_t>(std::clamp<int64_t>(*top_n, 0, static_cast<int64_t>(order.size()))));
  const bool cohere = body.Find("documents") != nullptr;
  std::string out = cohere ? "{\"results\":[" : "[";
  for (size_t k = 0; k < order.size(); ++k) {
    if (k > 0) out += ',';
    out += StrCat("{\"index\":", order[k], cohere ? ",\"relevance_score\":" : ",\"score\":",
                  fmt::format("{}", (*scores)[order[k]]));
    if (*return_text || *return_documents) {
      out += cohere ? StrCat(",\"document\":{\"text\":\"", JsonEscape((*docs)[order[k]]), "\"}")
                    : StrCat(",\"text\":\"", JsonEscape((*docs)[order[k]]), "\"");
    }
    out += '}';
  }
  out += cohere ? "]}" : "]";
  HttpResponse r;
  r.body = std::move(out);
  return r;
}

HttpResponse Api::Score(const HttpRequest& request, Context& ctx) {
  Parsed p = ParseBody(request.body);
  if (p.error) return ErrorResponse(*p.error, true);
  const JsonValue& body = p.json;
  const JsonValue* t1 = body.Find("text_1");
  const JsonValue* t2 = body.Find("text_2");
  if (t1 == nullptr || t2 == nullptr) return ErrorResponse({422, "fields 'text_1' and 'text_2' are required", t1 ? "text_2" : "text_1", ""}, true);
  absl::StatusOr<std::vector<std::string>> a = Strings(*t1, "text_1");
  absl::StatusOr<std::vector<std::string>> b = Strings(*t2, "text_2");
  if (!a.ok()) return ErrorResponse({422, std::string(a.status().message()), "text_1", ""}, true);
  if (!b.ok()) return ErrorResponse({422, std::string(b.status().message()), "text_2", ""}, true);
  if (a->size() != 1 && a->size() != b->size()) {
    return ErrorResponse({422, "'text_1' must be one text or as many as 'text_2'", "text_1", ""}, true);
  }
  if (static_cast<int64_t>(b->size()) > limits_.max_inputs) {
    return ErrorResponse({413, StrCat("'text_2' has ", b->size(), " items; at most ", limits_.max_inputs), "text_2", ""}, true);
  }
  std::vector<float> all;
  std::optional<ApiError> error;
  if (a->size() == 1) {
    absl::StatusOr<std::vector<float>> s = ScorePairs(*tokenizer_, *dispatcher_, model_, limits_, (*a)[0], *b, false, ctx.deadline, error);
    if (error) return ErrorResponse(*error, true);
    if (!s.ok()) return ErrorResponse(FromStatus(s.status()), true);
    all = *s;
  } else {
    for (size_t i = 0; i < a->size(); ++i) {
      absl::StatusOr<std::vector<float>> s = ScorePairs(*tokenizer_, *dispatcher_, model_, limits_, (*a)[i], {(*b)[i]}, false, ctx.deadline, error);
      if (error) return ErrorResponse(*error, true);
      if (!s.ok()) return ErrorResponse(FromStatus(s.status()), true);
      all.push_back((*s)[0]);
    }
  }
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0) out += ',';
    out += StrCat("{\"index\":", i, ",\"object\":\"score\",\"score\":", fmt::format("{}", all[i]), "}");
  }
  out += StrCat("],\"model\":\"", JsonEscape(model_.name), "\"}");
  HttpResponse r;
  r.body = std::move(out);
  return r;
}

HttpResponse Api::Tokenize(const HttpRequest& request, Context&) {
  Parsed p = ParseBody(request.body);
  if (p.error) return ErrorResponse(*p.error, false);
  const JsonValue* inputs = p.json.Find("inputs");
  if (inputs == nullptr) return ErrorResponse({422, "missing field 'inputs'", "inputs", ""}, false);
  absl::StatusOr<std::vector<std::string>> texts = Strings(*inputs, "inputs");
  if (!texts.ok()) return ErrorResponse({422, std::string(texts.status().message()), "inputs", ""}, false);
  if (static_cast<int64_t>(texts->size()) > limits_.max_inputs) {
    return ErrorResponse({413, StrCat("'inputs' has ", texts->size(), " items; at most ", limits_.max_inputs), "inputs", ""}, false);
  }
  absl::StatusOr<bool> add_special = JsonBool(p.json, "add_special_tokens", true);
  if (!add_special.ok()) return ErrorResponse({422, std::string(add_special.status().message()), "add_special_tokens", ""}, false);
  tokenizer::EncodeOptions options;
  options.add_special_tokens = *add_special;
  options.max_input_chars = static_cast<size_t>(limits_.max_input_chars);
  tokenizer::Encoding enc;
  std::string out = "[";
  for (size_t i = 0; i < texts->size(); ++i) {
    absl::Status s = tokenizer_->Encode((*texts)[i], options, &enc);
    if (!s.ok()) return ErrorResponse({400, StrCat("inputs[", i, "]: ", s.message()), "inputs", ""}, false);
    if (i > 0) out += ',';
    out += '[';
    for (size_t k = 0; k < enc.ids.size(); ++k) {
      if (k > 0) out += ',';
      const std::string text = tokenizer_->IdToToken(enc.ids[k]).value_or("");
      out += StrCat("{\"id\":", enc.ids[k], ",\"text\":\"", JsonEscape(text), "\"}");
    }
    out += ']';
  }
  out += ']';
  HttpResponse r;
  r.body = std::move(out);
  return r;
}

HttpResponse Api::Decode(const HttpRequest& request, Context&) {
  Parsed p = ParseBody(request.body);
  if (p.error) return ErrorResponse(*p.error, false);
  const JsonValue* ids = p.json.Find("ids");
  if (ids == nullptr || !ids->is_array()) return ErrorResponse({422, "'ids' must be a list of token ids or a list of lists", "ids", ""}, false);
  absl::StatusOr<bool> skip = JsonBool(p.json, "skip_special_tokens", true);
  if (!skip.ok()) return ErrorResponse({422, std::string(skip.status().message()), "skip_special_tokens", ""}, false);
  const bool nested = !ids->items().empty() && ids->items()[0].is_array();
  std::vector<const JsonValue*> lists;
  if (nested) {
    for (const JsonValue& v : ids->items()) lists.push_back(&v);
  } else {
    lists.push_back(ids);
  }
  std::string out = nested ? "[" : "";
  for (size_t i = 0; i < lists.size(); ++i) {
    absl::StatusOr<std::vector<int64_t>> v = JsonIntArray(*lists[i], "ids");
    if (!v.ok()) return ErrorResponse({422, std::string(v.status().message()), "ids", ""}, false);
    std::vector<uint32_t> u;
    for (int64_t x : *v) {
      if (x < 0) return ErrorResponse({422, "token ids must be non-negative", "ids", ""}, false);
      u.push_back(static_cast<uint32_t>(x));
    }
    if (i > 0) out += ',';
    out += "\"" + JsonEscape(tokenizer_->Decode(u, *skip)) + "\"";
  }
  if (nested) out += ']';
  HttpResponse r;
  r.body = std::move(out);
  return r;
}

}  // namespace quiver::gateway
