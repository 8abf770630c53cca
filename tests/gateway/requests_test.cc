// The request parsers of every dialect (gateway/api/requests.h), without a server: good bodies
// give the typed request with the dialect's defaults; each bad field gives its status code and a
// message naming the field.
#include "gateway/api/requests.h"

#include <gtest/gtest.h>

#include "gateway/api/errors.h"

namespace quiver::gateway::api {
namespace {

// A parsed body, read as its root value; it lives to the end of the expression that made it.
struct Parsed {
  JsonDocument doc;
  operator JsonView() const { return doc.root(); }  // NOLINT: implicit by design
};

Parsed Body(std::string_view text) {
  absl::StatusOr<JsonDocument> v = JsonDocument::Parse(text);
  EXPECT_TRUE(v.ok()) << text;
  return Parsed{v.ok() ? *std::move(v) : *JsonDocument::Parse("null")};
}

// The status of parsing `body` with `parse` is `code`, names `field` and mentions `needle`.
template <typename Parse>
void ExpectError(Parse parse, std::string_view body, absl::StatusCode code, std::string field,
                 std::string needle) {
  const ApiLimits limits;
  auto r = parse(Body(body), limits);
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), code) << body << ": " << r.status();
  EXPECT_EQ(ErrorField(r.status()), field) << body << ": " << r.status();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << body << ": " << r.status().message() << " (wanted '" << needle << "')";
}

const auto kOpenAi = [](const JsonView& b, const ApiLimits& l) { return ParseOpenAiEmbed(b, l); };
const auto kTei = [](const JsonView& b, const ApiLimits& l) { return ParseTeiEmbed(b, l); };
const auto kCohere1 = [](const JsonView& b, const ApiLimits& l) {
  return ParseCohereEmbed(b, l, 1);
};
const auto kCohere2 = [](const JsonView& b, const ApiLimits& l) {
  return ParseCohereEmbed(b, l, 2);
};
const auto kRerank = [](const JsonView& b, const ApiLimits& l) { return ParseRerank(b, l); };
const auto kScore = [](const JsonView& b, const ApiLimits& l) { return ParseScore(b, l); };
const auto kSimilarity = [](const JsonView& b, const ApiLimits& l) {
  return ParseSimilarity(b, l);
};
const auto kTokenize = [](const JsonView& b, const ApiLimits& l) { return ParseTokenize(b, l); };
const auto kDecode = [](const JsonView& b, const ApiLimits& l) { return ParseDecode(b, l); };
const auto kContext = [](const JsonView& b, const ApiLimits& l) {
  return ParseContextualized(b, l);
};
const auto kClassify = [](const JsonView& b, const ApiLimits& l) { return ParseClassify(b, l); };

constexpr auto k422 = absl::StatusCode::kFailedPrecondition;
constexpr auto k400 = absl::StatusCode::kInvalidArgument;
constexpr auto k413 = absl::StatusCode::kOutOfRange;

TEST(OpenAiEmbedTest, EveryInputShape) {
  const ApiLimits limits;
  auto one = ParseOpenAiEmbed(Body(R"({"input": "hello", "model": "m"})"), limits);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->inputs.size(), 1u);
  EXPECT_EQ(one->inputs[0].text, "hello");
  EXPECT_EQ(one->model, "m");
  EXPECT_EQ(one->format, EmbeddingFormat::kFloatList);
  EXPECT_FALSE(one->normalize.has_value());  // the model's default
  EXPECT_FALSE(one->truncation.enabled.has_value());

  auto ids = ParseOpenAiEmbed(Body(R"({"input": [101, 7592, 102]})"), limits);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->inputs.size(), 1u);  // one list of ids is one input
  EXPECT_TRUE(ids->inputs[0].is_ids);
  EXPECT_EQ(ids->inputs[0].ids, (std::vector<uint32_t>{101, 7592, 102}));

  auto mixed = ParseOpenAiEmbed(Body(R"({"input": ["a", [1, 2], "b"]})"), limits);
  ASSERT_TRUE(mixed.ok());
  ASSERT_EQ(mixed->inputs.size(), 3u);
  EXPECT_FALSE(mixed->inputs[0].is_ids);
  EXPECT_TRUE(mixed->inputs[1].is_ids);
}

