#include "gateway/api/service.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "common/strings.h"
#include "gateway/api/errors.h"
#include "gateway/api/scores.h"

namespace quiver::gateway::api {
namespace {

const TruncationRequest kNoTruncation{.enabled = false};

// `prompt` with every {query} and {document} replaced.
std::string FillPrompt(std::string_view prompt, std::string_view query, std::string_view doc) {
  std::string out;
  out.reserve(prompt.size() + query.size() + doc.size());
  for (size_t i = 0; i < prompt.size();) {
    if (prompt.substr(i).starts_with("{query}")) {
      out += query;
      i += 7;
    } else if (prompt.substr(i).starts_with("{document}")) {
      out += doc;
      i += 10;
    } else {
      out += prompt[i++];
    }
  }
  return out;
}

// `ask`: how the request's dialect asks for truncation (TruncationRequest::ask).
absl::Status TooLong(std::string_view field, std::string_view what, size_t tokens, int64_t limit,
                     std::string_view ask) {
  return FieldError(absl::StatusCode::kInvalidArgument, field,
                    StrCat(what, " has ", tokens, " tokens; the model accepts at most ", limit,
                           ". Send shorter inputs, ask for truncation (", ask,
                           "), or start the server with --auto-truncate"),
                    Reason::kInputTooLong);
}

// Input `i`'s token ids as sent, within `limit`: longer ones cut where truncation is on (`cut`;
// from the side truncation.ids_side names, else truncation.side), else refused.
absl::StatusOr<std::vector<uint32_t>> IdsWithinLimit(std::vector<uint32_t> ids, int64_t limit,
                                                     bool cut, const TruncationRequest& truncation,
                                                     std::string_view field, size_t i) {
  if (static_cast<int64_t>(ids.size()) <= limit) return ids;
  if (!cut) return TooLong(field, StrCat("input ", i), ids.size(), limit, truncation.ask);
  if (truncation.ids_side.value_or(truncation.side) == TruncationSide::kLeft) {
    ids.erase(ids.begin(), ids.end() - limit);
  } else {
    ids.resize(static_cast<size_t>(limit));
  }
  return ids;
}

}  // namespace

absl::Status ReadPrompts(const std::string& model_dir, ModelDescription& model) {
  const std::string path =
      (std::filesystem::path(model_dir) / "config_sentence_transformers.json").string();
  if (!std::filesystem::exists(path)) return absl::OkStatus();
  QUIVER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  QUIVER_ASSIGN_OR_RETURN(JsonValue json, JsonValue::Parse(text));
  if (const JsonValue* prompts = json.Find("prompts"); prompts && prompts->is_object()) {
    for (const auto& [name, value] : prompts->members()) {
      if (!value.is_string()) {
        return absl::InvalidArgumentError(StrCat(path, ": prompts.", name, " must be a string"));
      }
      model.prompts[name] = value.as_string();
    }
  }
  if (const JsonValue* def = json.Find("default_prompt_name"); def && def->is_string()) {
    if (!model.prompts.contains(def->as_string())) {
      return absl::InvalidArgumentError(
          StrCat(path, ": default_prompt_name '", def->as_string(), "' is not one of its prompts"));
    }
    model.default_prompt_name = def->as_string();
  }
  return absl::OkStatus();
}

absl::Status ApplyDefaultPrompt(const std::string& name, const std::string& text,
                                ModelDescription& model, std::string_view name_flag,
                                std::string_view text_flag) {
  if (!name.empty() && !text.empty()) {
    return absl::InvalidArgumentError(
        StrCat(name_flag, " and ", text_flag, " exclude each other: give one"));
  }
  if (!name.empty()) {
    if (!model.prompts.contains(name)) {
      std::string known;
      for (const auto& [n, _] : model.prompts) known += StrCat(known.empty() ? "" : ", ", n);
      return absl::InvalidArgumentError(
          StrCat(name_flag, " '", name, "' is not one of the model's prompts (",
                 known.empty() ? "it has none in config_sentence_transformers.json" : known, ")"));
    }
    model.default_prompt_name = name;
    model.default_prompt.clear();
  } else if (!text.empty()) {
    model.default_prompt = text;
    model.default_prompt_name.clear();
  }
  return absl::OkStatus();
}

std::string DefaultPromptText(const ModelDescription& model) {
  if (!model.default_prompt.empty()) return model.default_prompt;
  auto it = model.prompts.find(model.default_prompt_name);
  return it != model.prompts.end() ? it->second : std::string();
}

absl::StatusOr<std::vector<uint32_t>> PromptIds(const tokenizer::Tokenizer& tokenizer,
                                                const std::string& prompt,
                                                tokenizer::EncodeOptions options) {
  options.truncation.reset();
  tokenizer::Encoding enc;
  QUIVER_RETURN_IF_ERROR(tokenizer.Encode(prompt, options, &enc));
  if (!enc.ids.empty() && tokenizer.IsSpecial(enc.ids.back())) enc.ids.pop_back();
  return std::move(enc.ids);
}

absl::Status ReadLabels(const std::string& model_dir, ModelDescription& model) {
  model.labels.clear();
  for (int64_t i = 0; i < model.num_labels; ++i) model.labels.push_back(StrCat("LABEL_", i));
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  if (model.num_labels == 0 || !std::filesystem::exists(path)) return absl::OkStatus();
  QUIVER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  QUIVER_ASSIGN_OR_RETURN(JsonValue json, JsonValue::Parse(text));
  if (const JsonValue* problem = json.Find("problem_type"); problem && problem->is_string()) {
    model.problem_type = problem->as_string();
  }
  const JsonValue* id2label = json.Find("id2label");
  if (id2label == nullptr || !id2label->is_object()) return absl::OkStatus();
  for (const auto& [key, value] : id2label->members()) {
    int64_t id = -1;
    if (!key.empty() && key.size() < 10 &&
        key.find_first_not_of("0123456789") == std::string::npos) {
      id = std::stoll(key);
    }
    if (id < 0 || id >= model.num_labels || !value.is_string()) {
      return absl::InvalidArgumentError(StrCat(path, ": id2label[\"", key,
                                               "\"] must name a label id below ", model.num_labels,
                                               " with a string"));
    }
    model.labels[static_cast<size_t>(id)] = value.as_string();
  }
  return absl::OkStatus();
}

ScorePrompt Qwen3RerankerPrompt() {
  return {
      "<|im_start|>system\nJudge whether the Document meets the requirements based on the "
      "Query and the Instruct provided. Note that the answer can only be \"yes\" or "
      "\"no\".<|im_end|>\n<|im_start|>user\n",
      "<Instruct>: Given a web search query, retrieve relevant passages that answer the "
      "query\n<Query>: {query}\n<Document>: {document}",
      "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"};
}

Service::Service(ModelDescription model, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                 std::shared_ptr<Dispatcher> dispatcher, ApiLimits limits, MetricsRegistry* metrics)
    : model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      dispatcher_(std::move(dispatcher)),
      limits_(std::move(limits)) {
  if (metrics != nullptr) {
    tokenize_seconds_ =
        &metrics->GetHistogram("quiver_http_tokenize_seconds", "Tokenization time per request",
                               MetricsRegistry::ExponentialBuckets(0.0001, 2, 18));
    input_tokens_ = &metrics->GetHistogram("quiver_http_input_tokens", "Tokens per input",
                                           MetricsRegistry::ExponentialBuckets(4, 2, 14));
    queue_seconds_ = &metrics->GetHistogram(
        "quiver_http_queue_seconds", "Time a request's chunks waited in the replicas' queues",
        MetricsRegistry::ExponentialBuckets(0.0001, 2, 18));
    inference_seconds_ =
        &metrics->GetHistogram("quiver_http_inference_seconds", "Compute time per request",
                               MetricsRegistry::ExponentialBuckets(0.0001, 2, 18));
  }
}

namespace {

// The replicas' answer has one row per input, every row the same size: otherwise rows would be
// given to the wrong inputs, so the request fails instead.
absl::Status CheckRows(const ReplicaResult& result, int64_t rows) {
  if (result.num_seqs == rows && rows > 0 && result.data.size() % static_cast<size_t>(rows) == 0) {
    return absl::OkStatus();
  }
  return absl::InternalError(StrCat("the replicas answered ", result.num_seqs, " rows (",
                                    result.data.size(), " bytes) for ", rows, " inputs"));
}

}  // namespace

absl::StatusOr<ReplicaResult> Service::Run(CallKind kind, const Tokenized& t,
                                           const quiver::v1::OutputOptions& output,
                                           const CallContext& call) const {
  absl::StatusOr<ReplicaResult> result = dispatcher_->Run(kind, t.sequences, output, call);
  if (result.ok() && queue_seconds_ != nullptr) {
    queue_seconds_->Observe(static_cast<double>(result->queue_wait_us) / 1e6);
    inference_seconds_->Observe(static_cast<double>(result->compute_us) / 1e6);
  }
  return result;
}

void Service::Observe(const Tokenized& t, std::chrono::steady_clock::time_point start) const {
  if (tokenize_seconds_ == nullptr) return;
  tokenize_seconds_->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  for (const Sequence& s : t.sequences) input_tokens_->Observe(static_cast<double>(s.ids.size()));
}

absl::Status Service::CheckModel(const std::string& requested) const {
  if (requested.empty() || requested == model_.name) return absl::OkStatus();
  return FieldError(
      absl::StatusCode::kNotFound, "model",
      StrCat("model '", requested, "' is not served here; this server serves '", model_.name, "'"),
      Reason::kModelNotFound);
}

absl::StatusOr<std::string> Service::Prompt(const std::string& prompt_name) const {
  if (prompt_name.empty()) return DefaultPromptText(model_);  // its name checked at start-up
  auto it = model_.prompts.find(prompt_name);
  if (it == model_.prompts.end()) {
    // TEI's wording for the list, which clients parse (tei-client's prompt_names).
    std::string known;
    for (const auto& [n, _] : model_.prompts) {
      known += StrCat(known.empty() ? "" : ", ", "\"", n, "\"");
    }
    return FieldError(absl::StatusCode::kInvalidArgument, "prompt_name",
                      StrCat("prompt_name '", prompt_name,
                             "' is not one of the model's sentence-transformers prompts. "
                             "Available prompts: [",
                             known, "]"));
  }
  return it->second;
}

absl::StatusOr<int64_t> Service::TruncationLimit(const TruncationRequest& truncation) const {
  if (truncation.max_tokens > model_.max_input_tokens) {
    return FieldError(absl::StatusCode::kInvalidArgument, "truncate_prompt_tokens",
                      StrCat("truncate_prompt_tokens ", truncation.max_tokens,
                             " is more than the model accepts (", model_.max_input_tokens, ")"));
  }
  return truncation.max_tokens > 0 ? truncation.max_tokens : model_.max_input_tokens;
}

tokenizer::EncodeOptions Service::EncodeOptionsFor(const TruncationRequest& truncation,
                                                   int64_t max_tokens,
                                                   bool add_special_tokens) const {
  tokenizer::EncodeOptions options;
  options.add_special_tokens = add_special_tokens;
  options.max_input_chars = static_cast<size_t>(limits_.max_input_chars);
  if (truncation.enabled.value_or(limits_.auto_truncate)) {
    options.truncation = tokenizer::Truncation{
        static_cast<size_t>(max_tokens), tokenizer::TruncationStrategy::kLongestFirst,
        truncation.side == TruncationSide::kLeft ? tokenizer::TruncationSide::kLeft
                                                 : tokenizer::TruncationSide::kRight};
  }
  return options;
}

absl::StatusOr<Tokenized> Service::Tokenize(const std::vector<Input>& inputs,
                                            const TruncationRequest& truncation,
                                            const std::string& prompt_name, std::string_view field,
                                            const CallContext& call,
                                            bool add_special_tokens) const {
  QUIVER_ASSIGN_OR_RETURN(const std::string prompt, Prompt(prompt_name));
  QUIVER_ASSIGN_OR_RETURN(const int64_t limit, TruncationLimit(truncation));
  const bool cut = truncation.enabled.value_or(limits_.auto_truncate);
  const tokenizer::EncodeOptions options = EncodeOptionsFor(truncation, limit, add_special_tokens);
  const auto start = std::chrono::steady_clock::now();
  Tokenized out;
  out.sequences.reserve(inputs.size());
  tokenizer::Encoding enc;
  std::string text;
  // Where the model pools without its prompt: the prompt's length as sentence-transformers
  // measures it (the prompt tokenized alone, with special tokens, less a trailing special one).
  std::vector<uint32_t> prompt_ids;
  if (model_.exclude_prompt && !prompt.empty()) {
    absl::StatusOr<std::vector<uint32_t>> ids =
        PromptIds(*tokenizer_, prompt, EncodeOptionsFor(kNoTruncation, 0, add_special_tokens));
    if (!ids.ok()) {
      return FieldError(absl::StatusCode::kInvalidArgument, "prompt_name",
                        StrCat("the prompt: ", ids.status().message()), Reason::kTokenizer);
    }
    prompt_ids = *std::move(ids);
  }
  const size_t prompt_tokens = prompt_ids.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    QUIVER_RETURN_IF_ERROR(call.Check("tokenization"));  // each input's cost is bounded
    const Input& input = inputs[i];
    Sequence seq;
    if (input.is_ids) {
      QUIVER_ASSIGN_OR_RETURN(seq.ids, IdsWithinLimit(input.ids, limit, cut, truncation, field, i));
    } else {
      text = prompt;
      text += input.text;
      if (absl::Status s = tokenizer_->Encode(text, options, &enc); !s.ok()) {
        return FieldError(absl::StatusCode::kInvalidArgument, field,
                          StrCat("input ", i, ": ", s.message()), Reason::kTokenizer);
      }
      if (static_cast<int64_t>(enc.ids.size()) > limit) {
        return TooLong(field, StrCat("input ", i), enc.ids.size(), limit, truncation.ask);
      }
      seq.ids = enc.ids;
      seq.type_ids = enc.type_ids;
      if (prompt_tokens > 0 && prompt_tokens >= seq.ids.size()) {
        return FieldError(
            absl::StatusCode::kInvalidArgument, field,
            StrCat("input ", i, ": the prompt takes ", prompt_tokens, " of its ", seq.ids.size(),
                   " tokens, and the model pools without the prompt's tokens "
                   "(include_prompt false): nothing is left to pool"),
            Reason::kInputTooLong);
      }
      // Cut from the left, an input loses the prompt's tokens first: what is left out of the
      // pooling would be text. Refused rather than answered differently from the model's own.
      if (prompt_tokens > 0 && cut && truncation.side == TruncationSide::kLeft &&
          static_cast<int64_t>(seq.ids.size()) == limit &&
          !std::equal(prompt_ids.begin(), prompt_ids.end(), seq.ids.begin())) {
        return FieldError(absl::StatusCode::kInvalidArgument, "truncation_direction",
                          StrCat("input ", i,
                                 ": cut from the left, it lost the start of the "
                                 "prompt, and the model pools without the prompt's tokens "
                                 "(include_prompt false); cut from the right "
                                 "(truncation_direction Right) or send a shorter input"));
      }
      seq.prompt_tokens = static_cast<uint32_t>(prompt_tokens);
    }
    if (seq.ids.empty()) {
      return FieldError(absl::StatusCode::kInvalidArgument, field,
                        StrCat("input ", i, " is empty after tokenization"), Reason::kEmpty);
    }
    out.tokens += static_cast<int64_t>(seq.ids.size());
    out.sequences.push_back(std::move(seq));
  }
  Observe(out, start);
  return out;
}

