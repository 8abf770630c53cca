// Loading Hugging Face model folders: the real default model against the header the safetensors
// library read (tests/fixtures/minilm/tensors.json), the tiny checkpoints of every supported
// architecture, and malformed folders that must fail with a message naming the problem.
#include "engine/model_folder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include "common/file.h"
#include "common/json.h"
#include "common/strings.h"

namespace quiver::engine {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = QUIVER_SOURCE_DIR;
const fs::path kDefaultModel = kSource / "models" / "all-MiniLM-L6-v2";
const fs::path kFixtures = kSource / "tests" / "fixtures";

JsonValue ReadJson(const fs::path& path) {
  absl::StatusOr<std::string> text = ReadFile(path.string());
  EXPECT_TRUE(text.ok()) << text.status();
  absl::StatusOr<JsonValue> json = JsonValue::Parse(text.ok() ? *text : "null");
  EXPECT_TRUE(json.ok()) << json.status();
  return json.ok() ? *json : JsonValue();
}

// The value the architecture read for a config.json field (ModelInfo::settings).
std::string Setting(const ModelInfo& info, const std::string& field) {
  for (const auto& [name, value] : info.settings) {
    if (name == field) return value;
  }
  ADD_FAILURE() << "no setting '" << field << "'";
  return "";
}

TEST(DefaultModelTest, ConfigParsesToTheModelsSizes) {
  absl::StatusOr<ModelFolder> folder = LoadModelFolder(kDefaultModel.string());
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ(folder->architecture, "BertModel");
  ASSERT_NE(folder->entry, nullptr);
  const ModelInfo& info = folder->info;
  EXPECT_EQ(info.family, "bert");
  // Cross-checked against config.json read independently of the model file's parser.
  JsonValue raw = ReadJson(kDefaultModel / "config.json");
  EXPECT_EQ(info.hidden_size, raw.Find("hidden_size")->as_int());
  EXPECT_EQ(info.num_heads, raw.Find("num_attention_heads")->as_int());
  EXPECT_EQ(info.vocab_size, raw.Find("vocab_size")->as_int());
  EXPECT_EQ(info.max_input_tokens, raw.Find("max_position_embeddings")->as_int());
  EXPECT_EQ(Setting(info, "num_hidden_layers"),
            std::to_string(raw.Find("num_hidden_layers")->as_int()));
  EXPECT_EQ(Setting(info, "intermediate_size"),
            std::to_string(raw.Find("intermediate_size")->as_int()));
  EXPECT_DOUBLE_EQ(std::stod(Setting(info, "layer_norm_eps")),
                   raw.Find("layer_norm_eps")->as_double());
  EXPECT_EQ(Setting(info, "hidden_act"), "gelu");
  EXPECT_FALSE(info.causal);
  EXPECT_EQ(info.num_labels, 0);
  // modules.json: Transformer, mean Pooling, Normalize; sentence_bert_config.json: 256.
  EXPECT_EQ(folder->pooling.modes, std::vector<PoolingMode>{PoolingMode::kMean});
  EXPECT_TRUE(folder->pooling.normalize);
  EXPECT_TRUE(folder->pooling.from_sentence_transformers);
  EXPECT_EQ(folder->pooling.max_seq_length, 256);
}

TEST(DefaultModelTest, SafetensorsHeaderListsEveryTensorAsTheReferenceReadIt) {
  absl::StatusOr<WeightStore> store = WeightStore::OpenFolder(kDefaultModel.string());
  ASSERT_TRUE(store.ok()) << store.status();
  JsonValue reference = ReadJson(kFixtures / "minilm" / "tensors.json");
  ASSERT_TRUE(reference.is_object());
  ASSERT_GT(reference.members().size(), 100u);
  EXPECT_EQ(store->tensors().size(), reference.members().size());
  for (const auto& [name, expected] : reference.members()) {
    const TensorInfo* info = store->Find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(DTypeName(info->dtype), expected.Find("dtype")->as_string()) << name;
    absl::StatusOr<std::vector<int64_t>> shape = JsonIntArray(*expected.Find("shape"), "shape");
    ASSERT_TRUE(shape.ok());
    EXPECT_EQ(info->shape, *shape) << name;
  }
}

TEST(DefaultModelTest, EveryDeclaredBertWeightResolves) {
  absl::StatusOr<ModelFolder> folder = LoadModelFolder(kDefaultModel.string());
  ASSERT_TRUE(folder.ok()) << folder.status();
  // 5 embedding tensors + 16 per layer; the pooler is not read by a mean-pooled BertModel.
  EXPECT_EQ(folder->weight_names.size(), 5u + 16u * 6u);
  for (const std::string& name : folder->weight_names) {
    const TensorInfo* info = folder->weights.Find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dtype, DType::kF32) << name;
    EXPECT_NE(info->data, nullptr);
  }
  // What the checkpoint has but the model does not read: the unused pooler and the position-id
  // buffer transformers saves.
  for (const auto& [name, info] : folder->weights.tensors()) {
    if (std::find(folder->weight_names.begin(), folder->weight_names.end(), name) ==
        folder->weight_names.end()) {
      EXPECT_TRUE(name.find("pooler") != std::string::npos || name.ends_with("position_ids"))
          << name;
    }
  }
}