TEST(OpenAiEmbedTest, FormatsDimensionsAndExtensions) {
  const ApiLimits limits;
  auto r = ParseOpenAiEmbed(Body(R"({"input": "x", "encoding_format": "base64", "dimensions": 64,
                                      "truncate": true, "prompt_name": "query", "user": "u"})"),
                            limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->format, EmbeddingFormat::kBase64F32);
  EXPECT_EQ(r->dimensions, 64);
  EXPECT_EQ(r->normalize, true);  // shortened embeddings are re-normalized, as OpenAI does
  EXPECT_EQ(r->truncation.enabled, true);
  EXPECT_EQ(r->prompt_name, "query");
  auto k = ParseOpenAiEmbed(Body(R"({"input": "x", "truncate_prompt_tokens": 16})"), limits);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->truncation.max_tokens, 16);
  EXPECT_EQ(
      ParseOpenAiEmbed(Body(R"({"input": "x", "encoding_format": "base64_int8"})"), limits)->format,
      EmbeddingFormat::kBase64Int8);
  // null counts as not sent.
  EXPECT_TRUE(ParseOpenAiEmbed(Body(R"({"input": "x", "dimensions": null})"), limits).ok());
}

TEST(OpenAiEmbedTest, BadFieldsNameTheField) {
  ExpectError(kOpenAi, R"({})", k422, "input", "missing field 'input'");
  ExpectError(kOpenAi, R"({"input": 3})", k422, "input", "'input' must be");
  ExpectError(kOpenAi, R"({"input": []})", k400, "input", "empty");
  ExpectError(kOpenAi, R"({"input": ["a", 3]})", k422, "input[1]", "input[1]");
  ExpectError(kOpenAi, R"({"input": [[101, -5]]})", k422, "input[0]", "not a valid id");
  ExpectError(kOpenAi, R"({"input": [[101, 1.5]]})", k422, "input[0][1]", "integer");
  ExpectError(kOpenAi, R"({"input": [[]]})", k400, "input[0]", "empty");
  ExpectError(kOpenAi, R"({"input": "x", "encoding_format": "hex"})", k422, "encoding_format",
              "'hex'");
  ExpectError(kOpenAi, R"({"input": "x", "encoding_format": 1})", k422, "encoding_format",
              "string");
  ExpectError(kOpenAi, R"({"input": "x", "dimensions": 0})", k422, "dimensions", "positive");
  ExpectError(kOpenAi, R"({"input": "x", "dimensions": "8"})", k422, "dimensions", "integer");
  ExpectError(kOpenAi, R"({"input": "x", "model": 5})", k422, "model", "string");
  ExpectError(kOpenAi, R"({"input": "x", "truncate": "yes"})", k422, "truncate", "boolean");
  ExpectError(kOpenAi, R"({"input": "x", "truncate_prompt_tokens": 0})", k422,
              "truncate_prompt_tokens", "-1");
  ExpectError(kOpenAi, R"({"input": "x", "user": 1})", k422, "user", "string");
  ExpectError(kOpenAi, R"({"input": "x", "truncate": false, "truncate_prompt_tokens": 8})", k422,
              "truncate_prompt_tokens", "'truncate' is false");
  ExpectError(kOpenAi, R"([1, 2])", k422, "", "JSON object");
}

TEST(OpenAiEmbedTest, TooManyInputsNamesTheLimit) {
  ApiLimits limits;
  limits.max_inputs = 2;
  auto r = ParseOpenAiEmbed(Body(R"({"input": ["a", "b", "c"]})"), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), k413);
  EXPECT_EQ(ErrorReason(r.status()), Reason::kTooManyInputs);
  EXPECT_NE(r.status().message().find("at most 2"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("--max-inputs"), std::string::npos) << r.status();
}

