// Invariances of the engine: a sequence gives the same output alone and inside ragged batches of
// 1 to 64 mixed-length sequences; the CPU attention backends (packed, tiled, flash) agree with
// the reference; bucket padding changes no real output; outputs in f16/int8/binary and with
// Matryoshka dimensions follow from the f32 output by their definitions; any compute thread count
// gives the same bits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/graph_bucket.h"
#include "tests/engine/tiny_checkpoints.h"

namespace quiver::engine {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = QUIVER_SOURCE_DIR;

std::string TinyDir(const char* name) {
  return (kSource / "tests" / "fixtures" / "tiny" / name).string();
}

// Random sequences of odd, mixed lengths over the vocabulary (seeded; never all-zero ids).
std::vector<std::vector<int32_t>> RandomSequences(int count, int32_t vocab, int max_len,
                                                  uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len_dist(1, max_len);
  std::uniform_int_distribution<int32_t> id_dist(5, vocab - 1);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(count));
  for (auto& seq : out) {
    seq.resize(static_cast<size_t>(len_dist(rng)));
    for (int32_t& id : seq) id = id_dist(rng);
  }
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]));
  return m;
}

EngineOptions Options(const char* model, const std::string& attention = "", bool pad = false) {
  EngineOptions o;
  o.attention_backend = attention;
  o.pad_to_buckets = pad;
  if (std::string(model) == "qwen3_reranker") {
    o.model.yes_token_id = 100;  // any two ids: the invariances hold for every pair
    o.model.no_token_id = 200;
  }
  return o;
}

class InvarianceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(InvarianceTest, AloneEqualsInsideRaggedBatchesOf1To64) {
  auto engine = Engine::Load(TinyDir(GetParam()), Options(GetParam()));
  ASSERT_TRUE(engine.ok()) << engine.status();
  const auto seqs = RandomSequences(64, 1000, 97, 7);
  std::vector<std::vector<float>> alone;
  for (const auto& seq : seqs) {
    RaggedBatch b;
    b.Add(seq);
    auto out = (*engine)->Run(b);
    ASSERT_TRUE(out.ok()) << out.status();
    alone.push_back(out->RowF32(0));
  }
  for (int size : {1, 2, 3, 7, 16, 33, 64}) {
    RaggedBatch b;
    for (int i = 0; i < size; ++i) b.Add(seqs[static_cast<size_t>((i * 5 + size) % 64)]);
    auto out = (*engine)->Run(b);
    ASSERT_TRUE(out.ok()) << out.status();
    for (int i = 0; i < size; ++i) {
      // Bit for bit: batching must not change a sequence's output at all.
      EXPECT_EQ(out->RowF32(i), alone[static_cast<size_t>((i * 5 + size) % 64)])
          << "batch of " << size << ", row " << i;
    }
  }
}

// A model that pools without its prompt (include_prompt false): each sequence's prompt length
// travels with it through a batch; one that leaves nothing to pool is refused by name.
TEST(PromptLengthTest, EachSequenceKeepsItsOwnPromptInABatch) {
  for (const char* name : {"bert_prompt_mean", "bert_prompt_weightedmean", "bert_prompt_cls"}) {
    auto engine = Engine::Load(TinyDir(name), Options(name));
    ASSERT_TRUE(engine.ok()) << engine.status();
    const auto seqs = RandomSequences(12, 1000, 60, 21);
    RaggedBatch batch;
    std::vector<std::vector<float>> alone, unprompted;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int32_t len = static_cast<int32_t>(seqs[i].size());
      const int32_t prompt = static_cast<int32_t>(i % 4) * (len - 1) / 3;
      batch.Add(seqs[i]);
      batch.prompt_lengths.push_back(prompt);
      RaggedBatch one;
      one.Add(seqs[i]);
      one.prompt_lengths.push_back(prompt);
      auto out = (*engine)->Run(one);
      ASSERT_TRUE(out.ok()) << out.status();
      alone.push_back(out->RowF32(0));
      one.prompt_lengths.clear();
      out = (*engine)->Run(one);
      ASSERT_TRUE(out.ok()) << out.status();
      unprompted.push_back(out->RowF32(0));
    }
    auto out = (*engine)->Run(batch);
    ASSERT_TRUE(out.ok()) << out.status();
    for (size_t i = 0; i < seqs.size(); ++i) {
      EXPECT_EQ(out->RowF32(static_cast<int64_t>(i)), alone[i]) << name << " row " << i;
      // A prompt changes what is pooled (row i has a prompt where i % 4 != 0).
      if (batch.prompt_lengths[i] > 0) {
        EXPECT_NE(alone[i], unprompted[i]) << name << " row " << i;
      } else {
        EXPECT_EQ(alone[i], unprompted[i]) << name << " row " << i;
      }
    }
    RaggedBatch whole;
    whole.Add({5, 6, 7});
    whole.prompt_lengths.push_back(3);
    auto refused = (*engine)->Run(whole);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("prompt length 3"), std::string::npos)
        << refused.status();
  }
}

