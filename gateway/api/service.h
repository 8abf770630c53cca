// What the HTTP routes compute, without HTTP: inputs tokenized (prompts, truncation, the model's
// length limit), sent through the Dispatcher, scores made from the model's outputs. Each dialect's
// handler (gateway/api/api.cc) parses its request (requests.h), calls one of these, and renders.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "gateway/api/requests.h"
#include "gateway/dispatcher.h"
#include "tokenizer/tokenizer.h"

namespace quiver::gateway::api {

// A reranker that scores one prompt per (query, document), as Qwen3's yes/no reranker does: a
// fixed prefix and suffix around a middle with {query} and {document} in it. Each part is
// tokenized on its own, as the model card's reference code does, and truncation cuts only the
// middle: the suffix holds the last token the score is read at.
struct ScorePrompt {
  std::string prefix, middle, suffix;
  bool empty() const { return middle.empty(); }
};

// What the gateway knows of the model it fronts: from the replicas' model and its folder (model
// data, not HTTP code).
struct ModelDescription {
  std::string name;
  std::string architecture;
  int64_t max_input_tokens = 512;  // per sequence, special tokens included
  int64_t hidden_size = 0;         // an embedding's width (after pooling and Dense modules)
  int64_t token_hidden_size = 0;   // a token's hidden state (/embed_all); 0: hidden_size
  bool normalize = false;          // the model's own default
  std::string pooling;             // "cls", "mean", "last_token" (TEI's /info)
  std::string dtype = "float32";   // what the encoder computes in (TEI's /info model_dtype)
  bool can_embed = true;
  bool can_score = false;
  int64_t num_labels = 0;  // scoring models: logits per input
  // SPLADE models: terms per input (the vocabulary); 0 for every other kind.
  int64_t sparse_width = 0;
  // The Pooling module's include_prompt is false: a prompt's tokens are left out of the pooling
  // (each sequence is sent with its prompt_length, as sentence-transformers counts it).
  bool exclude_prompt = false;
  // Their names in id order (config.json's id2label; LABEL_i where it has none).
  std::vector<std::string> labels;
  // config.json's problem_type ("" when absent): vLLM's /classify answers a regression model's
  // logits as they are and a multi-label one's through a sigmoid per label.
  std::string problem_type;
  // Empty: a scoring model encodes (query, document) as two segments (a cross-encoder).
  ScorePrompt score_prompt;
  // sentence-transformers' prompts (config_sentence_transformers.json), by name, and the one
  // applied when a request names none ("" = none).
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;
  // --default-prompt: a prompt's text applied when a request names none (instead of
  // default_prompt_name's).
  std::string default_prompt;
  // Server settings /info reports.
  int64_t max_batch_tokens = 0;
  int64_t max_concurrent_requests = 0;
};

// The prompts of a sentence-transformers folder (config_sentence_transformers.json's "prompts"
// and "default_prompt_name"); none when the file is absent.
absl::Status ReadPrompts(const std::string& model_dir, ModelDescription& model);

// The server's choice of the prompt a request without prompt_name gets, over the folder's
// default_prompt_name: `name` one of the model's prompts (--default-prompt-name), or `text` itself
// (--default-prompt); at most one of them. INVALID_ARGUMENT naming the flag otherwise (an unknown
// name lists the model's prompts); `quiver embed` names its own flags (--prompt-name, --prompt).
absl::Status ApplyDefaultPrompt(const std::string& name, const std::string& text,
                                ModelDescription& model,
                                std::string_view name_flag = "--default-prompt-name",
                                std::string_view text_flag = "--default-prompt");

// The text of the prompt a request without prompt_name gets ("" for none).
std::string DefaultPromptText(const ModelDescription& model);

// The leading tokens of a prompted input that a Pooling module with include_prompt false leaves
// out: the prompt tokenized alone (special tokens as `options` say, no truncation), less a
// trailing special token (sentence-transformers' prompt_length). `options` carries the caller's
// character limit.
absl::StatusOr<std::vector<uint32_t>> PromptIds(const tokenizer::Tokenizer& tokenizer,
                                                const std::string& prompt,
                                                tokenizer::EncodeOptions options);

// `model.labels` from config.json's id2label (LABEL_i for ids it does not name), for
// model.num_labels labels, and `model.problem_type`.
absl::Status ReadLabels(const std::string& model_dir, ModelDescription& model);

// The Qwen3 reranker's prompt (its model card's format, with its default instruction).
ScorePrompt Qwen3RerankerPrompt();

// Tokenized inputs and their token count.
struct Tokenized {
  std::vector<Sequence> sequences;
  int64_t tokens = 0;
};

struct Embeddings {
  ReplicaResult result;  // one row per input, in input order
  int64_t tokens = 0;
};

// TEI's /embed_all: every token's last hidden state. `result` holds the rows of every input in
// order; input i has `rows[i]` of them (its tokens, the special ones and a prompt's included).
struct TokenEmbeddings {
  ReplicaResult result;
  std::vector<int64_t> rows;
  int64_t tokens = 0;
};

struct Scores {
  std::vector<float> scores;  // one per document, in input order
  int64_t tokens = 0;
};

struct Classified {
  std::vector<std::vector<float>> logits;  // num_labels per input, in input order
  int64_t tokens = 0;
};

// One token of a tokenized text, as TEI's /tokenize lists it.
struct TokenPiece {
  uint32_t id;
  // The input's bytes [start, stop) the token came from; for tokens without offsets (the special
  // tokens the post-processor adds, tokenizers whose pipeline is not traced) its vocabulary
  // string.
  std::string text;
  bool special;
  std::optional<uint32_t> start, stop;  // byte offsets into the text tokenized (prompt included)
};

class Service {
 public:
  // `metrics` (may be null) gets the tokenization time and the tokens per input.
  Service(ModelDescription model, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
          std::shared_ptr<Dispatcher> dispatcher, ApiLimits limits, MetricsRegistry* metrics);

