// Every CPU attention backend against the reference loop on random q/k/v: lengths across the
// flash backend's query blocks (128) and key blocks (512, so the online rescaling runs), causal
// and bidirectional, grouped-query heads, several sequences in one ragged batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/attention/registry.h"
#include "engine/attention/table.h"
#include "engine/base/thread_pool.h"
#include "engine/kernels/cpu/gemm_bf16.h"
#include "engine/kernels/cpu/gemm_int16.h"

namespace quiver::engine {
namespace {

struct Case {
  std::vector<int32_t> lengths;
  int64_t heads, kv_heads, head_dim;
  bool causal;
  int64_t window = -1;
  const std::vector<float>* bias = nullptr;  // [heads, 2 * bias_distance + 1]
  int64_t bias_distance = 0;
};

std::vector<float> RunBackend(std::string_view name, const Case& c, const std::vector<float>& qkv,
                              int64_t stride, ThreadPool& pool, bool bf16_products = false,
                              bool int16_products = false) {
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
  plan.window = c.window;
  plan.position_bias = c.bias != nullptr ? c.bias->data() : nullptr;
  plan.bias_max_distance = c.bias_distance;
  plan.bf16_products = bf16_products;
  plan.int16_products = int16_products;
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

// The flash backend with reduced-precision products (bf16 or int16) on `cases`: within `bound` of
// the largest output from the reference, not the f32 answer (over `floor`), and the batch's last
// sequence alone gives the bits it has in the batch.
void ExpectFlashProductsNearTheReference(const char* form, bool bf16, bool int16, double bound,
                                         double floor, const std::vector<Case>& cases) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const Case& c : cases) {
    int64_t tokens = 0;
    for (int32_t len : c.lengths) tokens += len;
    const int64_t stride = (c.heads + 2 * c.kv_heads) * c.head_dim;
    std::vector<float> qkv(static_cast<size_t>(tokens * stride));
    for (float& x : qkv) x = dist(rng);
    const std::vector<float> want = RunBackend("reference", c, qkv, stride, pool);
    const std::vector<float> got = RunBackend("flash", c, qkv, stride, pool, bf16, int16);
    float worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::abs(want[i] - got[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    EXPECT_LE(worst / scale, bound) << form << " causal=" << c.causal << " heads=" << c.heads;
    EXPECT_GT(worst / scale, floor) << "the " << form << " products gave the f32 answer";
    std::printf("flash %s, causal=%d heads=%lld d=%lld: worst %.2e of the largest output\n", form,
                int{c.causal}, static_cast<long long>(c.heads), static_cast<long long>(c.head_dim),
                worst / scale);
    // The last sequence alone: the same bits as in the batch.
    Case alone = c;
    alone.lengths = {c.lengths.back()};
    const int64_t first = tokens - c.lengths.back();
    const std::vector<float> tail(qkv.begin() + first * stride, qkv.end());
    const std::vector<float> one = RunBackend("flash", alone, tail, stride, pool, bf16, int16);
    const int64_t q_width = c.heads * c.head_dim;
    EXPECT_TRUE(std::equal(one.begin(), one.end(), got.begin() + first * q_width)) << form;
  }
}

// The flash backend's products in bf16 (AttentionPlan::bf16_products, hosts with AVX512_BF16):
// near the reference (bf16 keeps 8 bits of mantissa: measured 0.23-0.41% of the largest output
// here, bound 2%, against f32's 1e-5), not the f32 bits, and a sequence alone gives the bits it has
// in the batch.
TEST(AttentionBackendsTest, FlashInBf16StaysNearTheReference) {
  if (!cpu::Bf16Supported()) GTEST_SKIP() << "no AVX512_BF16 on this host (or path)";
  ExpectFlashProductsNearTheReference("bf16", true, false, 0.02, 1e-5,
                                      {{{1, 7, 129, 600, 1300}, 4, 4, 32, false},
                                       {{1, 7, 129, 600, 1300}, 4, 4, 32, true},
                                       {{300, 1100, 5}, 8, 2, 16, true},
                                       {{513, 64}, 2, 1, 64, false}});
}

// The flash backend's products in int16 (AttentionPlan::int16_products, the avx512_vnni path): near
// the reference (13 bits for the scores, 11-12 for P and V against bf16's 8: measured 0.05-0.13%
// of the largest output here, bound 1%), not the f32 bits, and a sequence alone gives the bits it
// has in the batch (a causal run packs part of a key block, whose V scales come from all of it).
TEST(AttentionBackendsTest, FlashInInt16StaysNearTheReference) {
  if (!cpu::Int16ProductsSupported()) GTEST_SKIP() << "no int16 products on this path";
  ExpectFlashProductsNearTheReference("int16", false, true, 0.01, 1e-6,
                                      {{{1, 7, 129, 600, 1300}, 4, 4, 32, false},
                                       {{1, 7, 129, 600, 1300}, 4, 4, 32, true},
                                       {{300, 1100, 5}, 8, 2, 16, true},
                                       {{513, 64}, 2, 1, 64, false},
                                       {{200}, 2, 2, 128, false}});
}

// The plain definition in double, one (query, head) at a time: the keys the window leaves, each
// score scaled plus the bias of its clamped distance, softmax, the weighted sum of values.
std::vector<float> BruteForce(const Case& c, const std::vector<float>& qkv, int64_t stride) {
  const int64_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const int64_t d = c.head_dim, m = c.bias_distance;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  int64_t tokens = 0;
  for (int32_t len : c.lengths) tokens += len;
  std::vector<float> out(static_cast<size_t>(tokens * q_width));
  int64_t begin = 0;
  for (int32_t len : c.lengths) {
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t kvh = h / (c.heads / c.kv_heads);
      for (int64_t i = 0; i < len; ++i) {
        std::vector<double> p(static_cast<size_t>(len), 0.0);
        double best = -1e300;
        std::vector<bool> seen(static_cast<size_t>(len), false);
        for (int64_t j = 0; j < len; ++j) {
          if (c.causal && j > i) continue;
          if (c.window >= 0 && std::abs(i - j) > c.window) continue;
          double s = 0;
          for (int64_t x = 0; x < d; ++x) {
            s += static_cast<double>(qkv[(begin + i) * stride + h * d + x]) *
                 qkv[(begin + j) * stride + q_width + kvh * d + x];
          }
          s *= scale;
          if (c.bias != nullptr) {
            const int64_t dist = std::clamp<int64_t>(j - i, -m, m);
            s += (*c.bias)[h * (2 * m + 1) + dist + m];
          }
          p[j] = s;
          seen[j] = true;
          best = std::max(best, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          p[j] = seen[j] ? std::exp(p[j] - best) : 0.0;
          sum += p[j];
        }
        for (int64_t x = 0; x < d; ++x) {
          double o = 0;
          for (int64_t j = 0; j < len; ++j) {
            o += p[j] * qkv[(begin + j) * stride + q_width + kv_width + kvh * d + x];
          }
          out[(begin + i) * q_width + h * d + x] = static_cast<float>(o / sum);
        }
      }
    }
    begin += len;
  }
  return out;
}

// Sliding windows (narrower than a key block, wider, crossing block edges) and relative position
// biases (clamped near and far), causal and not: reference and flash against the definition,
// and flash bit for bit the same for a sequence alone and inside the batch.
TEST(AttentionBackendsTest, WindowsAndPositionBiasesAgreeWithTheDefinition) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> bias_near(4 * 17), bias_far(4 * 257);
  for (float& x : bias_near) x = dist(rng);
  for (float& x : bias_far) x = dist(rng);
  const std::vector<int32_t> lengths = {1, 9, 130, 700, 1100};
  const std::vector<Case> cases = {
      {lengths, 4, 4, 32, false, 3},
      {lengths, 4, 4, 32, false, 64},
      {lengths, 4, 2, 32, true, 200},
      {lengths, 4, 4, 32, false, 600},
      {lengths, 4, 4, 32, false, -1, &bias_near, 8},
      {lengths, 4, 4, 32, false, -1, &bias_far, 128},
      {lengths, 4, 4, 32, true, 100, &bias_far, 128},
  };
  ThreadPool pool(2);
  for (const Case& c : cases) {
    int64_t tokens = 0;
    for (int32_t len : c.lengths) tokens += len;
    const int64_t stride = (c.heads + 2 * c.kv_heads) * c.head_dim;
    std::vector<float> qkv(static_cast<size_t>(tokens * stride));
    for (float& x : qkv) x = dist(rng);
    const std::vector<float> want = BruteForce(c, qkv, stride);
    for (const char* name : {"reference", "flash"}) {
      const std::vector<float> got = RunBackend(name, c, qkv, stride, pool);
      float worst = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(want[i] - got[i]));
        scale = std::max(scale, std::abs(want[i]));
      }
      EXPECT_LE(worst / scale, 1e-5) << name << " window=" << c.window << " causal=" << c.causal
                                     << " bias=" << c.bias_distance;
    }
    // The 700-token sequence alone: the same bits as inside the batch.
    const std::vector<float> batch = RunBackend("flash", c, qkv, stride, pool);
    Case alone = c;
    alone.lengths = {700};
    const int64_t offset = 1 + 9 + 130;
    const std::vector<float> single(qkv.begin() + offset * stride,
                                    qkv.begin() + (offset + 700) * stride);
    const std::vector<float> got = RunBackend("flash", alone, single, stride, pool);
    const int64_t width = c.heads * c.head_dim;
    EXPECT_TRUE(std::equal(got.begin(), got.end(), batch.begin() + offset * width))
        << "window=" << c.window << " bias=" << c.bias_distance;
  }
}