TEST_P(InvarianceTest, AttentionBackendsAgree) {
  auto reference = Engine::Load(TinyDir(GetParam()), Options(GetParam(), "reference"));
  ASSERT_TRUE(reference.ok());
  RaggedBatch b;
  for (const auto& seq : RandomSequences(9, 1000, 150, 11)) b.Add(seq);  // spans several blocks
  auto r = (*reference)->Run(b);
  ASSERT_TRUE(r.ok());
  for (const char* backend : {"packed", "tiled", "flash"}) {
    auto other = Engine::Load(TinyDir(GetParam()), Options(GetParam(), backend));
    if (!other.ok() && (*reference)->info().attention_masks) {
      // Packed and tiled run no position bias or window: refused at load, by name.
      EXPECT_NE(other.status().message().find(backend), std::string::npos) << other.status();
      EXPECT_NE(other.status().message().find("position bias"), std::string::npos);
      continue;
    }
    ASSERT_TRUE(other.ok()) << other.status();
    auto t = (*other)->Run(b);
    ASSERT_TRUE(t.ok());
    for (int64_t i = 0; i < r->num_seqs; ++i) {
      EXPECT_LE(MaxAbsDiff(r->RowF32(i), t->RowF32(i)), 1e-5) << backend;
    }
  }
}

TEST_P(InvarianceTest, BucketPaddingChangesNoRealOutput) {
  auto plain = Engine::Load(TinyDir(GetParam()), Options(GetParam()));
  auto padded = Engine::Load(TinyDir(GetParam()), Options(GetParam(), "", true));
  ASSERT_TRUE(plain.ok() && padded.ok());
  for (int count : {1, 5, 13}) {
    RaggedBatch b;
    for (const auto& seq : RandomSequences(count, 1000, 77, 100 + count)) b.Add(seq);
    ASSERT_NE(BucketFor(b.num_tokens(), b.num_seqs()).tokens, b.num_tokens());  // really padded
    auto p = (*plain)->Run(b);
    auto q = (*padded)->Run(b);
    ASSERT_TRUE(p.ok() && q.ok());
    ASSERT_EQ(q->num_seqs, count);
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(p->RowF32(i), q->RowF32(i));
  }
}

INSTANTIATE_TEST_SUITE_P(AllCheckpoints, InvarianceTest, ::testing::ValuesIn(kTinyCheckpoints));

// Where the answer reads one token per sequence (CLS or last-token pooling, a classifier on the
// CLS token), the last layer after attention runs on those rows only: the same bits as over every
// row, in f32 and int8, on one thread and two, with prompts, for every checkpoint (those that
// read more rows run whole either way).
// The model in `dir` (Options(name)) with EngineOptions::skip_unread_rows off and on: the same
// bytes out, in f32 and int8, on 1 and 2 threads, under the model's pooling, CLS and last-token.
void ExpectSkippingUnreadRowsGivesTheSameBits(const std::string& dir, const char* name) {
  const auto seqs = RandomSequences(24, 1000, 70, 11);
  for (const auto quantize : {ops::WeightPrecision::kF32, ops::WeightPrecision::kInt8}) {
    for (const int threads : {1, 2}) {
      std::vector<std::vector<uint8_t>> answers;
      for (const bool skip : {false, true}) {
        EngineOptions options = Options(name);
        options.quantize = quantize;
        options.num_threads = threads;
        options.skip_unread_rows = skip;
        auto engine = Engine::Load(dir, options);
        ASSERT_TRUE(engine.ok()) << engine.status();
        for (const Pooling pooling : {Pooling::kModelDefault, Pooling::kCls, Pooling::kLastToken}) {
          // Scorers and models that concatenate several modes take no pooling of a chunk's own.
          if (pooling != Pooling::kModelDefault &&
              ((*engine)->is_scorer() || (*engine)->pooled_size() != (*engine)->hidden_size())) {
            continue;
          }
          RaggedBatch batch;
          for (size_t i = 0; i < seqs.size(); ++i) {
            batch.Add(seqs[i]);
            batch.prompt_lengths.push_back(static_cast<int32_t>(i % 3) *
                                           static_cast<int32_t>(seqs[i].size() - 1) / 4);
          }
          batch.output.pooling = pooling;
          auto out = (*engine)->Run(batch);
          ASSERT_TRUE(out.ok()) << out.status();
          answers.push_back(out->data);
        }
      }
      ASSERT_EQ(answers.size() % 2, 0u);
      const size_t half = answers.size() / 2;
      for (size_t i = 0; i < half; ++i) {
        EXPECT_EQ(answers[i], answers[half + i])
            << name << " " << ops::WeightPrecisionName(quantize) << " threads " << threads
            << " pooling #" << i;
      }
    }
  }
}

