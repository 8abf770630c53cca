// The API service without HTTP (gateway/api/service.h): what it sends to the replicas for each
// request, through a fake replica that records the chunks and answers rows of the right shape.
#include "gateway/api/service.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "gateway/api/errors.h"

namespace quiver::gateway::api {
namespace {

const std::filesystem::path kSource = QUIVER_SOURCE_DIR;

// Answers every chunk with zero rows of `dims` floats (1 for scores) and keeps its sequences.
class RecordingReplica final : public Replica {
 public:
  explicit RecordingReplica(int64_t dims) : dims_(dims) {}
  const std::string& name() const override { return name_; }
  bool healthy() const override { return true; }
  int64_t outstanding_tokens() const override { return 0; }
  void Call(CallKind kind, const quiver::v1::Chunk& chunk, std::chrono::system_clock::time_point,
            std::shared_ptr<CancelSignal>,
            std::function<void(absl::StatusOr<ReplicaResult>)> done) override {
    ReplicaResult r;
    r.num_seqs = chunk.cu_seqlens_size() - 1;
    r.dimensions = kind == CallKind::kScore ? 1 : dims_;
    r.data.assign(static_cast<size_t>(r.num_seqs * r.dimensions) * sizeof(float), '\0');
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int s = 0; s + 1 < chunk.cu_seqlens_size(); ++s) {
        sequences.emplace_back(chunk.token_ids().begin() + chunk.cu_seqlens(s),
                               chunk.token_ids().begin() + chunk.cu_seqlens(s + 1));
      }
    }
    done(std::move(r));
  }
  std::vector<std::vector<uint32_t>> sequences;

 private:
  std::string name_ = "recording";
  int64_t dims_;
  std::mutex mu_;
};

struct Fixture {
  std::shared_ptr<RecordingReplica> replica;
  std::unique_ptr<Service> service;
  const tokenizer::Tokenizer* tokenizer = nullptr;
};

Fixture Make(const std::string& tokenizer_dir, ModelDescription model, ApiLimits limits = {}) {
  Fixture f;
  auto tok = tokenizer::Tokenizer::FromFile((kSource / tokenizer_dir / "tokenizer.json").string());
  EXPECT_TRUE(tok.ok()) << tok.status();
  f.tokenizer = tok->get();
  f.replica = std::make_shared<RecordingReplica>(model.hidden_size);
  auto dispatcher =
      std::make_shared<Dispatcher>(std::vector<std::shared_ptr<Replica>>{f.replica}, 1 << 20);
  f.service =
      std::make_unique<Service>(std::move(model), *std::move(tok), dispatcher, limits, nullptr);
  return f;
}

std::vector<uint32_t> Ids(const tokenizer::Tokenizer& tok, const std::string& text) {
  tokenizer::EncodeOptions plain;
  plain.add_special_tokens = false;
  tokenizer::Encoding enc;
  EXPECT_TRUE(tok.Encode(text, plain, &enc).ok());
  return enc.ids;
}

const auto kForever = std::chrono::system_clock::time_point::max();