TEST(AttentionBackendsTest, PackedAndTiledRefuseMasks) {
  for (const char* name : {"packed", "tiled"}) {
    EXPECT_FALSE((*MakeAttentionBackend(Device::kCpu, name))->SupportsMasks()) << name;
  }
  for (const char* name : {"reference", "flash"}) {
    EXPECT_TRUE((*MakeAttentionBackend(Device::kCpu, name))->SupportsMasks()) << name;
  }
}

TEST(AttentionBackendsTest, TableChoosesKnownBackends) {
#ifdef QUIVER_WITH_CUDA
  const std::vector<Device> devices = {Device::kCpu, Device::kCuda};
#else
  const std::vector<Device> devices = {Device::kCpu};
#endif
  for (const Device device : devices) {
    for (const char* family : {"bert", "qwen3"}) {
      for (int64_t head_dim : {32, 64, 128}) {
        for (int64_t len : {1, 128, 512, 513, 32768}) {
          const std::string_view name = ChooseAttentionBackend(device, family, head_dim, len);
          EXPECT_TRUE(MakeAttentionBackend(device, name).ok()) << name;
        }
      }
    }
  }
#ifdef QUIVER_WITH_CUDA
  // FlashInfer has no head_dim 32 instance: MiniLM-sized BERTs stay on the varlen kernel.
  EXPECT_EQ(ChooseAttentionBackend(Device::kCuda, "bert", 32, 512), "cuda_varlen");
  EXPECT_EQ(ChooseAttentionBackend(Device::kCuda, "bert", 64, 128), "flashinfer_fa2");
  EXPECT_EQ(ChooseAttentionBackend(Device::kCuda, "bert", 64, 129), "flashinfer_fa3");
  EXPECT_EQ(ChooseAttentionBackend(Device::kCuda, "qwen3", 128, 1), "flashinfer_fa3");
  // What the table can choose per model: what the engine checks the model against at load.
  using Names = std::vector<std::string_view>;
  EXPECT_EQ(TableAttentionBackends(Device::kCuda, "bert", 32), Names{"cuda_varlen"});
  EXPECT_EQ(TableAttentionBackends(Device::kCuda, "bert", 64),
            (Names{"flashinfer_fa2", "flashinfer_fa3"}));
  EXPECT_EQ(TableAttentionBackends(Device::kCuda, "qwen3", 128), Names{"flashinfer_fa3"});
#endif
  EXPECT_EQ(TableAttentionBackends(Device::kCpu, "bert", 64),
            std::vector<std::string_view>{"flash"});
  // A family without rows of its own (a new architecture) takes the device's defaults.
  EXPECT_EQ(ChooseAttentionBackend(Device::kCpu, "some-new-family", 64, 100),
            ChooseAttentionBackend(Device::kCpu, "bert", 64, 100));
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
