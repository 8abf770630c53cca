// The engine's relative position buckets against transformers' own (T5's and MPNet's, the same
// function), for distances -300..300 under four (buckets, max distance) settings, written by
// tools/golden/make_fixtures.py into tests/fixtures/relative_position_buckets.json.
#include "engine/models/relative_position.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/file.h"
#include "common/json.h"

namespace quiver::engine {
namespace {

const std::filesystem::path kFixtures =
    std::filesystem::path(QUIVER_SOURCE_DIR) / "tests" / "fixtures";

TEST(RelativePositionTest, BucketsEqualTransformers) {
  absl::StatusOr<std::string> text =
      ReadFile((kFixtures / "relative_position_buckets.json").string());
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<JsonValue> json = JsonValue::Parse(*text);
  ASSERT_TRUE(json.ok()) << json.status();
  const JsonValue* cases = json->Find("cases");
  ASSERT_NE(cases, nullptr);
  ASSERT_EQ(cases->items().size(), 4u);
  for (const JsonValue& c : cases->items()) {
    const int64_t buckets = c.Find("num_buckets")->as_int();
    const int64_t distance = c.Find("max_distance")->as_int();
    const int64_t first = c.Find("first_distance")->as_int();
    const auto& want = c.Find("buckets")->items();
    ASSERT_EQ(want.size(), 601u);
    for (size_t i = 0; i < want.size(); ++i) {
      const int64_t d = first + static_cast<int64_t>(i);
      EXPECT_EQ(RelativePositionBucket(d, buckets, distance), want[i].as_int())
          << "distance " << d << " buckets " << buckets << " max_distance " << distance;
    }
  }
}

TEST(RelativePositionTest, TableHoldsEachDistancesBucketPerHead) {
  const int64_t buckets = 32, heads = 3, distance = 128;
  std::vector<float> weight(buckets * heads);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<float>(i);
  const std::vector<float> table =
      RelativePositionBiasTable(weight.data(), buckets, heads, distance);
  ASSERT_EQ(table.size(), static_cast<size_t>(heads * (2 * distance + 1)));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t d = -distance; d <= distance; ++d) {
      EXPECT_EQ(table[h * (2 * distance + 1) + d + distance],
                weight[RelativePositionBucket(d, buckets, distance) * heads + h]);
    }
  }
}

}  // namespace
}  // namespace quiver::engine