absl::StatusOr<Tokenized> Service::TokenizePrompts(const std::vector<std::string>& queries,
                                                   const std::vector<std::string>& documents,
                                                   const TruncationRequest& truncation,
                                                   std::string_view field,
                                                   const CallContext& call) const {
  const auto start = std::chrono::steady_clock::now();
  QUIVER_ASSIGN_OR_RETURN(const int64_t limit, TruncationLimit(truncation));
  const tokenizer::EncodeOptions plain = EncodeOptionsFor(kNoTruncation, 0, false);
  tokenizer::Encoding prefix, suffix, middle, full;
  QUIVER_RETURN_IF_ERROR(tokenizer_->Encode(model_.score_prompt.prefix, plain, &prefix));
  QUIVER_RETURN_IF_ERROR(tokenizer_->Encode(model_.score_prompt.suffix, plain, &suffix));
  const int64_t fixed = static_cast<int64_t>(prefix.ids.size() + suffix.ids.size() +
                                             tokenizer_->NumAddedTokens(false));
  if (fixed >= limit) {
    return FieldError(
        absl::StatusCode::kInvalidArgument, field,
        StrCat("the reranker's prompt alone has ", fixed, " tokens; the limit is ", limit));
  }
  const tokenizer::EncodeOptions options = EncodeOptionsFor(truncation, limit - fixed, false);
  Tokenized t;
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < documents.size(); ++i) {
    QUIVER_RETURN_IF_ERROR(call.Check("tokenization"));
    const std::string& q = queries.size() == 1 ? queries[0] : queries[i];
    const std::string text = FillPrompt(model_.score_prompt.middle, q, documents[i]);
    if (absl::Status s = tokenizer_->Encode(text, options, &middle); !s.ok()) {
      return FieldError(absl::StatusCode::kInvalidArgument, field,
                        StrCat("input ", i, ": ", s.message()), Reason::kTokenizer);
    }
    ids = prefix.ids;
    ids.insert(ids.end(), middle.ids.begin(), middle.ids.end());
    ids.insert(ids.end(), suffix.ids.begin(), suffix.ids.end());
    tokenizer_->AddSpecialTokens(ids, &full);
    if (static_cast<int64_t>(full.ids.size()) > limit) {
      return TooLong(field, StrCat("the query with document ", i), full.ids.size(), limit,
                     truncation.ask);
    }
    t.tokens += static_cast<int64_t>(full.ids.size());
    t.sequences.push_back({full.ids, full.type_ids, {}});
  }
  Observe(t, start);
  return t;
}