  const ModelDescription& model() const { return model_; }
  const ApiLimits& limits() const { return limits_; }
  Dispatcher& dispatcher() const { return *dispatcher_; }

  // NOT_FOUND (model_not_found) when `requested` names another model; "" names none.
  absl::Status CheckModel(const std::string& requested) const;

  // Inputs as sequences: prompts applied, cut or refused past the model's limit (`field` names
  // the request field in errors).
  absl::StatusOr<Tokenized> Tokenize(const std::vector<Input>& inputs,
                                     const TruncationRequest& truncation,
                                     const std::string& prompt_name, std::string_view field,
                                     const CallContext& call = {},
                                     bool add_special_tokens = true) const;

  // Embeddings in the engine's `output_type` (F32 unless a packed format is asked).
  absl::StatusOr<Embeddings> Embed(const EmbedRequest& request, quiver::v1::OutputType output_type,
                                   const CallContext& call) const;

  // TEI's /embed_all: one row per token of each input, as the encoder's last hidden state
  // (before the model's Dense modules, not normalized). The answer's values (tokens x hidden)
  // are capped at kMaxTokenEmbeddingValues (413 beyond).
  static constexpr int64_t kMaxTokenEmbeddingValues = int64_t{8} << 20;
  absl::StatusOr<TokenEmbeddings> EmbedAll(const EmbedRequest& request,
                                           const CallContext& call) const;

  // Late chunking: one row per chunk, documents in order.
  absl::StatusOr<Embeddings> EmbedContextualized(const ContextualizedRequest& request,
                                                 quiver::v1::OutputType output_type,
                                                 const CallContext& call) const;

  // Each document against its query (one query for all, or one per document): a scoring model's
  // logit (sigmoid unless `raw`), or for an embedding model the cosine similarity of their
  // embeddings. One pass over the replicas for the whole request.
  absl::StatusOr<Scores> Score(const std::vector<std::string>& queries,
                               const std::vector<std::string>& documents, bool raw,
                               const TruncationRequest& truncation, std::string_view field,
                               const CallContext& call) const;