TEST_P(InvarianceTest, SkippingUnreadRowsGivesTheSameBits) {
  ExpectSkippingUnreadRowsGivesTheSameBits(TinyDir(GetParam()), GetParam());
}

// The bytes a batch gives under `options` on 1, 2, 3 and 5 compute threads (a host's core count
// decides the default): every product, row pass and attention item is cut by the thread count
// (row blocks, column shares, the feed-forward's plan), but each element's arithmetic never
// depends on the cut, so the outputs are the same bytes.
void ExpectEveryThreadCountGivesTheSameBits(const std::string& dir, EngineOptions options,
                                            const std::vector<RaggedBatch>& batches,
                                            const std::string& what) {
  std::vector<std::vector<uint8_t>> first;
  for (const int threads : {2, 1, 3, 5}) {
    options.num_threads = threads;
    auto engine = Engine::Load(dir, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (size_t b = 0; b < batches.size(); ++b) {
      auto out = (*engine)->Run(batches[b]);
      ASSERT_TRUE(out.ok()) << out.status();
      if (threads == 2) {
        first.push_back(out->data);
      } else {
        EXPECT_EQ(out->data, first[b])
            << what << " batch " << b << " on " << threads << " threads against 2";
      }
    }
  }
}

TEST_P(InvarianceTest, EveryThreadCountGivesTheSameBits) {
  std::vector<RaggedBatch> batches(2);
  for (const auto& seq : RandomSequences(40, 1000, 70, 13)) batches[0].Add(seq);
  batches[1].Add(RandomSequences(1, 1000, 70, 17)[0]);
  for (const auto quantize : {ops::WeightPrecision::kF32, ops::WeightPrecision::kInt8}) {
    EngineOptions options = Options(GetParam());
    options.quantize = quantize;
    ExpectEveryThreadCountGivesTheSameBits(
        TinyDir(GetParam()), options, batches,
        std::string(GetParam()) + " " + std::string(ops::WeightPrecisionName(quantize)));
  }
}

// The same at all-MiniLM-L6-v2's sizes, where the plans differ most by thread count: a bulk batch
// (3,000 or so rows: many feed-forward blocks) and one 512-token sequence (the batch-1 plans:
// columns shared out, the feed-forward's last quarter in small blocks).
TEST(ThreadCountTest, MiniLmGivesTheSameBitsOnAnyThreadCount) {
  std::vector<RaggedBatch> batches(2);
  for (const auto& seq : RandomSequences(24, 30000, 250, 19)) batches[0].Add(seq);
  std::vector<int32_t> long_seq = RandomSequences(1, 30000, 1, 23)[0];
  long_seq.resize(512);
  std::mt19937 rng(29);
  for (int32_t& id : long_seq) id = 1000 + static_cast<int32_t>(rng() % 29000);
  batches[1].Add(long_seq);
  for (const auto quantize : {ops::WeightPrecision::kF32, ops::WeightPrecision::kInt8}) {
    EngineOptions options;
    options.quantize = quantize;
    ExpectEveryThreadCountGivesTheSameBits(
        (kSource / "models" / "all-MiniLM-L6-v2").string(), options, batches,
        "all-MiniLM-L6-v2 " + std::string(ops::WeightPrecisionName(quantize)));
  }
}

// ModernBERT's classifier on the CLS token (classifier_pooling "cls"; the tiny cross-encoder
// pools by the mean): its Score reads the first token's row only (Model::ScoresFirstTokens).
TEST(SkippingUnreadRowsTest, ModernBertClassifierOnTheClsToken) {
  const fs::path dir =
      fs::temp_directory_path() / ("quiver-modernbert-cls-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(TinyDir("modernbert_cross_encoder"), dir, fs::copy_options::recursive);
  std::ifstream in(dir / "config.json", std::ios::binary);
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string from = "\"classifier_pooling\": \"mean\"";
  const size_t at = config.find(from);
  ASSERT_NE(at, std::string::npos);
  config.replace(at, from.size(), "\"classifier_pooling\": \"cls\"");
  std::ofstream(dir / "config.json", std::ios::binary | std::ios::trunc) << config;
  ExpectSkippingUnreadRowsGivesTheSameBits(dir.string(), "modernbert_cross_encoder");
  fs::remove_all(dir);
}

TEST(OutputFormatTest, DimensionsNormalizeAndQuantizeFollowTheirDefinitions) {
  auto engine = Engine::Load(TinyDir("bert_mean"), {});
  ASSERT_TRUE(engine.ok());
  RaggedBatch base;
  for (const auto& seq : RandomSequences(4, 1000, 40, 3)) base.Add(seq);
  auto full = (*engine)->Run(base);  // bert_mean does not normalize by default
  ASSERT_TRUE(full.ok());
  for (OutputType type :
       {OutputType::kF32, OutputType::kF16, OutputType::kInt8, OutputType::kBinary}) {
    RaggedBatch b = base;
    b.output.dimensions = 17;
    b.output.normalize = true;
    b.output.output_type = type;
    auto out = (*engine)->Run(b);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->dimensions, 17);
    const size_t row_bytes = type == OutputType::kF32    ? 68
                             : type == OutputType::kF16  ? 34
                             : type == OutputType::kInt8 ? 17
                                                         : 3;
    ASSERT_EQ(out->data.size(), 4 * row_bytes);
    for (int64_t s = 0; s < 4; ++s) {
      std::vector<float> want = full->RowF32(s);
      want.resize(17);
      double norm = 0;
      for (float v : want) norm += double(v) * v;
      for (float& v : want) v = static_cast<float>(v / std::sqrt(norm));
      const uint8_t* row = out->data.data() + s * row_bytes;
      for (int j = 0; j < 17; ++j) {
        if (type == OutputType::kF32) {
          float got;
          std::memcpy(&got, row + 4 * j, 4);
          EXPECT_NEAR(got, want[j], 1e-6);
        } else if (type == OutputType::kF16) {
          uint16_t h;
          std::memcpy(&h, row + 2 * j, 2);
          // Decode IEEE half by hand (normal numbers are all that unit vectors need here).
          const int exp = (h >> 10) & 0x1F;
          const float mag = exp == 0 ? (h & 0x3FF) * std::ldexp(1.0f, -24)
                                     : (1.0f + (h & 0x3FF) / 1024.0f) * std::ldexp(1.0f, exp - 15);
          EXPECT_NEAR((h & 0x8000) ? -mag : mag, want[j], 1e-3);
        } else if (type == OutputType::kInt8) {
          const auto got = static_cast<int8_t>(row[j]);
          EXPECT_EQ(got, static_cast<int8_t>(std::lround(std::tanh(want[j]) * 127.0f)));
        } else {
          const bool bit = (row[j / 8] >> (7 - j % 8)) & 1;
          EXPECT_EQ(bit, want[j] > 0.0f);
        }
      }
    }
  }
}

TEST(OutputFormatTest, BadBatchesAreRefusedWithTheReason) {
  auto engine = Engine::Load(TinyDir("bert_mean"), {});
  ASSERT_TRUE(engine.ok());
  RaggedBatch too_long;
  too_long.Add(std::vector<int32_t>(129, 7));  // max_position_embeddings 128
  auto out = (*engine)->Run(too_long);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("at most 128"), std::string::npos);
  RaggedBatch bad_id;
  bad_id.Add({5, 1000000});
  EXPECT_NE(std::string((*engine)->Run(bad_id).status().message()).find("outside the vocabulary"),
            std::string::npos);
  RaggedBatch wide;
  wide.Add({5, 6});
  wide.output.dimensions = 37;  // hidden is 36
  EXPECT_NE(std::string((*engine)->Run(wide).status().message()).find("larger than"),
            std::string::npos);
  RaggedBatch empty_seq;
  empty_seq.cu_seqlens = {0, 0};
  EXPECT_FALSE((*engine)->Run(empty_seq).ok());
}

