// Every CPU attention backend against the reference loop on random q/k/v: lengths across the
// flash backend's query blocks (128) and key blocks (512, so the online rescaling runs), causal
// and bidirectional, grouped-query heads, several sequences in one ragged batch.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/attention/registry.h"
#include "engine/attention/table.h"
#include "engine/base/thread_pool.h"

namespace quiver::engine {
namespace {

struct Case {
  std::vector<int32_t> lengths;
  int64_t heads, kv_heads, head_dim;
  bool causal;
};

std::vector<float> RunBackend(std::string_view name, const Case& c, const std::vector<float>& qkv,
                              int64_t stride, ThreadPool& pool) {
  std::vector<int32_t> cu = {0};
  for (int32_t len : c.lengths) cu.push_back(cu.back() + len);
  AttentionPlan plan;
  plan.cu_seqlens = cu.data();
  plan.num_seqs = static_cast<int64_t>(c.lengths.size());
  plan.max_seqlen = *std::max_element(c.lengths.begin(), c.lengths.end());
  plan.num_heads = c.heads;
  plan.num_kv_heads = c.kv_heads;
  plan.head_dim = c.head_dim;
  plan.causal = c.causal;
  plan.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const int64_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  std::vector<float> out(static_cast<size_t>(cu.back() * q_width), -1.0f);
  auto backend = MakeAttentionBackend(Device::kCpu, name);
  EXPECT_TRUE(backend.ok());
  const int64_t tokens = cu.back();
  const Tensor all(qkv.data(), DType::kF32, Device::kCpu, {tokens, stride});
  (*backend)->Run(ExecContext{Device::kCpu, &pool}, plan, all.Columns(0, q_width),
                  all.Columns(q_width, q_width + kv_width),
                  all.Columns(q_width + kv_width, q_width + 2 * kv_width),
                  Tensor(out.data(), DType::kF32, Device::kCpu, {tokens, q_width}));
  return out;
}

TEST(AttentionBackendsTest, AgreeWithTheReferenceLoop) {
  const std::vector<Case> cases = {
      {{1, 7, 129, 600, 1300}, 4, 4, 32, false},
      {{1, 7, 129, 600, 1300}, 4, 4, 32, true},
      {{300, 1100, 5}, 8, 2, 16, true},
      {{513, 64}, 2, 1, 64, false},
  };
  ThreadPool pool(2);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);  // wide: scores far apart, as in real heads
  for (const Case& c : cases) {
    int64_t tokens = 0;
    for (int32_t len : c.lengths) tokens += len;
    const int64_t stride = (c.heads + 2 * c.kv_heads) * c.head_dim;
    std::vector<float> qkv(static_cast<size_t>(tokens * stride));
    for (float& x : qkv) x = dist(rng);
    const std::vector<float> want = RunBackend("reference", c, qkv, stride, pool);
    for (const char* name : {"packed", "tiled", "flash"}) {
      const std::vector<float> got = RunBackend(name, c, qkv, stride, pool);
      // Relative to the largest output: sums of up to 1300 terms in a different order.
      float worst = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(want[i] - got[i]));
        scale = std::max(scale, std::abs(want[i]));
      }
      worst /= scale;
      EXPECT_LE(worst, 1e-5) << name << " causal=" << c.causal << " heads=" << c.heads << "/"
                             << c.kv_heads << " worst " << worst;
    }
  }
}

TEST(AttentionBackendsTest, TableChoosesKnownBackends) {
  for (const char* family : {"bert", "qwen3"}) {
    for (int64_t len : {1, 128, 512, 513, 32768}) {
      EXPECT_TRUE(
          MakeAttentionBackend(Device::kCpu, ChooseAttentionBackend(Device::kCpu, family, len))
              .ok());
    }
  }
  // A family without rows of its own (a new architecture) takes the device's defaults.
  EXPECT_EQ(ChooseAttentionBackend(Device::kCpu, "some-new-family", 100),
            ChooseAttentionBackend(Device::kCpu, "bert", 100));
  EXPECT_FALSE(MakeAttentionBackend(Device::kCpu, "nope").ok());
  for (std::string_view name : AttentionBackendNames(Device::kCpu)) {
    auto backend = MakeAttentionBackend(Device::kCpu, name);
    ASSERT_TRUE(backend.ok()) << name;
    EXPECT_EQ((*backend)->name(), name);
    EXPECT_EQ((*backend)->device(), Device::kCpu);
  }
}

}  // namespace
}  // namespace quiver::engine