TEST(TeiEmbedTest, DefaultsAndFields) {
  const ApiLimits limits;
  auto r = ParseTeiEmbed(Body(R"({"inputs": ["a", "b"]})"), limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->normalize, true);                    // TEI's default
  EXPECT_FALSE(r->truncation.enabled.has_value());  // the server's --auto-truncate decides
  EXPECT_EQ(r->truncation.side, TruncationSide::kRight);
  auto raw = ParseTeiEmbed(Body(R"({"inputs": "a", "normalize": false, "truncate": true,
                                     "truncation_direction": "left", "dimensions": 32,
                                     "prompt_name": "query"})"),
                           limits);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->normalize, false);
  EXPECT_EQ(raw->truncation.enabled, true);
  EXPECT_EQ(raw->truncation.side, TruncationSide::kLeft);
  EXPECT_EQ(raw->dimensions, 32);
  EXPECT_EQ(raw->prompt_name, "query");
  EXPECT_EQ(ParseTeiEmbed(Body(R"({"inputs": "a", "truncation_direction": "Right"})"), limits)
                ->truncation.side,
            TruncationSide::kRight);
  EXPECT_TRUE(ParseTeiEmbed(Body(R"({"inputs": "a", "truncate": null})"), limits).ok());
}

TEST(TeiEmbedTest, BadFields) {
  ExpectError(kTei, R"({"input": "x"})", k422, "inputs", "missing field 'inputs'");
  ExpectError(kTei, R"({"inputs": []})", k400, "inputs", "empty");
  ExpectError(kTei, R"({"inputs": "x", "truncation_direction": "Up"})", k422,
              "truncation_direction", "Right or Left");
  ExpectError(kTei, R"({"inputs": "x", "normalize": 1})", k422, "normalize", "boolean");
  ExpectError(kTei, R"({"inputs": "x", "dimensions": -3})", k422, "dimensions", "positive");
  ExpectError(kTei, R"({"inputs": "x", "prompt_name": 7})", k422, "prompt_name", "string");
  ExpectError(kTei, R"({"inputs": {"a": 1}})", k422, "inputs", "'inputs' must be");
  ExpectError(kTei, R"({"inputs": ""})", k400, "inputs", "empty string");  // as TEI: Empty
  ExpectError(kTei, R"({"inputs": ["a", ""]})", k400, "inputs", "'inputs[1]' is an empty string");
}

TEST(CohereEmbedTest, V1AndV2) {
  const ApiLimits limits;
  auto v1 = ParseCohereEmbed(Body(R"({"texts": ["a"], "model": "m"})"), limits, 1);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_TRUE(v1->embedding_types.empty());  // v1 answers embeddings_floats
  EXPECT_EQ(v1->truncation.enabled, true);   // Cohere's default truncate is END
  EXPECT_EQ(v1->truncation.side, TruncationSide::kRight);
  auto v2 = ParseCohereEmbed(Body(R"({"texts": ["a"], "model": "m", "input_type": "search_query",
                                       "embedding_types": ["int8", "float", "int8"],
                                       "truncate": "START"})"),
                             limits, 2);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->embedding_types,
            (std::vector{CohereEmbeddingType::kInt8, CohereEmbeddingType::kFloat}));
  EXPECT_EQ(v2->input_type, "search_query");
  EXPECT_EQ(v2->truncation.side, TruncationSide::kLeft);
  auto v2_default = ParseCohereEmbed(Body(R"({"texts": ["a"]})"), limits, 2);
  ASSERT_TRUE(v2_default.ok());
  EXPECT_EQ(v2_default->embedding_types, std::vector{CohereEmbeddingType::kFloat});
  auto none = ParseCohereEmbed(Body(R"({"texts": ["a"], "truncate": "NONE"})"), limits, 1);
  EXPECT_EQ(none->truncation.enabled, false);
}