absl::StatusOr<Embeddings> Service::Embed(const EmbedRequest& request,
                                          quiver::v1::OutputType output_type,
                                          const CallContext& call) const {
  QUIVER_RETURN_IF_ERROR(CheckModel(request.model));
  if (!model_.can_embed) {
    return FieldError(
        absl::StatusCode::kInvalidArgument, "model",
        model_.sparse_width > 0 ? StrCat("model '", model_.name,
                                         "' is a SPLADE model: it answers /embed_sparse, not dense "
                                         "embeddings")
        : model_.num_labels > 1
            ? StrCat("model '", model_.name, "' is a classifier with ", model_.num_labels,
                     " labels: it answers /predict, not "
                     "embeddings")
            : StrCat("model '", model_.name,
                     "' is a scoring model: it answers /rerank, /v1/score and "
                     "/predict, not embeddings"));
  }
  if (request.dimensions > model_.hidden_size) {
    return FieldError(
        absl::StatusCode::kInvalidArgument, "dimensions",
        StrCat("'dimensions' is ", request.dimensions, "; the model has ", model_.hidden_size));
  }
  QUIVER_ASSIGN_OR_RETURN(
      Tokenized t, Tokenize(request.inputs, request.truncation, request.prompt_name, "input", call,
                            request.add_special_tokens));
  quiver::v1::OutputOptions output;
  output.set_output_type(output_type);
  if (request.normalize) output.set_normalize(*request.normalize);
  if (request.dimensions > 0) output.set_dimensions(static_cast<uint32_t>(request.dimensions));
  QUIVER_ASSIGN_OR_RETURN(ReplicaResult result, Run(CallKind::kEmbed, t, output, call));
  QUIVER_RETURN_IF_ERROR(CheckRows(result, static_cast<int64_t>(t.sequences.size())));
  return Embeddings{std::move(result), t.tokens};
}