struct TinyCase {
  const char* name;
  const char* architecture;
  PoolingMode pooling;
  bool normalize;
  bool include_prompt = true;  // the Pooling module's
};

void PrintTo(const TinyCase& c, std::ostream* os) { *os << c.name; }

class TinyCheckpointTest : public ::testing::TestWithParam<TinyCase> {};

TEST_P(TinyCheckpointTest, LoadsWithItsDeclaredWeightsAndDtype) {
  const TinyCase& c = GetParam();
  const fs::path dir = kFixtures / "tiny" / c.name;
  absl::StatusOr<ModelFolder> folder = LoadModelFolder(dir.string());
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ(folder->architecture, c.architecture);
  EXPECT_EQ(folder->pooling.modes, std::vector<PoolingMode>{c.pooling});
  EXPECT_EQ(folder->pooling.normalize, c.normalize);
  EXPECT_EQ(folder->pooling.include_prompt, c.include_prompt);
  // The dtype the golden script stored the weights in.
  JsonValue meta = ReadJson(dir / "reference.meta.json");
  const std::string dtype = meta.Find("dtype")->as_string();
  EXPECT_FALSE(folder->weight_names.empty());
  for (const std::string& name : folder->weight_names) {
    EXPECT_EQ(DTypeName(folder->weights.Find(name)->dtype), dtype) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllArchitectures, TinyCheckpointTest,
    ::testing::Values(
        TinyCase{"bert_mean", "BertModel", PoolingMode::kMean, false},
        TinyCase{"bert_cross_encoder", "BertForSequenceClassification", PoolingMode::kCls, false},
        TinyCase{"qwen3_causal_lasttoken", "Qwen3Model", PoolingMode::kLastToken, true},
        TinyCase{"qwen3_bidirectional_mean", "Qwen3Model", PoolingMode::kMean, false},
        TinyCase{"qwen3_reranker", "Qwen3ForCausalLM", PoolingMode::kLastToken, false},
        TinyCase{"distilbert_mean", "DistilBertModel", PoolingMode::kMean, false},
        TinyCase{"distilbert_classifier", "DistilBertForSequenceClassification", PoolingMode::kCls,
                 false},
        TinyCase{"xlmr_cls", "XLMRobertaModel", PoolingMode::kCls, false},
        TinyCase{"camembert_cls", "CamembertModel", PoolingMode::kCls, false},
        TinyCase{"xlmr_cross_encoder", "XLMRobertaForSequenceClassification", PoolingMode::kCls,
                 false},
        TinyCase{"bert_max", "BertModel", PoolingMode::kMax, true},
        TinyCase{"qwen2_lasttoken", "Qwen2Model", PoolingMode::kLastToken, true},
        TinyCase{"mistral_lasttoken", "MistralModel", PoolingMode::kLastToken, true},
        TinyCase{"llama_lasttoken", "LlamaModel", PoolingMode::kLastToken, true},
        TinyCase{"mpnet_mean", "MPNetModel", PoolingMode::kMean, true},
        TinyCase{"mpnet_cross_encoder", "MPNetForSequenceClassification", PoolingMode::kCls, false},
        TinyCase{"modernbert_cls", "ModernBertModel", PoolingMode::kCls, true},
        TinyCase{"modernbert_cross_encoder", "ModernBertForSequenceClassification",
                 PoolingMode::kCls, false},
        TinyCase{"bert_dense", "BertModel", PoolingMode::kCls, true},
        TinyCase{"t5_mean", "T5EncoderModel", PoolingMode::kMean, true},
        TinyCase{"t5_gated", "T5EncoderModel", PoolingMode::kMean, false},
        TinyCase{"gemma3_mean", "Gemma3TextModel", PoolingMode::kMean, true},
        TinyCase{"bert_weightedmean", "BertModel", PoolingMode::kWeightedMean, false},
        TinyCase{"bert_mean_sqrt_len", "BertModel", PoolingMode::kMeanSqrtLen, false},
        TinyCase{"qwen2_bidirectional_mean", "Qwen2Model", PoolingMode::kMean, false},
        TinyCase{"splade", "BertForMaskedLM", PoolingMode::kCls, false},
        TinyCase{"bert_prompt_mean", "BertModel", PoolingMode::kMean, true, false},
        TinyCase{"bert_prompt_weightedmean", "BertModel", PoolingMode::kWeightedMean, false, false},
        TinyCase{"bert_prompt_cls", "BertModel", PoolingMode::kCls, false, false},
        TinyCase{"qwen3_seq_cls", "Qwen3ForSequenceClassification", PoolingMode::kLastToken, false},
        TinyCase{"llama_classifier", "LlamaForSequenceClassification", PoolingMode::kLastToken,
                 false},
        TinyCase{"qwen2_seq_cls", "Qwen2ForSequenceClassification", PoolingMode::kLastToken, false},
        TinyCase{"mistral_seq_cls", "MistralForSequenceClassification", PoolingMode::kLastToken,
                 false},
        TinyCase{"splade_distilbert", "DistilBertForMaskedLM", PoolingMode::kCls, false},
        TinyCase{"splade_roberta", "RobertaForMaskedLM", PoolingMode::kCls, false}),
    [](const ::testing::TestParamInfo<TinyCase>& info) { return std::string(info.param.name); });

TEST(TinyCheckpointTest, Qwen3FlagsComeFromConfig) {
  absl::StatusOr<ModelFolder> bidir =
      LoadModelFolder((kFixtures / "tiny" / "qwen3_bidirectional_mean").string());
  ASSERT_TRUE(bidir.ok()) << bidir.status();
  EXPECT_EQ(Setting(bidir->info, "bidirectional"), "true");
  EXPECT_FALSE(bidir->info.causal);
  EXPECT_EQ(bidir->info.head_dim, 16);  // explicit, not hidden / heads (= 12)
  EXPECT_DOUBLE_EQ(std::stod(Setting(bidir->info, "rope_theta")), 1e6);  // from rope_parameters
  absl::StatusOr<ModelFolder> reranker =
      LoadModelFolder((kFixtures / "tiny" / "qwen3_reranker").string());
  ASSERT_TRUE(reranker.ok()) << reranker.status();
  EXPECT_TRUE(reranker->info.causal);
  EXPECT_TRUE(reranker->info.yes_no_reranker);
  EXPECT_EQ(Setting(reranker->info, "tie_word_embeddings"), "true");
  EXPECT_EQ(
      std::count(reranker->weight_names.begin(), reranker->weight_names.end(), "lm_head.weight"),
      0);  // tied: read from embed_tokens
}

// ---- Malformed folders
// ---------------------------------------------------------------------------

class MalformedFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("quiver-malformed-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy(kFixtures / "tiny" / "bert_mean", dir_, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& file, const std::string& content) {
    std::ofstream(dir_ / file, std::ios::binary | std::ios::trunc) << content;
  }
  std::string Read(const std::string& file) { return *ReadFile((dir_ / file).string()); }

  // Loads and returns the error message; fails the test when loading succeeds.
  std::string LoadError() {
    absl::StatusOr<ModelFolder> folder = LoadModelFolder(dir_.string());
    EXPECT_FALSE(folder.ok());
    return folder.ok() ? "" : std::string(folder.status().message());
  }

  fs::path dir_;
};