TEST(SpanPoolingTest, LateChunkingSpansAreMeansOverTheirTokens) {
  // bert_mean pools by mean, so a span over a whole sequence must equal that sequence's output,
  // and two halves of a sequence average (by token count) to the whole.
  auto engine = Engine::Load(TinyDir("bert_mean"), {});
  ASSERT_TRUE(engine.ok());
  const auto seqs = RandomSequences(3, 1000, 60, 21);
  RaggedBatch plain;
  for (const auto& s : seqs) plain.Add(s);
  auto whole = (*engine)->Run(plain);
  ASSERT_TRUE(whole.ok());
  RaggedBatch spans = plain;
  const int32_t len0 = spans.cu_seqlens[1];
  const int32_t half = len0 / 2 + 1;
  spans.span_bounds = {0, len0, spans.cu_seqlens[1], spans.cu_seqlens[2], 0, half, half, len0};
  auto out = (*engine)->Run(spans);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->num_seqs, 4);
  EXPECT_EQ(out->RowF32(0), whole->RowF32(0));
  EXPECT_EQ(out->RowF32(1), whole->RowF32(1));
  const auto a = out->RowF32(2), b = out->RowF32(3), w = whole->RowF32(0);
  for (size_t j = 0; j < w.size(); ++j) {
    EXPECT_NEAR((a[j] * half + b[j] * (len0 - half)) / len0, w[j], 1e-5);
  }
  RaggedBatch crossing = plain;
  crossing.span_bounds = {len0 - 1, len0 + 1};
  EXPECT_NE(std::string((*engine)->Run(crossing).status().message()).find("crosses"),
            std::string::npos);
}