absl::StatusOr<TokenEmbeddings> Service::EmbedAll(const EmbedRequest& request,
                                                  const CallContext& call) const {
  QUIVER_RETURN_IF_ERROR(CheckModel(request.model));
  if (!model_.can_embed) {
    return FieldError(absl::StatusCode::kInvalidArgument, "model",
                      StrCat("model '", model_.name,
                             "' is not an embedding model: /embed_all answers the token "
                             "embeddings of one (",
                             model_.sparse_width > 0 ? "a SPLADE model answers /embed_sparse"
                                                     : "a scoring model answers /rerank and "
                                                       "/predict",
                             ")"));
  }
  QUIVER_ASSIGN_OR_RETURN(
      Tokenized t, Tokenize(request.inputs, request.truncation, request.prompt_name, "inputs", call,
                            request.add_special_tokens));
  const int64_t width =
      model_.token_hidden_size > 0 ? model_.token_hidden_size : model_.hidden_size;
  const int64_t values = t.tokens * width;
  if (values > kMaxTokenEmbeddingValues) {
    return FieldError(absl::StatusCode::kOutOfRange, "inputs",
                      StrCat("the answer would hold ", t.tokens, " tokens x ", width,
                             " values; /embed_all answers at most ", kMaxTokenEmbeddingValues,
                             " values per request: send fewer or shorter inputs"),
                      Reason::kTooManyInputs);
  }
  TokenEmbeddings out;
  out.tokens = t.tokens;
  for (Sequence& seq : t.sequences) {
    // Every token its own span, the prompt's too (TEI answers them all): nothing is pooled away.
    seq.prompt_tokens = 0;
    seq.spans.clear();
    for (uint32_t i = 0; i < seq.ids.size(); ++i) seq.spans.emplace_back(i, i + 1);
    out.rows.push_back(static_cast<int64_t>(seq.ids.size()));
  }
  quiver::v1::OutputOptions output;
  output.set_output_type(quiver::v1::OUTPUT_F32);
  output.set_normalize(false);
  output.set_raw_hidden(true);
  QUIVER_ASSIGN_OR_RETURN(out.result, Run(CallKind::kEmbed, t, output, call));
  QUIVER_RETURN_IF_ERROR(CheckRows(out.result, t.tokens));
  return out;
}