TEST(ServiceTest, Qwen3RerankerPromptIsCutInTheMiddleOnly) {
  ModelDescription m;
  m.name = "reranker";
  m.can_embed = false;
  m.can_score = true;
  m.num_labels = 1;
  m.max_input_tokens = 256;
  m.score_prompt = Qwen3RerankerPrompt();
  Fixture f = Make("tests/fixtures/tiny/qwen3_reranker", m);
  const std::vector<uint32_t> prefix = Ids(*f.tokenizer, m.score_prompt.prefix);
  const std::vector<uint32_t> suffix = Ids(*f.tokenizer, m.score_prompt.suffix);
  std::string doc;
  for (int i = 0; i < 400; ++i) doc += "password ";
  TruncationRequest cut;
  cut.enabled = true;
  absl::StatusOr<Scores> s =
      f.service->Score({"groups"}, {doc, "short"}, true, cut, "texts", kForever);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(f.replica->sequences.size(), 2u);
  const std::vector<uint32_t>& longest = f.replica->sequences[0];
  EXPECT_EQ(longest.size(), 256u);  // cut to the limit
  ASSERT_GT(longest.size(), prefix.size() + suffix.size());
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), longest.begin()));
  EXPECT_TRUE(std::equal(suffix.rbegin(), suffix.rend(), longest.rbegin()))
      << "the prompt's end, where the score is read, survives the cut";
  // A pair that fits is the whole prompt, as the model card's reference builds it.
  const std::vector<uint32_t> middle =
      Ids(*f.tokenizer,
          "<Instruct>: Given a web search query, retrieve relevant passages that answer the "
          "query\n<Query>: groups\n<Document>: short");
  std::vector<uint32_t> want = prefix;
  want.insert(want.end(), middle.begin(), middle.end());
  want.insert(want.end(), suffix.begin(), suffix.end());
  EXPECT_EQ(f.replica->sequences[1], want);
  // Without truncation the long pair is refused, naming the limit.
  TruncationRequest none;
  none.enabled = false;
  absl::StatusOr<Scores> refused =
      f.service->Score({"groups"}, {doc}, true, none, "texts", kForever);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(ErrorReason(refused.status()), Reason::kInputTooLong);
  EXPECT_NE(refused.status().message().find("at most 256"), std::string::npos);
}

TEST(ServiceTest, AutoTruncateAndTheRequestsOwnSetting) {
  ModelDescription m;
  m.name = "m";
  m.hidden_size = 8;
  m.max_input_tokens = 16;
  std::string text;
  for (int i = 0; i < 50; ++i) text += "word ";
  EmbedRequest r;
  r.inputs.push_back({text, {}, false});
  {
    Fixture f = Make("tests/fixtures/tokenizers/minilm_wordpiece", m);
    absl::StatusOr<Embeddings> e = f.service->Embed(r, quiver::v1::OUTPUT_F32, kForever);
    ASSERT_FALSE(e.ok());  // off by default
    EXPECT_EQ(ErrorReason(e.status()), Reason::kInputTooLong);
    EXPECT_NE(e.status().message().find("--auto-truncate"), std::string::npos);
  }
  ApiLimits auto_truncate;
  auto_truncate.auto_truncate = true;
  Fixture f = Make("tests/fixtures/tokenizers/minilm_wordpiece", m, auto_truncate);
  absl::StatusOr<Embeddings> e = f.service->Embed(r, quiver::v1::OUTPUT_F32, kForever);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(f.replica->sequences.back().size(), 16u);
  r.truncation.enabled = false;  // the request's own "truncate": false still refuses
  EXPECT_FALSE(f.service->Embed(r, quiver::v1::OUTPUT_F32, kForever).ok());
  // Token ids are cut the same way, on the side asked.
  EmbedRequest ids;
  Input in;
  in.is_ids = true;
  for (uint32_t i = 0; i < 20; ++i) in.ids.push_back(1000 + i);
  ids.inputs.push_back(in);
  ids.truncation.side = TruncationSide::kLeft;
  ASSERT_TRUE(f.service->Embed(ids, quiver::v1::OUTPUT_F32, kForever).ok());
  EXPECT_EQ(f.replica->sequences.back().front(), 1004u);
  EXPECT_EQ(f.replica->sequences.back().size(), 16u);
}

TEST(ServiceTest, PromptsAndTheModelName) {
  ModelDescription m;
  m.name = "served";
  m.hidden_size = 8;
  m.prompts = {{"query", "query: "}};
  Fixture f = Make("tests/fixtures/tokenizers/minilm_wordpiece", m);
  EmbedRequest r;
  r.inputs.push_back({"hello", {}, false});
  r.prompt_name = "query";
  ASSERT_TRUE(f.service->Embed(r, quiver::v1::OUTPUT_F32, kForever).ok());
  tokenizer::Encoding enc;
  ASSERT_TRUE(f.tokenizer->Encode("query: hello", {}, &enc).ok());
  EXPECT_EQ(f.replica->sequences.back(), enc.ids);
  r.prompt_name = "passage";
  absl::StatusOr<Embeddings> bad = f.service->Embed(r, quiver::v1::OUTPUT_F32, kForever);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(ErrorField(bad.status()), "prompt_name");
  EXPECT_NE(bad.status().message().find("Available prompts: [\"query\"]"), std::string::npos)
      << bad.status();
  r.prompt_name.clear();
  r.model = "other";
  absl::StatusOr<Embeddings> other = f.service->Embed(r, quiver::v1::OUTPUT_F32, kForever);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrorReason(other.status()), Reason::kModelNotFound);
}