TEST_F(MalformedFolderTest, MissingFolder) {
  fs::remove_all(dir_);
  EXPECT_NE(LoadError().find("does not exist"), std::string::npos);
}

TEST_F(MalformedFolderTest, MissingConfig) {
  fs::remove(dir_ / "config.json");
  EXPECT_NE(LoadError().find("config.json"), std::string::npos);
}

TEST_F(MalformedFolderTest, MissingWeights) {
  fs::remove(dir_ / "model.safetensors");
  EXPECT_NE(LoadError().find("no model.safetensors"), std::string::npos);
}

TEST_F(MalformedFolderTest, MissingTokenizer) {
  fs::remove(dir_ / "tokenizer.json");
  EXPECT_NE(LoadError().find("tokenizer.json is missing"), std::string::npos);
}

TEST_F(MalformedFolderTest, BadJsonInConfig) {
  std::string config = Read("config.json");
  Write("config.json", config.substr(0, config.size() / 2));
  std::string error = LoadError();
  EXPECT_NE(error.find("config.json"), std::string::npos) << error;
  EXPECT_NE(error.find("invalid JSON"), std::string::npos) << error;
}

TEST_F(MalformedFolderTest, UnknownArchitectureIsNamed) {
  std::string config = Read("config.json");
  config.replace(config.find("\"BertModel\""), 11, "\"MambaForEmbedding\"");
  Write("config.json", config);
  std::string error = LoadError();
  EXPECT_NE(error.find("unknown architecture 'MambaForEmbedding'"), std::string::npos) << error;
  EXPECT_NE(error.find("BertModel"), std::string::npos) << error;  // lists what is supported
}