TEST(CohereEmbedTest, BadFields) {
  ExpectError(kCohere1, R"({})", k422, "texts", "missing field 'texts'");
  ExpectError(kCohere1, R"({"texts": "a"})", k422, "texts", "list of strings");
  ExpectError(kCohere2, R"({"texts": []})", k400, "texts", "empty");
  ExpectError(kCohere2, R"({"texts": ["a"], "input_type": "poem"})", k422, "input_type", "'poem'");
  ExpectError(kCohere2, R"({"texts": ["a"], "embedding_types": ["hex"]})", k422,
              "embedding_types[0]", "'hex'");
  ExpectError(kCohere2, R"({"texts": ["a"], "embedding_types": "float"})", k422, "embedding_types",
              "list");
  ExpectError(kCohere2, R"({"texts": ["a"], "truncate": "MIDDLE"})", k422, "truncate",
              "NONE, START or END");
}

TEST(RerankTest, TeiCohereAndVllmForms) {
  const ApiLimits limits;
  auto tei = ParseRerank(Body(R"({"query": "q", "texts": ["a", "b"], "return_text": true,
                                   "raw_scores": true, "truncate": true})"),
                         limits);
  ASSERT_TRUE(tei.ok()) << tei.status();
  EXPECT_EQ(tei->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(tei->return_documents);
  EXPECT_TRUE(tei->raw_scores);
  EXPECT_FALSE(tei->top_n.has_value());
  auto cohere = ParseRerank(Body(R"({"query": "q", "documents": ["a", {"text": "b"}],
                                      "top_n": 1, "return_documents": false, "model": "m"})"),
                            limits);
  ASSERT_TRUE(cohere.ok()) << cohere.status();
  EXPECT_EQ(cohere->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(cohere->top_n, 1);
  EXPECT_FALSE(cohere->return_documents);
  auto vllm = ParseRerank(Body(R"({"query": "q", "documents": ["a"]})"), limits);
  ASSERT_TRUE(vllm.ok());
  EXPECT_TRUE(vllm->return_documents);  // vLLM always returns them
}

TEST(RerankTest, BadFields) {
  ExpectError(kRerank, R"({"texts": ["a"]})", k422, "query", "missing field 'query'");
  ExpectError(kRerank, R"({"query": "q"})", k422, "texts", "'documents'");
  ExpectError(kRerank, R"({"query": "q", "texts": []})", k400, "texts", "empty");
  ExpectError(kRerank, R"({"query": "q", "documents": [1]})", k422, "documents[0]", "string");
  ExpectError(kRerank, R"({"query": "q", "documents": [{"title": "x"}]})", k422, "documents[0]",
              "'text'");
  auto zero = ParseRerank(Body(R"({"query": "q", "documents": ["a", "b"], "top_n": 0})"), {});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_FALSE(zero->top_n.has_value());  // vLLM's default: every document
  ExpectError(kRerank, R"({"query": "q", "documents": ["a"], "top_n": -2})", k422, "top_n",
              "positive");
  ExpectError(kRerank, R"({"query": "q", "documents": ["a"], "top_n": 1.5})", k422, "top_n",
              "positive integer");
  ExpectError(kRerank, R"({"query": "q", "documents": ["a"], "top_n": "3"})", k422, "top_n",
              "positive integer");
  ExpectError(kRerank, R"({"query": 3, "texts": ["a"]})", k422, "query", "string");
  ExpectError(kRerank, R"({"query": "q", "documents": ["a"], "truncate": "yes"})", k422, "truncate",
              "boolean");
  ExpectError(kRerank, R"({"query": "q", "texts": ["a"], "return_text": "y"})", k422, "return_text",
              "boolean");
  ExpectError(kRerank, R"({"query": "q", "documents": ["a"], "max_tokens_per_doc": 0})", k422,
              "max_tokens_per_doc", "positive");
  ExpectError(kRerank, R"({"query": "q", "documents": ["a"], "max_tokens_per_doc": "9"})", k422,
              "max_tokens_per_doc", "integer");
  const ApiLimits limits;
  auto cohere =
      ParseRerank(Body(R"({"query": "q", "documents": ["a"], "max_tokens_per_doc": 7})"), limits);
  ASSERT_TRUE(cohere.ok()) << cohere.status();
  EXPECT_EQ(cohere->max_tokens_per_doc, 7);
}