TEST(SpanPoolingTest, AModelOfConcatenatedModesRefusesLateChunkingButGivesTokenRows) {
  // bert_concat_pooling's embedding is its mean, CLS and max rows side by side: late chunking's
  // mean per span has no such form, and a chunk cannot pick one mode; /embed_all's token rows
  // (raw hidden states) still come, hidden_size wide.
  auto engine = Engine::Load(TinyDir("bert_concat_pooling"), {});
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->pooled_size(), 3 * (*engine)->hidden_size());
  EXPECT_EQ((*engine)->output_size(), 60);
  const auto seqs = RandomSequences(2, 1000, 30, 23);
  RaggedBatch plain;
  for (const auto& s : seqs) plain.Add(s);
  auto whole = (*engine)->Run(plain);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->dimensions, 60);
  RaggedBatch spans = plain;
  spans.span_bounds = {0, 2, 2, spans.cu_seqlens[1]};
  auto refused = (*engine)->Run(spans);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("late chunking"), std::string::npos)
      << refused.status();
  spans.output.raw_hidden = true;
  auto rows = (*engine)->Run(spans);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->dimensions, 20);
  EXPECT_EQ(rows->num_seqs, 2);
  RaggedBatch one_mode = plain;
  one_mode.output.pooling = Pooling::kCls;
  auto chosen = (*engine)->Run(one_mode);
  ASSERT_FALSE(chosen.ok());
  EXPECT_NE(std::string(chosen.status().message()).find("cannot choose one"), std::string::npos);
}

TEST(LazyResultTest, SubmitReturnsAtOnceAndResultsArriveInOrder) {
  auto engine = Engine::Load(TinyDir("qwen3_causal_lasttoken"), {});
  ASSERT_TRUE(engine.ok());
  const auto seqs = RandomSequences(20, 1000, 120, 5);
  std::vector<LazyResult> results;
  for (const auto& seq : seqs) {
    RaggedBatch b;
    b.Add(seq);
    results.push_back((*engine)->Submit(b));
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& out = results[i].Wait();
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE(results[i].Ready());
    RaggedBatch again;
    again.Add(seqs[i]);
    EXPECT_LE(MaxAbsDiff(out->RowF32(0), (*engine)->Run(again)->RowF32(0)), 1e-6);
  }
}

TEST(GraphBucketTest, TokensPadTo64Then256AndSeqsGetAPaddingSlot) {
  EXPECT_EQ(BucketFor(1, 1).tokens, 64);
  EXPECT_EQ(BucketFor(64, 1).tokens, 64);
  EXPECT_EQ(BucketFor(65, 3).tokens, 128);
  EXPECT_EQ(BucketFor(1024, 8).tokens, 1024);
  EXPECT_EQ(BucketFor(1025, 8).tokens, 1280);
  EXPECT_EQ(BucketFor(5000, 8).tokens, 5120);
  // 64 tokens exactly: no padding sequence; 63: one more sequence slot for the padding.
  EXPECT_EQ(BucketFor(64, 8).seqs, 8);
  EXPECT_EQ(BucketFor(63, 8).seqs, 16);
  EXPECT_EQ(BucketFor(100, 65).seqs, 96);
  for (int64_t t = 1; t < 5000; t += 37) {
    for (int64_t s = 1; s <= std::min<int64_t>(t, 300); s += 13) {
      const GraphBucket b = BucketFor(t, s);
      EXPECT_GE(b.tokens, t);
      EXPECT_GE(b.seqs, s + (b.tokens > t ? 1 : 0));
      EXPECT_EQ(b.tokens % (b.tokens <= 1024 ? 64 : 256), 0);
    }
  }
}

}  // namespace
}  // namespace quiver::engine