absl::StatusOr<Embeddings> Service::EmbedContextualized(const ContextualizedRequest& request,
                                                        quiver::v1::OutputType output_type,
                                                        const CallContext& call) const {
  QUIVER_RETURN_IF_ERROR(CheckModel(request.model));
  if (!model_.can_embed || model_.pooling != "mean") {
    return FieldError(absl::StatusCode::kInvalidArgument, "model",
                      StrCat("model '", model_.name,
                             "' does not support contextualized embeddings (late chunking needs "
                             "a mean-pooling embedding model)"));
  }
  if (request.dimensions > model_.hidden_size) {
    return FieldError(
        absl::StatusCode::kInvalidArgument, "dimensions",
        StrCat("'dimensions' is ", request.dimensions, "; the model has ", model_.hidden_size));
  }
  // Where the special tokens put the text: the index of a sentinel id after wrapping.
  tokenizer::Encoding probe;
  tokenizer_->AddSpecialTokens({UINT32_MAX}, &probe);
  const uint32_t prefix = static_cast<uint32_t>(
      std::find(probe.ids.begin(), probe.ids.end(), UINT32_MAX) - probe.ids.begin());
  const tokenizer::EncodeOptions options = EncodeOptionsFor(kNoTruncation, 0, false);
  Tokenized t;
  tokenizer::Encoding enc;
  for (size_t d = 0; d < request.documents.size(); ++d) {
    std::vector<uint32_t> ids;
    Sequence seq;
    const std::vector<std::string>& chunks = request.documents[d];
    for (size_t j = 0; j < chunks.size(); ++j) {
      QUIVER_RETURN_IF_ERROR(call.Check("tokenization"));
      if (absl::Status s = tokenizer_->Encode(chunks[j], options, &enc); !s.ok()) {
        return FieldError(absl::StatusCode::kInvalidArgument, "input",
                          StrCat("input[", d, "][", j, "]: ", s.message()), Reason::kTokenizer);
      }
      if (enc.ids.empty()) {
        return FieldError(absl::StatusCode::kInvalidArgument, "input",
                          StrCat("input[", d, "][", j, "] is empty after tokenization"),
                          Reason::kEmpty);
      }
      const uint32_t begin = prefix + static_cast<uint32_t>(ids.size());
      ids.insert(ids.end(), enc.ids.begin(), enc.ids.end());
      seq.spans.emplace_back(begin, prefix + static_cast<uint32_t>(ids.size()));
      if (static_cast<int64_t>(ids.size()) > model_.max_input_tokens) break;
    }
    tokenizer_->AddSpecialTokens(ids, &enc);
    if (static_cast<int64_t>(enc.ids.size()) > model_.max_input_tokens) {
      return FieldError(absl::StatusCode::kInvalidArgument, "input",
                        StrCat("document ", d, " has ", enc.ids.size(),
                               " tokens or more with its special tokens; the model accepts at "
                               "most ",
                               model_.max_input_tokens,
                               " (a document is embedded in one pass: split it into several)"),
                        Reason::kInputTooLong);
    }
    seq.ids = enc.ids;
    t.tokens += static_cast<int64_t>(seq.ids.size());
    t.sequences.push_back(std::move(seq));
  }
  quiver::v1::OutputOptions output;
  output.set_output_type(output_type);
  if (request.dimensions > 0) {
    output.set_dimensions(static_cast<uint32_t>(request.dimensions));
    output.set_normalize(true);
  }
  QUIVER_ASSIGN_OR_RETURN(ReplicaResult result, Run(CallKind::kEmbed, t, output, call));
  int64_t chunks = 0;
  for (const std::vector<std::string>& doc : request.documents) {
    chunks += static_cast<int64_t>(doc.size());
  }
  QUIVER_RETURN_IF_ERROR(CheckRows(result, chunks));
  return Embeddings{std::move(result), t.tokens};
}