TEST(ScoreTest, PairsAndErrors) {
  const ApiLimits limits;
  auto one_to_many = ParseScore(Body(R"({"text_1": "q", "text_2": ["a", "b"]})"), limits);
  ASSERT_TRUE(one_to_many.ok());
  EXPECT_EQ(one_to_many->text_1.size(), 1u);
  EXPECT_EQ(one_to_many->text_2.size(), 2u);
  EXPECT_TRUE(ParseScore(Body(R"({"text_1": ["q", "r"], "text_2": ["a", "b"]})"), limits).ok());
  ExpectError(kScore, R"({"text_1": ["q", "r"], "text_2": ["a", "b", "c"]})", k422, "text_1",
              "as many as 'text_2'");
  ExpectError(kScore, R"({"text_1": "q"})", k422, "text_2", "missing field 'text_2'");
  ExpectError(kScore, R"({"text_1": "q", "text_2": []})", k400, "text_2", "empty");
  // vLLM's other spellings of the two sides, and use_activation.
  auto queries = ParseScore(
      Body(R"({"queries": "q", "documents": ["a", "b"], "use_activation": false})"), limits);
  ASSERT_TRUE(queries.ok()) << queries.status();
  EXPECT_EQ(queries->text_2.size(), 2u);
  EXPECT_FALSE(queries->activation);
  EXPECT_TRUE(ParseScore(Body(R"({"queries": "q", "items": ["a"]})"), limits).ok());
  EXPECT_TRUE(ParseScore(Body(R"({"data_1": "q", "data_2": ["a"]})"), limits).ok());
  ExpectError(kScore, R"({"queries": ["q", "r"], "documents": ["a", "b", "c"]})", k422, "queries",
              "as many as 'documents'");
  ExpectError(kScore, R"({"data_1": "q"})", k422, "data_2", "missing field 'data_2'");
}

TEST(RerankTest, UseActivationIsRawScoresTurnedOver) {
  const ApiLimits limits;
  auto raw =
      ParseRerank(Body(R"({"query": "q", "documents": ["a"], "use_activation": false})"), limits);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_TRUE(raw->raw_scores);
  ExpectError(kRerank,
              R"({"query": "q", "documents": ["a"], "use_activation": false, "raw_scores": false})",
              k422, "use_activation", "disagree");
}

TEST(SimilarityTest, ShapeAndErrors) {
  const ApiLimits limits;
  auto r = ParseSimilarity(Body(R"({"inputs": {"source_sentence": "a", "sentences": ["b", "c"]},
                                     "parameters": {"truncate": true, "prompt_name": null}})"),
                           limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source_sentence, "a");
  EXPECT_EQ(r->sentences.size(), 2u);
  EXPECT_EQ(r->truncation.enabled, true);
  ExpectError(kSimilarity, R"({"inputs": "a"})", k422, "inputs", "object");
  ExpectError(kSimilarity, R"({"inputs": {"sentences": ["b"]}})", k422, "source_sentence",
              "missing");
  ExpectError(kSimilarity, R"({"inputs": {"source_sentence": "a", "sentences": []}})", k400,
              "sentences", "empty");
}

TEST(TokenizeDecodeTest, Shapes) {
  const ApiLimits limits;
  auto t = ParseTokenize(Body(R"({"inputs": "a", "add_special_tokens": false})"), limits);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->add_special_tokens);
  EXPECT_EQ(t->texts.size(), 1u);
  auto d = ParseDecode(Body(R"({"ids": [101, 102]})"), limits);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ids.size(), 1u);
  EXPECT_TRUE(d->skip_special_tokens);
  auto dd =
      ParseDecode(Body(R"({"ids": [[101], [102, 103]], "skip_special_tokens": false})"), limits);
  ASSERT_TRUE(dd.ok());
  EXPECT_EQ(dd->ids.size(), 2u);
  ExpectError(kTokenize, R"({"inputs": 5})", k422, "inputs", "string");
  ExpectError(kTokenize, R"({"inputs": []})", k400, "inputs", "empty");
  ExpectError(kDecode, R"({"ids": "x"})", k422, "ids", "list");
  ExpectError(kDecode, R"({"ids": [1, -1]})", k422, "ids", "not a valid id");
  ExpectError(kDecode, R"({"ids": [[1], ["a"]]})", k422, "ids[1][0]", "integer");
}