TEST_F(MalformedFolderTest, RemoteCodeArchitecturesAreRefusedByName) {
  const std::string original = Read("config.json");
  for (const char* name : {"NomicBertModel", "NewModel", "JinaBertModel"}) {
    std::string config = original;
    const size_t at = config.find("\"BertModel\"");
    ASSERT_NE(at, std::string::npos);
    config.replace(at, 11, StrCat("\"", name, "\""));
    Write("config.json", config);
    const std::string error = LoadError();
    EXPECT_NE(error.find(StrCat("architecture '", name, "'")), std::string::npos) << error;
    EXPECT_NE(error.find("remote code"), std::string::npos) << error;
  }
}

TEST_F(MalformedFolderTest, WrongTypeNamesTheField) {
  std::string config = Read("config.json");
  size_t at = config.find("\"hidden_size\": 36");
  ASSERT_NE(at, std::string::npos);
  config.replace(at, 17, "\"hidden_size\": \"36\"");
  Write("config.json", config);
  EXPECT_NE(LoadError().find("'hidden_size'"), std::string::npos);
}

TEST_F(MalformedFolderTest, TruncatedSafetensorsNamesATensor) {
  std::string weights = Read("model.safetensors");
  Write("model.safetensors", weights.substr(0, weights.size() - 100));
  std::string error = LoadError();
  EXPECT_NE(error.find("tensor '"), std::string::npos) << error;
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
}