  // Each text cut to its first `max_tokens` tokens (special tokens not counted): at the end of
  // its last kept token where the tokenizer gives offsets, else the kept tokens decoded. Texts
  // that fit are returned as they are.
  absl::StatusOr<std::vector<std::string>> KeepFirstTokens(const std::vector<std::string>& texts,
                                                           int64_t max_tokens,
                                                           std::string_view field,
                                                           const CallContext& call) const;

  // TEI's /embed_sparse: each input's term weights (sparse_width per input, zeros included) from
  // a SPLADE model. INVALID_ARGUMENT naming the model kind for other models.
  absl::StatusOr<std::vector<std::vector<float>>> EmbedSparse(const EmbedRequest& request,
                                                              const CallContext& call) const;
  // A sequence-classification model's logits for each input (texts or pairs), in input order:
  // num_labels per input. INVALID_ARGUMENT naming the model kind for other models. Token ids are
  // sent as they are (cut where truncation asks, as Tokenize does); `field` names the request
  // field in errors.
  absl::StatusOr<Classified> Classify(const std::vector<PredictInput>& inputs,
                                      const TruncationRequest& truncation, bool add_special_tokens,
                                      std::string_view field, const CallContext& call) const;

  absl::StatusOr<std::vector<std::vector<TokenPiece>>> TokenizeForDisplay(
      const TokenizeRequest& request) const;
  // vLLM's /tokenize: a text's ids (no prompt, no truncation: the server's length limit is not
  // checked here), and an id's vocabulary string ("" for none).
  absl::StatusOr<std::vector<uint32_t>> TokenIds(const std::string& text, bool add_special_tokens,
                                                 std::string_view field) const;
  std::string TokenString(uint32_t id) const;

  // FAILED_PRECONDITION (422) naming the first id the tokenizer does not know.
  absl::StatusOr<std::vector<std::string>> Decode(const DecodeRequest& request) const;

 private:
  absl::StatusOr<std::string> Prompt(const std::string& prompt_name) const;
  // The score prompt of each (query, document) pair, the middle cut to fit where asked.
  absl::StatusOr<Tokenized> TokenizePrompts(const std::vector<std::string>& queries,
                                            const std::vector<std::string>& documents,
                                            const TruncationRequest& truncation,
                                            std::string_view field, const CallContext& call) const;
  // A cross-encoder's input for each (query, document) pair: the two segments of one sequence,
  // each text tokenized once.
  absl::StatusOr<Tokenized> TokenizePairs(const std::vector<std::string>& queries,
                                          const std::vector<std::string>& documents,
                                          const TruncationRequest& truncation,
                                          std::string_view field, const CallContext& call) const;
  // Score for an embedding model: the cosine similarity of the normalized embeddings.
  absl::StatusOr<Scores> ScoreByCosine(const std::vector<std::string>& queries,
                                       const std::vector<std::string>& documents,
                                       const TruncationRequest& truncation, std::string_view field,
                                       const CallContext& call) const;
  absl::StatusOr<int64_t> TruncationLimit(const TruncationRequest& truncation) const;
  // Tokenizer options for `truncation`: cut to `max_tokens` when the request (or, unset,
  // --auto-truncate) asks for it.
  tokenizer::EncodeOptions EncodeOptionsFor(const TruncationRequest& truncation, int64_t max_tokens,
                                            bool add_special_tokens) const;
  void Observe(const Tokenized& t, std::chrono::steady_clock::time_point start) const;
  // Dispatcher::Run, with the replicas' queue and compute times observed.
  absl::StatusOr<ReplicaResult> Run(CallKind kind, const Tokenized& t,
                                    const quiver::v1::OutputOptions& output,
                                    const CallContext& call) const;

  ModelDescription model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::shared_ptr<Dispatcher> dispatcher_;
  ApiLimits limits_;
  Histogram* tokenize_seconds_ = nullptr;
  Histogram* input_tokens_ = nullptr;
  Histogram* queue_seconds_ = nullptr;
  Histogram* inference_seconds_ = nullptr;
};

}  // namespace quiver::gateway::api