// --default-prompt-name / --default-prompt: what a request naming no prompt gets; a request's own
// prompt_name still wins.
TEST(ServiceTest, TheServersDefaultPromptOverTheFolders) {
  ModelDescription base;
  base.name = "served";
  base.hidden_size = 8;
  base.prompts = {{"query", "query: "}, {"passage", "passage: "}};
  base.default_prompt_name = "query";  // the folder's
  auto sent = [&](const ModelDescription& m, const std::string& prompt_name) {
    Fixture f = Make("tests/fixtures/tokenizers/minilm_wordpiece", m);
    EmbedRequest r;
    r.inputs.push_back({"hello", {}, false});
    r.prompt_name = prompt_name;
    if (!f.service->Embed(r, quiver::v1::OUTPUT_F32, kForever).ok() ||
        f.replica->sequences.empty()) {
      ADD_FAILURE() << "nothing sent for prompt_name '" << prompt_name << "'";
      return std::vector<uint32_t>();
    }
    return f.replica->sequences.back();
  };
  auto ids = [&](const std::string& text) {
    auto tok = tokenizer::Tokenizer::FromFile(
        (kSource / "tests/fixtures/tokenizers/minilm_wordpiece/tokenizer.json").string());
    tokenizer::Encoding enc;
    EXPECT_TRUE((*tok)->Encode(text, {}, &enc).ok());
    return enc.ids;
  };
  EXPECT_EQ(sent(base, ""), ids("query: hello"));

  ModelDescription named = base;
  ASSERT_TRUE(ApplyDefaultPrompt("passage", "", named).ok());
  EXPECT_EQ(sent(named, ""), ids("passage: hello"));
  EXPECT_EQ(sent(named, "query"), ids("query: hello"));

  ModelDescription text = base;
  ASSERT_TRUE(ApplyDefaultPrompt("", "search_query: ", text).ok());
  EXPECT_EQ(sent(text, ""), ids("search_query: hello"));
  EXPECT_EQ(sent(text, "passage"), ids("passage: hello"));

  ModelDescription unchanged = base;
  ASSERT_TRUE(ApplyDefaultPrompt("", "", unchanged).ok());
  EXPECT_EQ(unchanged.default_prompt_name, "query");

  ModelDescription bad = base;
  absl::Status unknown = ApplyDefaultPrompt("doc", "", bad);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("--default-prompt-name 'doc'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.message().find("passage, query"), std::string::npos) << unknown;
  absl::Status both = ApplyDefaultPrompt("query", "q: ", bad);
  EXPECT_NE(both.message().find("exclude each other"), std::string::npos) << both;
}

TEST(ServiceTest, ScorePairsInOnePass) {
  ModelDescription m;
  m.name = "m";
  m.hidden_size = 4;
  Fixture f = Make("tests/fixtures/tokenizers/minilm_wordpiece", m);
  // An embedding model scores by cosine: queries' rows first, then the documents'.
  absl::StatusOr<Scores> s =
      f.service->Score({"a", "b"}, {"c", "d"}, false, {}, "text_2", kForever);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->scores.size(), 2u);
  EXPECT_EQ(f.replica->sequences.size(), 4u);
  EXPECT_FALSE(f.service->Score({"a", "b"}, {"c", "d", "e"}, false, {}, "text_2", kForever).ok());
}

}  // namespace
}  // namespace quiver::gateway::api