TEST(ContextualizedTest, DefaultsAndErrors) {
  const ApiLimits limits;
  auto r = ParseContextualized(Body(R"({"input": [["a", "b"], ["c"]]})"), limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->format, EmbeddingFormat::kBase64Int8);  // Perplexity's default
  EXPECT_EQ(r->documents.size(), 2u);
  ExpectError(kContext, R"({"input": ["a"]})", k422, "input[0]", "list of chunk strings");
  ExpectError(kContext, R"({"input": [[]]})", k400, "input[0]", "no chunks");
  ExpectError(kContext, R"({"input": [["a", 1]]})", k422, "input[0][1]", "string");
  ExpectError(kContext, R"({"input": [["a"]], "encoding_format": "hex"})", k422, "encoding_format",
              "'hex'");
  ApiLimits small;
  small.max_inputs = 2;
  auto many = ParseContextualized(Body(R"({"input": [["a", "b"], ["c"]]})"), small);
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.status().code(), k413);
}

TEST(ClassifyTest, InputShapesAndDefaults) {
  const ApiLimits limits;
  auto one = ParseClassify(Body(R"({"input": "good", "model": "m"})"), limits);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->inputs.size(), 1u);
  EXPECT_EQ(one->inputs[0].text, "good");
  EXPECT_FALSE(one->inputs[0].is_ids);
  EXPECT_EQ(one->model, "m");
  EXPECT_TRUE(one->activation);
  EXPECT_TRUE(one->add_special_tokens);
  EXPECT_FALSE(one->truncation.enabled.has_value());
  auto mixed = ParseClassify(Body(R"({"input": ["a", [5, 6]], "use_activation": false,
                                     "truncate_prompt_tokens": 8, "truncation_side": "left",
                                     "add_special_tokens": false, "priority": 0,
                                     "user": "u"})"),
                             limits);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->inputs.size(), 2u);
  EXPECT_TRUE(mixed->inputs[1].is_ids);
  EXPECT_EQ(mixed->inputs[1].ids, (std::vector<uint32_t>{5, 6}));
  EXPECT_FALSE(mixed->activation);
  EXPECT_FALSE(mixed->add_special_tokens);
  EXPECT_EQ(mixed->truncation.max_tokens, 8);
  EXPECT_EQ(mixed->truncation.side, TruncationSide::kLeft);
  auto ids = ParseClassify(Body(R"({"input": [1, 2, 3], "activation": false})"), limits);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->inputs.size(), 1u);  // one list of ids is one input
  EXPECT_EQ(ids->inputs[0].ids.size(), 3u);
  EXPECT_FALSE(ids->activation);  // vLLM's earlier name
  auto null_activation = ParseClassify(Body(R"({"input": "a", "use_activation": null})"), limits);
  ASSERT_TRUE(null_activation.ok());
  EXPECT_TRUE(null_activation->activation);  // null: the model's default
  auto softmax = ParseClassify(Body(R"({"input": "a", "softmax": false})"), limits);
  ASSERT_TRUE(softmax.ok());
  EXPECT_FALSE(softmax->activation);  // vLLM's earliest name
  // vLLM keeps a token-id prompt's last k ids, a text's first k (the tokenizer's side).
  auto cut = ParseClassify(Body(R"({"input": [1, 2, 3], "truncate_prompt_tokens": 2})"), limits);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->truncation.side, TruncationSide::kRight);
  EXPECT_EQ(cut->truncation.ids_side, TruncationSide::kLeft);
  EXPECT_NE(cut->truncation.ask.find("truncate_prompt_tokens"), std::string_view::npos);
  auto right = ParseClassify(
      Body(R"({"input": [1, 2, 3], "truncate_prompt_tokens": 2, "truncation_side": "right"})"),
      limits);
  ASSERT_TRUE(right.ok());
  EXPECT_EQ(right->truncation.ids_side.value_or(right->truncation.side), TruncationSide::kRight);
}