TEST_F(MalformedFolderTest, TruncatedSafetensorsHeader) {
  Write("model.safetensors", Read("model.safetensors").substr(0, 200));
  EXPECT_NE(LoadError().find("header length"), std::string::npos);
}

TEST_F(MalformedFolderTest, WrongShapeNamesTensorAndBothShapes) {
  // The config claims a wider intermediate layer than the weights have.
  std::string config = Read("config.json");
  size_t at = config.find("\"intermediate_size\": 52");
  ASSERT_NE(at, std::string::npos);
  config.replace(at, 23, "\"intermediate_size\": 64");
  Write("config.json", config);
  std::string error = LoadError();
  EXPECT_NE(error.find("encoder.layer.0.intermediate.dense.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("[52, 36]"), std::string::npos) << error;
  EXPECT_NE(error.find("[64, 36]"), std::string::npos) << error;
}

// DistilBERT's own field names in its errors.
TEST(DistilBertFolderTest, UnsupportedActivationAndWrongShapeAreNamed) {
  const fs::path dir =
      fs::temp_directory_path() / ("quiver-distilbert-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(kFixtures / "tiny" / "distilbert_classifier", dir, fs::copy_options::recursive);
  const std::string config = *ReadFile((dir / "config.json").string());
  const auto load_error = [&](const std::string& from, const std::string& to) {
    std::string edited = config;
    const size_t at = edited.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) edited.replace(at, from.size(), to);
    std::ofstream(dir / "config.json", std::ios::binary | std::ios::trunc) << edited;
    absl::StatusOr<ModelFolder> folder = LoadModelFolder(dir.string());
    return folder.ok() ? std::string() : std::string(folder.status().message());
  };
  std::string error = load_error("\"activation\": \"relu\"", "\"activation\": \"swish\"");
  EXPECT_NE(error.find("'activation'"), std::string::npos) << error;
  EXPECT_NE(error.find("swish"), std::string::npos) << error;
  error = load_error("\"hidden_dim\": 40", "\"hidden_dim\": 44");
  EXPECT_NE(error.find("transformer.layer.0.ffn.lin1.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("[40, 24]"), std::string::npos) << error;
  fs::remove_all(dir);
}

// LLaMA-family fields the decoder does not implement fail at load, named.
TEST(DecoderFolderTest, ScaledRotaryAndSlidingWindowAreNamed) {
  const fs::path dir = fs::temp_directory_path() / ("quiver-decoder-" + std::to_string(::getpid()));
  for (const auto& [fixture, field, value] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"llama_lasttoken", "rope_scaling", R"({"rope_type": "llama3", "factor": 8.0})"},
           {"llama_lasttoken", "mlp_bias", "true"},
           {"qwen2_lasttoken", "use_sliding_window", "true"}}) {
    fs::remove_all(dir);
    fs::copy(kFixtures / "tiny" / fixture, dir, fs::copy_options::recursive);
    std::string config = *ReadFile((dir / "config.json").string());
    const std::string key = "\"" + field + "\"";
    const size_t at = config.find(key);
    if (at != std::string::npos) {
      const size_t end = config.find_first_of(",}", config.find(':', at));
      config.replace(at, end - at, key + ": " + value);
    } else {
      config.insert(config.find('{') + 1, key + ": " + value + ",");
    }
    std::ofstream(dir / "config.json", std::ios::binary | std::ios::trunc) << config;
    absl::StatusOr<ModelFolder> folder = LoadModelFolder(dir.string());
    ASSERT_FALSE(folder.ok()) << fixture << " with " << field;
    EXPECT_NE(std::string(folder.status().message()).find("'" + field), std::string::npos)
        << folder.status();
  }
  fs::remove_all(dir);
}

// ModernBERT and MPNet fields the model files do not implement, and a weight of the wrong shape,
// fail at load naming the field or the tensor.
TEST(EncoderFolderTest, UnsupportedFieldsAndShapesAreNamed) {
  const fs::path dir = fs::temp_directory_path() / ("quiver-encoder-" + std::to_string(::getpid()));
  for (const auto& [fixture, field, value, named] :
       std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"modernbert_cls", "hidden_activation", R"("swish")", "'hidden_activation'"},
           {"modernbert_cls", "layer_types", R"(["full_attention", "chunked"])", "'layer_types'"},
           {"modernbert_cls", "rope_parameters",
            R"({"full_attention": {"rope_type": "yarn", "rope_theta": 1e4}})",
            "'rope_parameters.full_attention.rope_type'"},
           {"modernbert_cls", "intermediate_size", "44", "layers.0.mlp.Wi.weight"},
           {"modernbert_cross_encoder", "classifier_pooling", R"("max")", "'classifier_pooling'"},
           {"mpnet_mean", "relative_attention_num_buckets", "64",
            "'relative_attention_num_buckets'"},
           {"mpnet_mean", "hidden_act", R"("swish")", "'hidden_act'"},
           {"t5_mean", "relative_attention_max_distance", "8", "'relative_attention_max_distance'"},
           {"t5_mean", "feed_forward_proj", R"("gated-silu")", "'feed_forward_proj'"},
           {"t5_gated", "d_ff", "20", "encoder.block.0.layer.1.DenseReluDense.wi_0.weight"},
           {"gemma3_mean", "hidden_activation", R"("silu")", "'hidden_activation'"},
           {"gemma3_mean", "attn_logit_softcapping", "50.0", "'attn_logit_softcapping'"},
           {"gemma3_mean", "head_dim", "6", "layers.0.self_attn.q_proj.weight"}}) {
    fs::remove_all(dir);
    fs::copy(kFixtures / "tiny" / fixture, dir, fs::copy_options::recursive);
    absl::StatusOr<JsonValue> config = JsonValue::Parse(*ReadFile((dir / "config.json").string()));
    ASSERT_TRUE(config.ok());
    // Rewrite the one field textually: config.json is the golden script's, one field per key.
    std::string text = *ReadFile((dir / "config.json").string());
    const std::string key = "\"" + field + "\"";
    const size_t at = text.find(key);
    if (at != std::string::npos) {
      // The value runs to the next top-level key: find it by re-parsing candidates.
      size_t end = text.find(",\n  \"", at);
      if (end == std::string::npos) end = text.rfind('}');
      text.replace(at, end - at, key + ": " + value);
    } else {
      text.insert(text.find('{') + 1, key + ": " + value + ",");
    }
    ASSERT_TRUE(JsonValue::Parse(text).ok()) << text;
    std::ofstream(dir / "config.json", std::ios::binary | std::ios::trunc) << text;
    absl::StatusOr<ModelFolder> folder = LoadModelFolder(dir.string());
    ASSERT_FALSE(folder.ok()) << fixture << " with " << field;
    EXPECT_NE(std::string(folder.status().message()).find(named), std::string::npos)
        << folder.status();
  }
  fs::remove_all(dir);
}

