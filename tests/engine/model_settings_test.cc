// A model folder's quiver.json (ApplyModelSettings): its keys set what the command line did not,
// a flag given on the command line wins, no file changes nothing, and a bad file is refused
// naming the file and the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/engine.h"

namespace quiver::engine {
namespace {

class ModelSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("quiver-model-settings-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text) { std::ofstream(dir_ / "quiver.json") << text; }
  std::filesystem::path dir_;
};

TEST_F(ModelSettingsTest, NoFileChangesNothing) {
  DeviceSettings s;
  ASSERT_TRUE(ApplyModelSettings(dir_.string(), s).ok());
  EXPECT_EQ(s.quantize, "none");
  EXPECT_EQ(s.min_int8_cosine, 0.99);
}

TEST_F(ModelSettingsTest, TheFolderSetsWhatTheCommandLineDidNot) {
  Write(R"({"quantize": "int8", "min_int8_cosine": 0.995, "pooling": "cls"})");
  DeviceSettings s;
  ASSERT_TRUE(ApplyModelSettings(dir_.string(), s).ok());
  EXPECT_EQ(s.quantize, "int8");
  EXPECT_EQ(s.min_int8_cosine, 0.995);
  EXPECT_EQ(s.pooling, "cls");

  DeviceSettings given;
  given.quantize = "none";
  given.quantize_given = true;
  given.min_int8_cosine = 0.9;
  given.min_int8_cosine_given = true;
  given.pooling = "mean";
  given.pooling_given = true;
  ASSERT_TRUE(ApplyModelSettings(dir_.string(), given).ok());
  EXPECT_EQ(given.quantize, "none");
  EXPECT_EQ(given.min_int8_cosine, 0.9);
  EXPECT_EQ(given.pooling, "mean");
}

TEST_F(ModelSettingsTest, BadFilesAreRefusedNamingTheKey) {
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {R"({"quantize": "int4"})", "\"quantize\""},
           {R"({"quantize": 8})", "\"quantize\""},
           {R"({"min_int8_cosine": 1.5})", "\"min_int8_cosine\""},
           {R"({"min_int8_cosine": "high"})", "\"min_int8_cosine\""},
           {R"({"quantise": "int8"})", "unknown key \"quantise\""},
           {R"({"pooling": "first"})", "\"pooling\" must be one of cls, mean"},
           {R"({"pooling": true})", "\"pooling\""},
           {R"(["int8"])", "JSON object"},
           {R"({"quantize": )", "quiver.json"}}) {
    Write(text);
    DeviceSettings s;
    const absl::Status status = ApplyModelSettings(dir_.string(), s);
    ASSERT_FALSE(status.ok()) << text;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(status.message().find(needle), std::string::npos) << status;
    EXPECT_NE(status.message().find("quiver.json"), std::string::npos) << status;
  }
}

TEST(PoolingSettingTest, ThePoolingFlagIsParsedOrRefusedNamingIt) {
  DeviceSettings s;
  EngineOptions o;
  ASSERT_TRUE(ApplyDeviceSettings(s, 4096, 64, o).ok());
  EXPECT_FALSE(o.pooling.has_value());  // the folder's
  for (const auto& [name, mode] : std::vector<std::pair<std::string, PoolingMode>>{
           {"cls", PoolingMode::kCls},
           {"mean", PoolingMode::kMean},
           {"max", PoolingMode::kMax},
           {"lasttoken", PoolingMode::kLastToken},
           {"last-token", PoolingMode::kLastToken},
           {"mean_sqrt_len_tokens", PoolingMode::kMeanSqrtLen},
           {"weightedmean", PoolingMode::kWeightedMean}}) {
    s.pooling = name;
    ASSERT_TRUE(ApplyDeviceSettings(s, 4096, 64, o).ok()) << name;
    EXPECT_EQ(o.pooling, mode) << name;
  }
  s.pooling = "splade";
  const absl::Status bad = ApplyDeviceSettings(s, 4096, 64, o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("--pooling 'splade'"), std::string::npos) << bad;
}

}  // namespace
}  // namespace quiver::engine