TEST(TruncationTest, EachDialectNamesItsOwnWayToAskForIt) {
  const ApiLimits limits;
  auto tei = ParseTeiEmbed(Body(R"({"inputs": "a"})"), limits);
  ASSERT_TRUE(tei.ok());
  EXPECT_EQ(tei->truncation.ask, "\"truncate\": true");
  auto openai = ParseOpenAiEmbed(Body(R"({"input": "a"})"), limits);
  ASSERT_TRUE(openai.ok());
  EXPECT_EQ(openai->truncation.ask, "\"truncate\": true or \"truncate_prompt_tokens\": -1");
  auto similarity =
      ParseSimilarity(Body(R"({"inputs": {"source_sentence": "a", "sentences": ["b"]}})"), limits);
  ASSERT_TRUE(similarity.ok());
  EXPECT_EQ(similarity->truncation.ask, "\"parameters\": {\"truncate\": true}");
  auto cohere = ParseCohereEmbed(Body(R"({"texts": ["a"], "truncate": "NONE"})"), limits, 2);
  ASSERT_TRUE(cohere.ok());
  EXPECT_EQ(cohere->truncation.ask, "\"truncate\": \"END\"");
  auto rerank = ParseRerank(Body(R"({"query": "q", "documents": ["a"]})"), limits);
  ASSERT_TRUE(rerank.ok());
  EXPECT_EQ(rerank->truncation.ask, "\"truncate\": true or \"truncate_prompt_tokens\": -1");
  auto score = ParseScore(Body(R"({"text_1": "a", "text_2": "b"})"), limits);
  ASSERT_TRUE(score.ok());
  EXPECT_EQ(score->truncation.ask, "\"truncate_prompt_tokens\": -1");
  // TEI's truncation_direction cuts token ids from the same side as texts.
  auto left = ParseTeiEmbed(Body(R"({"inputs": [5, 6], "truncation_direction": "Left"})"), limits);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->truncation.ids_side.value_or(left->truncation.side), TruncationSide::kLeft);
}

TEST(ClassifyTest, BadFields) {
  ExpectError(kClassify, R"({"model": "m"})", k422, "input", "missing field 'input'");
  ExpectError(kClassify, R"({"input": ""})", k400, "input", "empty string");
  ExpectError(kClassify, R"({"input": ["a", ""]})", k400, "input", "'input[1]'");
  ExpectError(kClassify, R"({"input": []})", k400, "input", "empty");
  ExpectError(kClassify, R"({"input": [[]]})", k400, "input[0]", "empty list of token ids");
  ExpectError(kClassify, R"({"input": {"text": "a"}})", k422, "input", "a string");
  ExpectError(kClassify, R"({"messages": [{"role": "user", "content": "a"}]})", k400, "messages",
              "not supported");
  ExpectError(kClassify, R"({"input": "a", "priority": 3})", k422, "priority", "only 0");
  ExpectError(kClassify, R"({"input": "a", "use_activation": 1})", k422, "use_activation",
              "boolean");
  ExpectError(kClassify, R"({"input": "a", "use_activation": true, "activation": false})", k422,
              "activation", "disagrees");
  ExpectError(kClassify, R"({"input": [""]})", k400, "input", "'input[0]'");
  ExpectError(kClassify, R"({"input": "a", "truncation_side": "both"})", k422, "truncation_side",
              "'both'");
  ExpectError(kClassify, R"({"input": "a", "truncate_prompt_tokens": 0})", k422,
              "truncate_prompt_tokens", "-1");
  ExpectError(kClassify, R"({"input": "a", "user": 5})", k422, "user", "a string");
  ExpectError(kClassify, R"(["a"])", k422, "", "object");
  ApiLimits small;
  small.max_inputs = 2;
  auto many = ParseClassify(Body(R"({"input": ["a", "b", "c"]})"), small);
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.status().code(), k413);
}

}  // namespace
}  // namespace quiver::gateway::api