absl::StatusOr<Scores> Service::ScoreByCosine(const std::vector<std::string>& queries,
                                              const std::vector<std::string>& documents,
                                              const TruncationRequest& truncation,
                                              std::string_view field,
                                              const CallContext& call) const {
  // An embedding model: cosine similarity of the normalized embeddings, the queries' rows
  // first, then the documents'.
  std::vector<Input> inputs;
  inputs.reserve(queries.size() + documents.size());
  for (const std::string& q : queries) inputs.push_back({q, {}, false});
  for (const std::string& d : documents) inputs.push_back({d, {}, false});
  QUIVER_ASSIGN_OR_RETURN(Tokenized t, Tokenize(inputs, truncation, "", field, call));
  quiver::v1::OutputOptions output;
  output.set_normalize(true);
  QUIVER_ASSIGN_OR_RETURN(ReplicaResult result, Run(CallKind::kEmbed, t, output, call));
  QUIVER_RETURN_IF_ERROR(CheckRows(result, static_cast<int64_t>(inputs.size())));
  const size_t dims = result.data.size() / inputs.size() / sizeof(float);
  std::vector<float> rows(result.data.size() / sizeof(float));
  std::memcpy(rows.data(), result.data.data(), rows.size() * sizeof(float));
  Scores out;
  for (size_t i = 0; i < documents.size(); ++i) {
    const float* q = rows.data() + (queries.size() == 1 ? 0 : i) * dims;
    const float* d = rows.data() + (queries.size() + i) * dims;
    out.scores.push_back(Dot(q, d, dims));
  }
  out.tokens = t.tokens;
  return out;
}

absl::StatusOr<Tokenized> Service::TokenizePairs(const std::vector<std::string>& queries,
                                                 const std::vector<std::string>& documents,
                                                 const TruncationRequest& truncation,
                                                 std::string_view field,
                                                 const CallContext& call) const {
  Tokenized t;
  const auto start = std::chrono::steady_clock::now();
  QUIVER_ASSIGN_OR_RETURN(const int64_t limit, TruncationLimit(truncation));
  const tokenizer::EncodeOptions options = EncodeOptionsFor(truncation, limit, true);
  // Each text tokenized once (one query for all documents, or one per pair), then paired.
  const tokenizer::EncodeOptions plain = EncodeOptionsFor(kNoTruncation, 0, false);
  std::vector<std::vector<uint32_t>> query_ids(queries.size());
  tokenizer::Encoding enc, doc;
  for (size_t q = 0; q < queries.size(); ++q) {
    QUIVER_RETURN_IF_ERROR(call.Check("tokenization"));
    if (absl::Status s = tokenizer_->Encode(queries[q], plain, &enc); !s.ok()) {
      return FieldError(absl::StatusCode::kInvalidArgument, field,
                        StrCat("query ", q, ": ", s.message()), Reason::kTokenizer);
    }
    query_ids[q] = enc.ids;
  }
  for (size_t i = 0; i < documents.size(); ++i) {
    QUIVER_RETURN_IF_ERROR(call.Check("tokenization"));
    absl::Status s = tokenizer_->Encode(documents[i], plain, &doc);
    if (s.ok()) {
      s = tokenizer_->EncodePairIds(query_ids[queries.size() == 1 ? 0 : i], doc.ids, options, &enc);
    }
    if (!s.ok()) {
      return FieldError(absl::StatusCode::kInvalidArgument, field,
                        StrCat("input ", i, ": ", s.message()), Reason::kTokenizer);
    }
    if (static_cast<int64_t>(enc.ids.size()) > limit) {
      return TooLong(field, StrCat("the query with document ", i), enc.ids.size(), limit,
                     truncation.ask);
    }
    t.tokens += static_cast<int64_t>(enc.ids.size());
    t.sequences.push_back({enc.ids, enc.type_ids, {}});
  }
  Observe(t, start);
  return t;
}

absl::StatusOr<Scores> Service::Score(const std::vector<std::string>& queries,
                                      const std::vector<std::string>& documents, bool raw,
                                      const TruncationRequest& truncation, std::string_view field,
                                      const CallContext& call) const {
  if (queries.size() != 1 && queries.size() != documents.size()) {
    return absl::InternalError(
        StrCat("Score: ", queries.size(), " queries for ", documents.size(), " documents"));
  }
  if (model_.sparse_width > 0) {
    return FieldError(absl::StatusCode::kInvalidArgument, std::string(field),
                      StrCat("model '", model_.name,
                             "' is a SPLADE model: it answers "
                             "/embed_sparse; reranking needs a cross-encoder or a dense "
                             "embedding model"));
  }
  if (model_.can_score && model_.num_labels > 1) {
    return FieldError(absl::StatusCode::kInvalidArgument, std::string(field),
                      StrCat("model '", model_.name, "' is a classifier with ", model_.num_labels,
                             " labels: it answers /predict; reranking needs a one-label "
                             "cross-encoder or an embedding model"));
  }
  if (!model_.can_score) return ScoreByCosine(queries, documents, truncation, field, call);
  Tokenized t;
  if (!model_.score_prompt.empty()) {
    QUIVER_ASSIGN_OR_RETURN(t, TokenizePrompts(queries, documents, truncation, field, call));
  } else {
    QUIVER_ASSIGN_OR_RETURN(t, TokenizePairs(queries, documents, truncation, field, call));
  }
  QUIVER_ASSIGN_OR_RETURN(ReplicaResult result, Run(CallKind::kScore, t, {}, call));
  QUIVER_RETURN_IF_ERROR(CheckRows(result, static_cast<int64_t>(documents.size())));
  // The first logit of each row (a reranker has one).
  const size_t row_bytes = result.data.size() / documents.size();
  if (row_bytes < sizeof(float)) {
    return absl::InternalError(StrCat("the replicas answered ", row_bytes, "-byte score rows"));
  }
  Scores out;
  for (size_t i = 0; i < documents.size(); ++i) {
    float v;
    std::memcpy(&v, result.data.data() + i * row_bytes, sizeof(float));
    out.scores.push_back(raw ? v : Sigmoid(v));
  }
  out.tokens = t.tokens;
  return out;
}

