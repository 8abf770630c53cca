// The requests of every API dialect as typed values, parsed from a JSON body in one call each:
// shapes and types are checked here (FAILED_PRECONDITION naming the field: 422), limits that need
// no model (OUT_OF_RANGE for --max-inputs, INVALID_ARGUMENT for empty batches), and defaults are
// the dialect's own. What needs the model or the tokenizer (token counts, dimensions against the
// hidden size, prompt names) is checked when the request is served (gateway/api/service.h).
// Unit-tested without a server: tests/gateway/requests_test.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"

namespace quiver::gateway::api {

// What a request may cost, set by the server's flags.
struct ApiLimits {
  // Inputs (texts, token lists, documents or chunks) per request (--max-inputs). Larger requests
  // are refused; within it they are split into chunks for the replicas.
  int64_t max_inputs = 2048;
  // Characters per input, checked before tokenizing (a guard against huge texts).
  int64_t max_input_chars = 200000;
  // Seconds a request may take, queueing and retries included.
  double request_timeout_s = 60;
  std::string api_key;  // empty: no authentication
  // --auto-truncate: inputs longer than the model accepts are cut to its limit instead of
  // refused, unless a request says otherwise (TEI's "truncate": false).
  bool auto_truncate = false;
};

// One input: a text, or token ids the client tokenized itself.
struct Input {
  std::string text;
  std::vector<uint32_t> ids;
  bool is_ids = false;
};

enum class TruncationSide { kRight, kLeft };  // kLeft cuts the start, keeping the end

// Whether and how to cut over-long inputs. `enabled` unset: the server's --auto-truncate.
struct TruncationRequest {
  std::optional<bool> enabled;
  TruncationSide side = TruncationSide::kRight;
  // The side token-id inputs are cut from where it differs from `side` (vLLM keeps their end
  // unless truncation_side says); unset: `side`.
  std::optional<TruncationSide> ids_side;
  int64_t max_tokens = 0;  // > 0: cut to this many tokens (vLLM's truncate_prompt_tokens)
  // How this request's dialect asks for truncation, for the error of an over-long input (a
  // literal: copies of the request keep pointing at it).
  std::string_view ask = "\"truncate\": true";
};

// How embeddings are sent back.
enum class EmbeddingFormat {
  kFloatList,     // JSON floats
  kBase64F32,     // OpenAI "base64": little-endian float32 bytes
  kBase64Int8,    // "base64_int8": one signed byte per dimension
  kBase64Binary,  // "base64_binary": one bit per dimension, most significant bit first
};

// vLLM's embed_dtype and endianness: the bytes "base64" carries per value.
enum class Base64Values { kF32, kF16, kBf16 };
struct Base64Layout {
  Base64Values values = Base64Values::kF32;
  bool big_endian = false;
};

// Cohere's embedding_types.
enum class CohereEmbeddingType { kFloat, kInt8, kUint8, kBinary, kUbinary };

struct EmbedRequest {
  std::string model;  // "" when the request names none
  std::vector<Input> inputs;
  TruncationRequest truncation;
  std::optional<bool> normalize;  // unset: the model's own default
  int64_t dimensions = 0;         // 0: all of them
  EmbeddingFormat format = EmbeddingFormat::kFloatList;
  std::string prompt_name;         // "" = none; one of the model's prompts otherwise
  bool add_special_tokens = true;  // vLLM's add_special_tokens (OpenAI's route)
  Base64Layout base64;             // OpenAI's "base64" only
  // Jina's late_chunking: the inputs are the chunks of one text, embedded in its context (as
  // /v1/contextualizedembeddings embeds one document).
  bool late_chunking = false;
  // Cohere only.
  std::string input_type;
  std::vector<CohereEmbeddingType> embedding_types;  // empty: floats, v1's embeddings_floats
};

// Late chunking (Perplexity's contextualized embeddings): documents of chunks.
struct ContextualizedRequest {
  std::string model;
  std::vector<std::vector<std::string>> documents;
  int64_t dimensions = 0;
  EmbeddingFormat format = EmbeddingFormat::kBase64Int8;  // Perplexity's default
};

struct RerankRequest {
  std::string model;
  std::string query;
  std::vector<std::string> documents;
  std::optional<int64_t> top_n;  // unset: every document
  bool return_documents = false;
  bool raw_scores = false;  // TEI: logits instead of sigmoid probabilities
  TruncationRequest truncation;
  // Cohere's max_tokens_per_doc: > 0 scores each document's first this many tokens.
  int64_t max_tokens_per_doc = 0;
};

// vLLM's /v1/score: one text against many, or pairs.
struct ScoreRequest {
  std::string model;
  std::vector<std::string> text_1, text_2;  // text_1 has one text or as many as text_2
  TruncationRequest truncation;
  bool activation = true;  // vLLM's use_activation: false gives the logits
};

// TEI's /similarity: cosine similarity of one sentence to others.
struct SimilarityRequest {
  std::string source_sentence;
  std::vector<std::string> sentences;
  std::string prompt_name;
  TruncationRequest truncation;
};

struct TokenizeRequest {
  std::vector<std::string> texts;
  bool add_special_tokens = true;
  std::string prompt_name;
};

// TEI's /predict: texts or (text, text) pairs for a sequence-classification model. `batch` says
// whether the answer is a list of lists (the request sent a list of inputs) or one list.
struct PredictInput {
  std::string text;
  std::optional<std::string> pair;
  // Token ids instead of a text (vLLM's /classify), sent as they are.
  std::vector<uint32_t> ids;
  bool is_ids = false;
};
struct PredictRequest {
  std::vector<PredictInput> inputs;
  bool batch = false;
  bool raw_scores = false;  // logits instead of softmax (sigmoid for one label)
  TruncationRequest truncation;
};

// vLLM's /classify: texts or token ids (sent as they are, as vLLM does) for a
// sequence-classification model; one answer per input with its class probabilities.
struct ClassifyRequest {
  std::string model;                 // "" when the request names none
  std::vector<PredictInput> inputs;  // texts or token ids, no pairs
  TruncationRequest truncation;
  // use_activation (and vLLM's earlier name, activation): false gives the logits.
  bool activation = true;
  bool add_special_tokens = true;
};

struct DecodeRequest {
  std::vector<std::vector<uint32_t>> ids;
  bool skip_special_tokens = true;
  std::string_view field = "ids";  // the request's field, for errors (vLLM's: tokens)
};

// vLLM's /tokenize (its completion form: one prompt).
struct VllmTokenizeRequest {
  std::string model;
  std::string prompt;
  bool add_special_tokens = true;
  bool return_token_strs = false;
};

// Every parser takes the request body (any JSON value; a non-object is refused) and the limits.
// Strings are copied out: the document may go once a request is parsed.
absl::StatusOr<EmbedRequest> ParseOpenAiEmbed(const JsonView& body, const ApiLimits& limits);
absl::StatusOr<EmbedRequest> ParseTeiEmbed(const JsonView& body, const ApiLimits& limits);
// version 1 or 2 (/v1/embed, /v2/embed).
absl::StatusOr<EmbedRequest> ParseCohereEmbed(const JsonView& body, const ApiLimits& limits,
                                              int version);
absl::StatusOr<ContextualizedRequest> ParseContextualized(const JsonView& body,
                                                          const ApiLimits& limits);
// TEI's /rerank (query, texts) and the Cohere / vLLM / Jina form (query, documents), told apart
// by which field is present.
absl::StatusOr<RerankRequest> ParseRerank(const JsonView& body, const ApiLimits& limits);
absl::StatusOr<ScoreRequest> ParseScore(const JsonView& body, const ApiLimits& limits);
absl::StatusOr<SimilarityRequest> ParseSimilarity(const JsonView& body, const ApiLimits& limits);
absl::StatusOr<TokenizeRequest> ParseTokenize(const JsonView& body, const ApiLimits& limits);
absl::StatusOr<DecodeRequest> ParseDecode(const JsonView& body, const ApiLimits& limits);
// vLLM's /tokenize: prompt, add_special_tokens, return_token_strs, model; its chat form
// ('messages') refused naming the field.
absl::StatusOr<VllmTokenizeRequest> ParseVllmTokenize(const JsonView& body);
// vLLM's /detokenize: tokens (one list of ids), model; decoded with the special tokens, as vLLM
// does (skip_special_tokens false).
absl::StatusOr<DecodeRequest> ParseVllmDetokenize(const JsonView& body, std::string* model);
// TEI's inputs: "text", ["text", "text"] (one pair, as TEI reads two strings), or a list whose
// items are each a text, a [text] or a [text, text].
absl::StatusOr<PredictRequest> ParsePredict(const JsonView& body, const ApiLimits& limits);
// vLLM's input (a text, texts, token ids or lists of them), truncate_prompt_tokens and
// truncation_side, use_activation / activation, add_special_tokens, user, priority (0 only: there
// is no priority scheduling); a chat-style request ('messages') is refused naming the field.
absl::StatusOr<ClassifyRequest> ParseClassify(const JsonView& body, const ApiLimits& limits);

}  // namespace quiver::gateway::api