// A Dense module's unsupported activation, a chain that does not fit, or weights sentence-
// transformers saved as a pickle fail at load, named.
TEST(DenseFolderTest, BadDenseModulesAreNamed) {
  const fs::path dir = fs::temp_directory_path() / ("quiver-dense-" + std::to_string(::getpid()));
  const auto load_error = [&](const std::string& from, const std::string& to) {
    fs::remove_all(dir);
    fs::copy(kFixtures / "tiny" / "bert_dense", dir, fs::copy_options::recursive);
    std::string config = *ReadFile((dir / "2_Dense" / "config.json").string());
    const size_t at = config.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) config.replace(at, from.size(), to);
    std::ofstream(dir / "2_Dense" / "config.json", std::ios::binary | std::ios::trunc) << config;
    absl::StatusOr<ModelFolder> folder = LoadModelFolder(dir.string());
    return folder.ok() ? std::string() : std::string(folder.status().message());
  };
  std::string error =
      load_error("torch.nn.modules.activation.Tanh", "torch.nn.modules.activation.SiLU");
  EXPECT_NE(error.find("'activation_function'"), std::string::npos) << error;
  error = load_error("\"in_features\": 24", "\"in_features\": 25");
  EXPECT_NE(error.find("in_features 25"), std::string::npos) << error;
  error = load_error("\"out_features\": 20", "\"out_features\": 21");
  EXPECT_NE(error.find("linear.weight"), std::string::npos) << error;
  fs::remove_all(dir);
  fs::copy(kFixtures / "tiny" / "bert_dense", dir, fs::copy_options::recursive);
  fs::rename(dir / "2_Dense" / "model.safetensors", dir / "2_Dense" / "pytorch_model.bin");
  absl::StatusOr<ModelFolder> folder = LoadModelFolder(dir.string());
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find("pytorch_model.bin"), std::string::npos)
      << folder.status();
  fs::remove_all(dir);
}