absl::StatusOr<std::vector<std::string>> Service::KeepFirstTokens(
    const std::vector<std::string>& texts, int64_t max_tokens, std::string_view field,
    const CallContext& call) const {
  const tokenizer::EncodeOptions plain = EncodeOptionsFor(kNoTruncation, 0, false);
  std::vector<std::string> out;
  out.reserve(texts.size());
  tokenizer::Encoding enc;
  std::vector<tokenizer::Tokenizer::Offset> offsets;
  for (size_t i = 0; i < texts.size(); ++i) {
    QUIVER_RETURN_IF_ERROR(call.Check("tokenization"));
    if (absl::Status s = tokenizer_->EncodeWithOffsets(texts[i], plain, &enc, &offsets); !s.ok()) {
      return FieldError(absl::StatusCode::kInvalidArgument, field,
                        StrCat("document ", i, ": ", s.message()), Reason::kTokenizer);
    }
    if (static_cast<int64_t>(enc.ids.size()) <= max_tokens) {
      out.push_back(texts[i]);
      continue;
    }
    const size_t last = static_cast<size_t>(max_tokens) - 1;
    if (last < offsets.size() && offsets[last].has_value() &&
        offsets[last]->second <= texts[i].size()) {
      // At a character's end: a byte-level token may end inside one.
      size_t end = offsets[last]->second;
      while (end < texts[i].size() && (static_cast<uint8_t>(texts[i][end]) & 0xC0) == 0x80) ++end;
      out.push_back(texts[i].substr(0, end));
    } else {
      enc.ids.resize(static_cast<size_t>(max_tokens));
      out.push_back(tokenizer_->Decode(enc.ids, /*skip_special_tokens=*/true));
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<float>>> Service::EmbedSparse(
    const EmbedRequest& request, const CallContext& call) const {
  QUIVER_RETURN_IF_ERROR(CheckModel(request.model));
  if (model_.sparse_width <= 0) {
    return FieldError(absl::StatusCode::kInvalidArgument, "inputs",
                      StrCat("model '", model_.name, "' is ",
                             model_.can_score ? "a scoring model" : "a dense embedding model",
                             ": /embed_sparse needs a SPLADE model (a masked-LM head)"));
  }
  QUIVER_ASSIGN_OR_RETURN(
      Tokenized t, Tokenize(request.inputs, request.truncation, request.prompt_name, "inputs", call,
                            request.add_special_tokens));
  QUIVER_ASSIGN_OR_RETURN(ReplicaResult result, Run(CallKind::kScore, t, {}, call));
  const size_t n = t.sequences.size(), width = static_cast<size_t>(model_.sparse_width);
  if (result.data.size() != n * width * sizeof(float)) {
    return absl::InternalError(StrCat("the replicas answered ", result.data.size(), " bytes for ",
                                      n, " inputs of ", width, " terms"));
  }
  std::vector<std::vector<float>> out(n, std::vector<float>(width));
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(out[i].data(), result.data.data() + i * width * sizeof(float),
                width * sizeof(float));
  }
  return out;
}

absl::StatusOr<Classified> Service::Classify(const std::vector<PredictInput>& inputs,
                                             const TruncationRequest& truncation,
                                             bool add_special_tokens, std::string_view field,
                                             const CallContext& call) const {
  if (!model_.can_score || !model_.score_prompt.empty()) {
    return FieldError(absl::StatusCode::kInvalidArgument, field,
                      StrCat("model '", model_.name, "' is ",
                             model_.can_score ? "a prompt-based reranker" : "an embedding model",
                             ": classification needs a sequence-classification model"));
  }
  const auto start = std::chrono::steady_clock::now();
  QUIVER_ASSIGN_OR_RETURN(const int64_t limit, TruncationLimit(truncation));
  const bool cut = truncation.enabled.value_or(limits_.auto_truncate);
  const tokenizer::EncodeOptions single = EncodeOptionsFor(truncation, limit, add_special_tokens);
  const tokenizer::EncodeOptions plain = EncodeOptionsFor(kNoTruncation, 0, false);
  Tokenized t;
  tokenizer::Encoding enc, first, second;
  for (size_t i = 0; i < inputs.size(); ++i) {
    QUIVER_RETURN_IF_ERROR(call.Check("tokenization"));
    const PredictInput& in = inputs[i];
    if (in.is_ids) {
      QUIVER_ASSIGN_OR_RETURN(std::vector<uint32_t> ids,
                              IdsWithinLimit(in.ids, limit, cut, truncation, field, i));
      t.tokens += static_cast<int64_t>(ids.size());
      t.sequences.push_back({std::move(ids), {}, {}});
      continue;
    }
    absl::Status s;
    if (!in.pair) {
      s = tokenizer_->Encode(in.text, single, &enc);
    } else {
      s = tokenizer_->Encode(in.text, plain, &first);
      if (s.ok()) s = tokenizer_->Encode(*in.pair, plain, &second);
      if (s.ok()) s = tokenizer_->EncodePairIds(first.ids, second.ids, single, &enc);
    }
    if (!s.ok()) {
      return FieldError(absl::StatusCode::kInvalidArgument, field,
                        StrCat("input ", i, ": ", s.message()), Reason::kTokenizer);
    }
    if (static_cast<int64_t>(enc.ids.size()) > limit) {
      return TooLong(field, StrCat("input ", i), enc.ids.size(), limit, truncation.ask);
    }
    if (enc.ids.empty()) {
      return FieldError(absl::StatusCode::kInvalidArgument, field,
                        StrCat("input ", i, " is empty after tokenization"), Reason::kEmpty);
    }
    t.tokens += static_cast<int64_t>(enc.ids.size());
    t.sequences.push_back({enc.ids, enc.type_ids, {}});
  }
  Observe(t, start);
  QUIVER_ASSIGN_OR_RETURN(ReplicaResult result, Run(CallKind::kScore, t, {}, call));
  const int64_t n = static_cast<int64_t>(inputs.size());
  QUIVER_RETURN_IF_ERROR(CheckRows(result, n));
  const size_t labels = static_cast<size_t>(std::max<int64_t>(1, model_.num_labels));
  if (result.data.size() != static_cast<size_t>(n) * labels * sizeof(float)) {
    return absl::InternalError(StrCat("the replicas answered ", result.data.size(), " bytes for ",
                                      n, " inputs of ", labels, " labels"));
  }
  Classified out;
  out.tokens = t.tokens;
  out.logits.assign(static_cast<size_t>(n), std::vector<float>(labels));
  for (size_t i = 0; i < out.logits.size(); ++i) {
    std::memcpy(out.logits[i].data(), result.data.data() + i * labels * sizeof(float),
                labels * sizeof(float));
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<TokenPiece>>> Service::TokenizeForDisplay(
    const TokenizeRequest& request) const {
  QUIVER_ASSIGN_OR_RETURN(const std::string prompt, Prompt(request.prompt_name));
  const tokenizer::EncodeOptions options =
      EncodeOptionsFor(kNoTruncation, 0, request.add_special_tokens);
  std::vector<std::vector<TokenPiece>> out;
  tokenizer::Encoding enc;
  std::vector<tokenizer::Tokenizer::Offset> offsets;
  for (size_t i = 0; i < request.texts.size(); ++i) {
    const std::string text = prompt + request.texts[i];
    if (absl::Status s = tokenizer_->EncodeWithOffsets(text, options, &enc, &offsets); !s.ok()) {
      return FieldError(absl::StatusCode::kInvalidArgument, "inputs",
                        StrCat("inputs[", i, "]: ", s.message()), Reason::kTokenizer);
    }
    std::vector<TokenPiece> pieces;
    pieces.reserve(enc.ids.size());
    for (size_t k = 0; k < enc.ids.size(); ++k) {
      const uint32_t id = enc.ids[k];
      if (offsets[k]) {
        const auto [b, e] = *offsets[k];
        pieces.push_back({id, text.substr(b, e - b), false, b, e});
      } else {
        pieces.push_back({id, tokenizer_->IdToToken(id).value_or(""), tokenizer_->IsSpecial(id),
                          std::nullopt, std::nullopt});
      }
    }
    out.push_back(std::move(pieces));
  }
  return out;
}

absl::StatusOr<std::vector<uint32_t>> Service::TokenIds(const std::string& text,
                                                        bool add_special_tokens,
                                                        std::string_view field) const {
  tokenizer::Encoding enc;
  if (absl::Status s =
          tokenizer_->Encode(text, EncodeOptionsFor(kNoTruncation, 0, add_special_tokens), &enc);
      !s.ok()) {
    return FieldError(absl::StatusCode::kInvalidArgument, field, std::string(s.message()),
                      Reason::kTokenizer);
  }
  return std::move(enc.ids);
}

std::string Service::TokenString(uint32_t id) const {
  return tokenizer_->IdToToken(id).value_or("");
}

absl::StatusOr<std::vector<std::string>> Service::Decode(const DecodeRequest& request) const {
  std::vector<std::string> out;
  out.reserve(request.ids.size());
  for (size_t i = 0; i < request.ids.size(); ++i) {
    const std::vector<uint32_t>& ids = request.ids[i];
    for (size_t j = 0; j < ids.size(); ++j) {
      if (!tokenizer_->IdToToken(ids[j]).has_value()) {
        const std::string where = request.ids.size() == 1
                                      ? StrCat(request.field, "[", j, "]")
                                      : StrCat(request.field, "[", i, "][", j, "]");
        return FieldError(
            absl::StatusCode::kFailedPrecondition, request.field,
            StrCat("'", where, "': token id ", ids[j], " is not in the tokenizer's vocabulary (",
                   tokenizer_->vocab_size(), " ids and its added tokens)"));
      }
    }
    out.push_back(tokenizer_->Decode(ids, request.skip_special_tokens));
  }
  return out;
}

}  // namespace quiver::gateway::api