TEST_F(MalformedFolderTest, ANonBooleanIncludePromptIsNamed) {
  Write("1_Pooling/config.json",
        R"({"embedding_dimension": 36, "pooling_mode": "mean", "include_prompt": "no"})");
  EXPECT_NE(LoadError().find("include_prompt"), std::string::npos) << LoadError();
}

TEST(ModelFolderTest, ConcatenatedPoolingModesInTheModulesOrder) {
  // sentence-transformers' list keeps its order; the older booleans concatenate in its fixed
  // order (cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken).
  absl::StatusOr<ModelFolder> list =
      LoadModelFolder((kFixtures / "tiny" / "bert_concat_pooling").string());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->pooling.modes,
            (std::vector<PoolingMode>{PoolingMode::kMean, PoolingMode::kCls, PoolingMode::kMax}));
  EXPECT_EQ(list->pooling.ModesName(), "mean+cls+max");
  EXPECT_TRUE(list->pooling.normalize);
  absl::StatusOr<ModelFolder> legacy =
      LoadModelFolder((kFixtures / "tiny" / "bert_concat_pooling_legacy").string());
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_EQ(legacy->pooling.modes,
            (std::vector<PoolingMode>{PoolingMode::kCls, PoolingMode::kMax, PoolingMode::kMean}));
}

TEST_F(MalformedFolderTest, PoolingModeListsAndBooleans) {
  Write("1_Pooling/config.json", R"({"embedding_dimension": 36, "pooling_mode": []})");
  EXPECT_NE(LoadError().find("'pooling_mode' is an empty list"), std::string::npos) << LoadError();
  Write("1_Pooling/config.json", R"({"embedding_dimension": 36, "pooling_mode": ["mean", 3]})");
  EXPECT_NE(LoadError().find("'pooling_mode[1]'"), std::string::npos) << LoadError();
  Write("1_Pooling/config.json", R"({"embedding_dimension": 36, "pooling_mode": ["mean", "sum"]})");
  EXPECT_NE(LoadError().find("pooling mode 'sum' is not supported"), std::string::npos);
  // No boolean set: sentence-transformers pools by mean.
  Write("1_Pooling/config.json",
        R"({"word_embedding_dimension": 36, "pooling_mode_cls_token": false})");
  absl::StatusOr<ModelFolder> folder = LoadModelFolder(dir_.string());
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ(folder->pooling.modes, std::vector<PoolingMode>{PoolingMode::kMean});
}

TEST_F(MalformedFolderTest, UnsupportedPoolingModeIsNamed) {
  Write("1_Pooling/config.json", R"({"embedding_dimension": 36, "pooling_mode": "weighted"})");
  EXPECT_NE(LoadError().find("pooling mode 'weighted' is not supported"), std::string::npos);
}

}  // namespace
}  // namespace quiver::engine
