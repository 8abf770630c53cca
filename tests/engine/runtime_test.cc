// The GPU runtime's host-side rules, without a device: the CUDA-graph cache (lazy capture, LRU
// eviction with memory accounting, failed captures), the fidelity gate's decision, the frozen
// workspace, the padded metadata the kernels read, the --device / --cuda-graphs parsing with the
// errors a host without CUDA gives, and the engine's pipeline over an asynchronous runtime (a
// fake device whose batches complete later, on another thread).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/base/allocator.h"
#include "engine/base/workspace.h"
#include "engine/engine.h"
#include "engine/kernels/device.h"
#include "engine/runtime/device_inputs.h"
#include "engine/runtime/fidelity.h"
#include "engine/runtime/graph_cache.h"
#include "engine/runtime/plan.h"

namespace quiver::engine {
namespace {

using Action = GraphCache::Action;

GraphCache::Handle H(int i) {
  return reinterpret_cast<GraphCache::Handle>(static_cast<intptr_t>(i));
}

TEST(GraphCacheTest, FirstUseEagerSecondCapturesThenReplays) {
  std::vector<GraphCache::Handle> destroyed;
  GraphCache cache(GraphMode::kLazy, 8, [&](GraphCache::Handle h) { destroyed.push_back(h); });
  const GraphKey a{{128, 8}, "cuda_varlen"}, b{{256, 16}, "cuda_varlen"};
  EXPECT_EQ(cache.Next(a), Action::kEager);
  EXPECT_EQ(cache.Next(b), Action::kEager);
  ASSERT_EQ(cache.Next(a), Action::kCapture);
  cache.Store(a, H(1), 1000, 2.5);
  EXPECT_EQ(cache.Next(a), Action::kReplay);
  EXPECT_EQ(cache.Find(a), H(1));
  ASSERT_EQ(cache.Next(b), Action::kCapture);
  cache.Store(b, H(2), 3000, 1.5);
  EXPECT_EQ(cache.Next(a), Action::kReplay);
  const GraphStats& s = cache.stats();
  EXPECT_EQ(s.captures, 2);
  EXPECT_EQ(s.replays, 2);
  EXPECT_EQ(s.eager_runs, 2);
  EXPECT_EQ(s.held, 2);
  EXPECT_EQ(s.memory_bytes, 4000);
  EXPECT_DOUBLE_EQ(s.capture_ms, 4.0);
  EXPECT_TRUE(destroyed.empty());
}

TEST(GraphCacheTest, TheAttentionBackendIsPartOfTheKey) {
  GraphCache cache(GraphMode::kLazy, 8, nullptr);
  const GraphKey own{{128, 8}, "cuda_varlen"}, other{{128, 8}, "cuda_reference"};
  EXPECT_EQ(cache.Next(own), Action::kEager);
  EXPECT_EQ(cache.Next(other), Action::kEager);  // a first use too
  EXPECT_EQ(cache.Next(own), Action::kCapture);
}

TEST(GraphCacheTest, EvictsTheLeastRecentlyUsedAndRecapturesItLater) {
  std::vector<GraphCache::Handle> destroyed;
  GraphCache cache(GraphMode::kLazy, 2, [&](GraphCache::Handle h) { destroyed.push_back(h); });
  const GraphKey k1{{64, 8}, "x"}, k2{{128, 8}, "x"}, k3{{192, 8}, "x"};
  int handle = 0;
  for (const GraphKey& k : {k1, k2}) {
    ASSERT_EQ(cache.Next(k), Action::kEager);
    ASSERT_EQ(cache.Next(k), Action::kCapture);
    ++handle;
    cache.Store(k, H(handle), 100 * handle, 1.0);
  }
  // k1 used again: k2 is now the least recently used.
  ASSERT_EQ(cache.Next(k1), Action::kReplay);
  cache.Find(k1);
  ASSERT_EQ(cache.Next(k3), Action::kEager);
  ASSERT_EQ(cache.Next(k3), Action::kCapture);
  cache.Store(k3, H(3), 300, 1.0);
  EXPECT_EQ(destroyed, std::vector<GraphCache::Handle>({H(2)}));
  EXPECT_EQ(cache.stats().held, 2);
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_EQ(cache.stats().memory_bytes, 100 + 300);
  // The evicted key was seen before: its next use captures at once.
  EXPECT_EQ(cache.Next(k2), Action::kCapture);
  cache.Store(k2, H(4), 200, 1.0);
  EXPECT_EQ(destroyed, std::vector<GraphCache::Handle>({H(2), H(1)}));  // k1 was the oldest now
  EXPECT_EQ(cache.Next(k3), Action::kReplay);
  EXPECT_EQ(cache.Find(k3), H(3));
}

TEST(GraphCacheTest, DestroysWhatItHoldsWhenItGoes) {
  std::vector<GraphCache::Handle> destroyed;
  {
    GraphCache cache(GraphMode::kLazy, 4, [&](GraphCache::Handle h) { destroyed.push_back(h); });
    const GraphKey k{{64, 8}, "x"};
    cache.Next(k);
    cache.Next(k);
    cache.Store(k, H(7), 0, 0.0);
  }
  EXPECT_EQ(destroyed, std::vector<GraphCache::Handle>({H(7)}));
}

TEST(GraphCacheTest, OffZeroCapAndUncapturableBatchesRunEagerly) {
  const GraphKey k{{64, 8}, "x"};
  GraphCache off(GraphMode::kOff, 8, nullptr);
  GraphCache none(GraphMode::kLazy, 0, nullptr);
  GraphCache lazy(GraphMode::kLazy, 8, nullptr);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(off.Next(k), Action::kEager);
    EXPECT_EQ(none.Next(k), Action::kEager);
    EXPECT_EQ(lazy.Next(k, /*capturable=*/false), Action::kEager);
  }
  EXPECT_EQ(off.stats().eager_runs, 4);
  EXPECT_EQ(lazy.stats().captures, 0);
  // Uncapturable uses do not count toward the key's first use.
  EXPECT_EQ(lazy.Next(k), Action::kEager);
  EXPECT_EQ(lazy.Next(k), Action::kCapture);
}

TEST(GraphCacheTest, AFailedCaptureLeavesTheKeyEager) {
  GraphCache cache(GraphMode::kLazy, 8, nullptr);
  const GraphKey k{{64, 8}, "x"};
  EXPECT_EQ(cache.Next(k), Action::kEager);
  ASSERT_EQ(cache.Next(k), Action::kCapture);
  cache.CaptureFailed(k);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.Next(k), Action::kEager);
  EXPECT_EQ(cache.stats().failed, 1);
  EXPECT_EQ(cache.stats().eager_runs, 5);
  EXPECT_EQ(cache.stats().held, 0);
  EXPECT_THROW(cache.Find(k), std::logic_error);
}

EngineOutput Rows(const std::vector<std::vector<float>>& rows) {
  EngineOutput out;
  out.num_seqs = static_cast<int64_t>(rows.size());
  out.dimensions = static_cast<int64_t>(rows[0].size());
  for (const auto& r : rows) {
    const size_t at = out.data.size();
    out.data.resize(at + r.size() * sizeof(float));
    std::memcpy(out.data.data() + at, r.data(), r.size() * sizeof(float));
  }
  return out;
}

TEST(FidelityTest, AcceptsBf16SizedDifferencesAndRefusesADivergentRow) {
  const std::vector<std::vector<float>> ref = {{1, 2, 3, 4}, {-1, 0.5f, 2, 0}, {0.1f, 0.2f, 0, 9}};
  std::vector<std::vector<float>> close = ref;
  for (auto& r : close) {
    for (float& v : r) v *= 1.0f + 1.0f / 256;  // bf16's relative step
  }
  close[1][0] += 0.01f;
  const FidelityResult ok = CompareForFidelity(Rows(close), Rows(ref), false);
  EXPECT_TRUE(ok.ok) << ok.message;
  EXPECT_GT(ok.min_cosine, 0.999);
  EXPECT_EQ(ok.rows, 3);

  std::vector<std::vector<float>> bad = ref;
  bad[2] = {0.1f, 0.2f, 3, 9};  // cosine ~0.95 with the reference row
  const FidelityResult refused = CompareForFidelity(Rows(bad), Rows(ref), false);
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.worst_row, 2);
  EXPECT_LT(refused.min_cosine, 0.999);
  EXPECT_NE(refused.message.find("OUTSIDE"), std::string::npos) << refused.message;
  EXPECT_NE(refused.message.find("row 2"), std::string::npos) << refused.message;
}

TEST(FidelityTest, NanZeroRowsAndShapes) {
  const std::vector<std::vector<float>> ref = {{1, 2}, {3, 4}};
  std::vector<std::vector<float>> nan = ref;
  nan[0][1] = std::nanf("");
  const FidelityResult n = CompareForFidelity(Rows(nan), Rows(ref), false);
  EXPECT_FALSE(n.ok);
  EXPECT_EQ(n.worst_row, 0);
  std::vector<std::vector<float>> zero = ref;
  zero[1] = {0, 0};
  EXPECT_FALSE(CompareForFidelity(Rows(zero), Rows(ref), false).ok);
  EXPECT_TRUE(CompareForFidelity(Rows({{0, 0}}), Rows({{0, 0}}), false).ok);
  const FidelityResult shape = CompareForFidelity(Rows({{1, 2, 3}}), Rows(ref), false);
  EXPECT_FALSE(shape.ok);
  EXPECT_NE(shape.message.find("shape"), std::string::npos);
}

TEST(FidelityTest, ScoresCompareAsOneVector) {
  // One score per row: per-row cosines would be +-1; the vector over rows is what says something.
  const FidelityResult close =
      CompareForFidelity(Rows({{2.01f}, {-1.0f}, {0.5f}}), Rows({{2.0f}, {-1.0f}, {0.5f}}), true);
  EXPECT_TRUE(close.ok) << close.message;
  EXPECT_NEAR(close.max_abs_diff, 0.01, 1e-6);
  const FidelityResult flipped =
      CompareForFidelity(Rows({{2.0f}, {1.0f}, {0.5f}}), Rows({{2.0f}, {-1.0f}, {0.5f}}), true);
  EXPECT_FALSE(flipped.ok);
  EXPECT_EQ(flipped.worst_row, -1);
}

TEST(WorkspaceTest, AFrozenWorkspaceNeverGrows) {
  Workspace ws(CpuAllocator());
  const Tensor big = ws.F32(0, {16, 8});
  ws.F32(1, {4});
  const size_t held = ws.bytes();
  EXPECT_EQ(held, (16 * 8 + 4) * sizeof(float));
  ws.Freeze();
  // Smaller or equal requests reuse the same memory: the addresses graphs captured stay valid.
  EXPECT_EQ(ws.Get(0, DType::kBF16, {16, 16}).data<void>(), big.data<void>());
  EXPECT_EQ(ws.F32(0, {2, 8}).data<void>(), big.data<void>());
  EXPECT_THROW(ws.F32(0, {17, 8}), std::logic_error);
  EXPECT_THROW(ws.F32(2, {1}), std::logic_error);  // a new slot is growth too
  EXPECT_EQ(ws.bytes(), held);
}

ModelInfo Info() {
  ModelInfo m;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.causal = true;
  return m;
}

TEST(PaddedMetadataTest, TheArraysACapturedGraphReadsForABucketedBatch) {
  RaggedBatch b;
  b.Add({5, 6, 7});
  b.Add({8, 9});
  BatchPlan plan;
  BuildPlan(b, /*pad_to_buckets=*/true, Info(), plan);
  // Bucket: 64 tokens (5 + one padding sequence of 59), 8 sequences (2 + padding + 5 empty).
  const RaggedBatch& p = *plan.batch;
  ASSERT_EQ(p.num_tokens(), 64);
  ASSERT_EQ(p.num_seqs(), 8);
  EXPECT_EQ(std::vector<int32_t>(p.cu_seqlens.begin(), p.cu_seqlens.end()),
            std::vector<int32_t>({0, 3, 5, 64, 64, 64, 64, 64, 64}));
  EXPECT_EQ(plan.num_real_seqs, 2);
  EXPECT_EQ(plan.seq_bounds, std::vector<int32_t>({0, 3, 3, 5}));
  // Padding never reaches an answer row: (begin, end, origin) of the real sequences only.
  EXPECT_EQ(plan.row_bounds, std::vector<int32_t>({0, 3, 0, 3, 5, 3}));
  EXPECT_EQ(plan.positions[5], 0);  // the padding sequence starts over
  EXPECT_EQ(plan.positions[63], 58);

  const DeviceInputLayout l = DeviceInputLayoutFor(128, 16, 16);
  std::vector<int32_t> block(static_cast<size_t>(l.total), -1);
  const PackedInputs packed = PackDeviceInputs(plan, l, block.data());
  EXPECT_EQ(packed.num_tokens, 64);
  EXPECT_EQ(packed.num_seqs, 8);
  EXPECT_EQ(packed.num_rows, 2);
  EXPECT_EQ(block[l.ids + 4], 9);
  EXPECT_EQ(block[l.ids + 5], 0);          // padding tokens are id 0
  EXPECT_EQ(block[l.cu_seqlens + 8], 64);  // the padding's empty sequences end where it ends
  EXPECT_EQ(std::vector<int32_t>(block.begin() + l.seq_bounds, block.begin() + l.seq_bounds + 4),
            std::vector<int32_t>({0, 3, 3, 5}));
  EXPECT_EQ(l.seq_bounds % 4, 0);  // 16-byte aligned
  // Attention's tiles, heaviest first (causal: keys read): the padding sequence's 59, then 3, 2.
  EXPECT_EQ(packed.num_tiles, 1 + 8);
  EXPECT_EQ(l.tiles % 4, 0);
  EXPECT_EQ(std::vector<int32_t>(block.begin() + l.tiles, block.begin() + l.tiles + 8),
            std::vector<int32_t>({2, 0, 0, 0, 1, 0, -1, -1}));
  EXPECT_EQ(block[l.tiles + 2 * packed.num_tiles - 1], -1);
}

TEST(PaddedMetadataTest, TheTileListCoversEveryQueryRowOnceWithinItsBound) {
  RaggedBatch b;
  for (int len : {130, 1, 64, 65, 200, 7}) b.Add(std::vector<int32_t>(static_cast<size_t>(len), 1));
  for (const bool causal : {true, false}) {
    ModelInfo info = Info();
    info.causal = causal;
    BatchPlan plan;
    BuildPlan(b, /*pad_to_buckets=*/true, info, plan);
    const DeviceInputLayout l = DeviceInputLayoutFor(1024, 64, 64);
    std::vector<int32_t> block(static_cast<size_t>(l.total));
    const PackedInputs packed = PackDeviceInputs(plan, l, block.data());
    const RaggedBatch& p = *plan.batch;
    std::vector<int> covered(static_cast<size_t>(p.num_tokens()), 0);
    int64_t last_keys = INT64_MAX, used = 0;
    for (int64_t i = 0; i < packed.num_tiles; ++i) {
      const int32_t seq = block[l.tiles + 2 * i], tile = block[l.tiles + 2 * i + 1];
      if (seq < 0) continue;
      ++used;
      const int32_t begin = p.cu_seqlens[seq], end = p.cu_seqlens[seq + 1];
      const int64_t first = begin + int64_t{tile} * kAttentionTileRows;
      ASSERT_LT(first, end);
      for (int64_t t = first; t < std::min<int64_t>(end, first + kAttentionTileRows); ++t) {
        ++covered[static_cast<size_t>(t)];
      }
      const int64_t keys =
          causal ? std::min<int64_t>(end - begin, first - begin + 64) : end - begin;
      EXPECT_LE(keys, last_keys);  // heaviest first
      last_keys = keys;
    }
    EXPECT_EQ(covered, std::vector<int>(covered.size(), 1));
    EXPECT_LE(used, packed.num_tiles);
    EXPECT_EQ(packed.num_tiles, MaxAttentionTiles(p.num_tokens(), p.num_seqs()));
  }
}

TEST(DeviceSettingsTest, ParsesDevicesAndGraphModes) {
  EXPECT_EQ(ParseDeviceSpec("cpu")->device, Device::kCpu);
  EXPECT_EQ(ParseDeviceSpec("cuda")->device, Device::kCuda);
  EXPECT_EQ(ParseDeviceSpec("cuda")->index, 0);
  EXPECT_EQ(ParseDeviceSpec("cuda:3")->index, 3);
  EXPECT_EQ(ParseDeviceSpec("cuda:3")->ToString(), "cuda:3");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CUDA", "cuda:99999", ""}) {
    const absl::StatusOr<DeviceSpec> d = ParseDeviceSpec(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("cpu, cuda, cuda:N"), std::string::npos);
  }
  EXPECT_EQ(*ParseGraphMode("off"), GraphMode::kOff);
  EXPECT_EQ(*ParseGraphMode("lazy"), GraphMode::kLazy);
  EXPECT_FALSE(ParseGraphMode("eager").ok());

  EngineOptions o;
  DeviceSettings s;
  s.device = "cuda:1";
  s.cuda_graphs = "off";
  s.max_graphs = 7;
  s.graph_max_tokens = 2048;
  ASSERT_TRUE(ApplyDeviceSettings(s, 4096, 64, o).ok());
  EXPECT_EQ(o.device.index, 1);
  EXPECT_EQ(o.cuda_graphs, GraphMode::kOff);
  EXPECT_EQ(o.max_graphs, 7);
  EXPECT_EQ(o.graph_max_tokens, 2048);
  EXPECT_EQ(o.max_batch_tokens, 4096);
  EXPECT_EQ(o.max_batch_seqs, 64);
  s.device = "tpu";
  const absl::Status bad = ApplyDeviceSettings(s, 4096, 64, o);
  EXPECT_NE(bad.message().find("--device"), std::string::npos) << bad;
  s.device = "cpu";
  s.max_graphs = -1;
  EXPECT_NE(ApplyDeviceSettings(s, 4096, 64, o).message().find("--max-graphs"), std::string::npos);
  s.max_graphs = 7;
  EXPECT_EQ(o.spin_wait, std::chrono::microseconds(2000));  // the default
  s.spin_wait_us = 0;
  ASSERT_TRUE(ApplyDeviceSettings(s, 4096, 64, o).ok());
  EXPECT_EQ(o.spin_wait.count(), 0);
  for (const int64_t bad : {int64_t{-1}, int64_t{1000001}}) {
    s.spin_wait_us = bad;
    const absl::Status refused = ApplyDeviceSettings(s, 4096, 64, o);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.message().find("--spin-wait-us"), std::string::npos) << refused;
  }
}

// Without a usable GPU (CI's machines), asking for CUDA fails at load naming why.
TEST(DeviceSettingsTest, CudaWhereThereIsNoneFailsNamingTheReason) {
  const DeviceReport report = QueryDevices();
  if (report.cuda_compiled && !report.cuda_devices.empty()) GTEST_SKIP() << "a GPU is present";
  EngineOptions o;
  o.device = *ParseDeviceSpec("cuda");
  const absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Load("/nonexistent-model", o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kUnavailable) << e.status();
  const std::string m(e.status().message());
  EXPECT_NE(m.find("CUDA was asked for"), std::string::npos) << m;
  if (!report.cuda_compiled) {
    EXPECT_NE(m.find("not compiled with CUDA"), std::string::npos) << m;
  }
}

TEST(DeviceSettingsTest, ABadPrefetchSettingRefusesTheLoadNamingTheVariable) {
  setenv("QUIVER_PREFETCH_MIN_ROWS", "0", 1);
  const absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Load("/nonexistent-model", {});
  unsetenv("QUIVER_PREFETCH_MIN_ROWS");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
  EXPECT_NE(e.status().message().find("QUIVER_PREFETCH_MIN_ROWS=0"), std::string::npos)
      << e.status();
}

// A device with two slots whose batches complete a few milliseconds after Start, in order, on
// its own thread (as a GPU stream's host callbacks do). The work itself runs on the CPU at Start
// into the slot's own rows (what the copy into a slot's pinned buffer stands for). It records
// what the engine did: a slot started again before it was finished, the most batches in flight,
// and whether a batch was started while another was still in flight (the pipeline).
class FakeAsyncRuntime final : public DeviceRuntime {
 public:
  FakeAsyncRuntime(const Model& model, const ExecContext& exec, Workspace& model_ws,
                   Workspace& own_ws)
      : cpu_(model, exec, model_ws, own_ws), completer_([this] { Complete(); }) {}
  ~FakeAsyncRuntime() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    completer_.join();
  }
  const ExecContext& exec() const override { return cpu_.exec(); }
  int slots() const override { return 2; }

  // The batch started `fault_at`-th (0-based) fails as a faulted device's would: its signal
  // never comes, Settled says so, and Finish returns the error.
  explicit FakeAsyncRuntime(const Model& model, const ExecContext& exec, Workspace& model_ws,
                            Workspace& own_ws, int fault_at)
      : FakeAsyncRuntime(model, exec, model_ws, own_ws) {
    fault_at_ = fault_at;
  }

  absl::StatusOr<int> Start(const BatchWork& work, std::function<void()> on_complete) override {
    const int s = next_;
    next_ = (next_ + 1) % 2;
    absl::StatusOr<int> t = cpu_.Start(work, nullptr);
    if (!t.ok()) return t.status();
    absl::StatusOr<const float*> rows = cpu_.Finish(*t);
    if (!rows.ok()) return rows.status();
    std::lock_guard<std::mutex> lock(mu_);
    Slot& slot = slots_[s];
    if (slot.in_use) reused_early = true;
    if (in_flight_ > 0) overlapped = true;
    ++in_flight_;
    max_in_flight = std::max(max_in_flight, in_flight_);
    slot.in_use = true;
    slot.done = false;
    slot.rows.assign(*rows, *rows + work.rows * work.width);
    slot.on_complete = std::move(on_complete);
    slot.faulted = started_++ == fault_at_;
    pending_.push_back(s);
    cv_.notify_all();
    return s;
  }

  absl::StatusOr<const float*> Finish(int ticket) override {
    std::unique_lock<std::mutex> lock(mu_);
    Slot& slot = slots_[ticket];
    cv_.wait(lock, [&] { return slot.done; });
    slot.in_use = false;
    --in_flight_;
    if (slot.faulted) return absl::InternalError("device fault (fake)");
    return slot.rows.data();
  }
  bool Settled(int ticket) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return slots_[ticket].done;
  }
  RuntimeStats stats() const override { return {}; }

  // Read after the engine is gone.
  bool reused_early = false, overlapped = false;
  int max_in_flight = 0;

 private:
  struct Slot {
    bool in_use = false, done = false, faulted = false;
    std::vector<float> rows;
    std::function<void()> on_complete;
  };
  void Complete() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;
      const int s = pending_.front();
      pending_.pop_front();
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      lock.lock();
      slots_[s].done = true;
      std::function<void()> signal = slots_[s].on_complete;
      if (slots_[s].faulted) signal = nullptr;  // a faulted context calls no host function
      lock.unlock();
      cv_.notify_all();
      if (signal) signal();
      lock.lock();
    }
  }

  CpuRuntime cpu_;
  int fault_at_ = -1, started_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Slot slots_[2];
  std::deque<int> pending_;
  int next_ = 0, in_flight_ = 0;
  bool stopping_ = false;
  std::thread completer_;
};

TEST(EnginePipelineTest, AnAsynchronousRuntimeKeepsOrderAndTwoBatchesInFlight) {
  const std::string dir =
      (std::filesystem::path(QUIVER_SOURCE_DIR) / "tests/fixtures/tiny/bert_mean").string();
  FakeAsyncRuntime* fake = nullptr;
  EngineOptions options;
  options.num_threads = 1;
  options.make_runtime = [&fake](const Model& model, const ExecContext& exec, Workspace& mws,
                                 Workspace& ows) -> std::unique_ptr<DeviceRuntime> {
    auto made = std::make_unique<FakeAsyncRuntime>(model, exec, mws, ows);
    fake = made.get();
    return made;
  };
  absl::StatusOr<std::unique_ptr<Engine>> piped = Engine::Load(dir, options);
  ASSERT_TRUE(piped.ok()) << piped.status();
  EngineOptions plain_options;
  plain_options.num_threads = 1;
  absl::StatusOr<std::unique_ptr<Engine>> plain = Engine::Load(dir, plain_options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const int32_t vocab = static_cast<int32_t>((*plain)->info().vocab_size);

  std::mt19937 rng(7);
  std::vector<RaggedBatch> batches;
  for (int b = 0; b < 14; ++b) {
    RaggedBatch batch;
    const int seqs = 1 + b % 4;
    for (int s = 0; s < seqs; ++s) {
      std::vector<int32_t> ids(static_cast<size_t>(3 + rng() % 20));
      for (int32_t& id : ids) id = static_cast<int32_t>(1 + rng() % (vocab - 1));
      batch.Add(ids);
    }
    if (b == 3 || b == 8) batch.token_ids[0] = vocab;  // refused by Validate, answered in turn
    batches.push_back(batch);
  }
  std::mutex mu;
  std::vector<int> ready_order;
  std::vector<LazyResult> results;
  for (int b = 0; b < static_cast<int>(batches.size()); ++b) {
    results.push_back((*piped)->Submit(batches[b], [&mu, &ready_order, b] {
      std::lock_guard<std::mutex> lock(mu);
      ready_order.push_back(b);
    }));
  }
  for (int b = 0; b < static_cast<int>(batches.size()); ++b) {
    const absl::StatusOr<EngineOutput>& got = results[b].Wait();
    const absl::StatusOr<EngineOutput> want = (*plain)->Run(batches[b]);
    ASSERT_EQ(got.ok(), want.ok()) << b << ": " << got.status() << " / " << want.status();
    if (!want.ok()) {
      EXPECT_EQ(got.status(), want.status());
      continue;
    }
    EXPECT_EQ(got->data, want->data) << "batch " << b;  // bit for bit
  }
  // Every batch was finished before its answer was delivered: the fake's records are final.
  ASSERT_NE(fake, nullptr);
  EXPECT_FALSE(fake->reused_early);   // a slot was started again only after it was finished
  EXPECT_EQ(fake->max_in_flight, 2);  // never more than the slots
  EXPECT_TRUE(fake->overlapped);      // batch N+1 was started while batch N ran
  piped->reset();
  std::vector<int> in_order(batches.size());
  for (int b = 0; b < static_cast<int>(in_order.size()); ++b) in_order[b] = b;
  EXPECT_EQ(ready_order, in_order);
}

TEST(EnginePipelineTest, ADeviceFaultFailsItsBatchInsteadOfHangingIt) {
  const std::string dir =
      (std::filesystem::path(QUIVER_SOURCE_DIR) / "tests/fixtures/tiny/bert_mean").string();
  EngineOptions options;
  options.num_threads = 1;
  options.make_runtime = [](const Model& model, const ExecContext& exec, Workspace& mws,
                            Workspace& ows) -> std::unique_ptr<DeviceRuntime> {
    return std::make_unique<FakeAsyncRuntime>(model, exec, mws, ows, /*fault_at=*/1);
  };
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Load(dir, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<LazyResult> results;
  for (int b = 0; b < 4; ++b) {
    RaggedBatch batch;
    batch.Add({5, 6, 7 + b});
    results.push_back((*engine)->Submit(batch));
  }
  EXPECT_TRUE(results[0].Wait().ok());
  const absl::StatusOr<EngineOutput>& faulted = results[1].Wait();  // found by polling
  ASSERT_FALSE(faulted.ok());
  EXPECT_NE(faulted.status().message().find("device fault"), std::string::npos) << faulted.status();
  EXPECT_TRUE(results[2].Wait().ok());
  EXPECT_TRUE(results[3].Wait().ok());
}

// The compute thread polls for the next batch after one that left the queue empty
// (EngineOptions::spin_wait): a batch that arrives while it polls is taken at once, not after the
// polling ends, and answered as an engine that sleeps at once answers it; an engine that is
// destroyed while polling stops at once. The spell here is a minute, so a compute thread that
// missed the arrival or the stop would hold these tests a minute; each bound below is a third of
// it (liveness, not speed).
TEST(EngineSpinTest, ABatchArrivingWhileThePollingRunsIsTakenAtOnceAndAnsweredTheSame) {
  const std::string dir =
      (std::filesystem::path(QUIVER_SOURCE_DIR) / "tests/fixtures/tiny/bert_mean").string();
  EngineOptions spinning;
  spinning.num_threads = 1;
  spinning.spin_wait = std::chrono::seconds(60);
  absl::StatusOr<std::unique_ptr<Engine>> polls = Engine::Load(dir, spinning);
  ASSERT_TRUE(polls.ok()) << polls.status();
  EngineOptions sleeping = spinning;
  sleeping.spin_wait = std::chrono::microseconds(0);
  absl::StatusOr<std::unique_ptr<Engine>> sleeps = Engine::Load(dir, sleeping);
  ASSERT_TRUE(sleeps.ok()) << sleeps.status();
  const auto start = std::chrono::steady_clock::now();
  for (int b = 0; b < 6; ++b) {
    RaggedBatch batch;
    batch.Add({5, 6, 7 + b, 9});
    if (b % 2 == 1) batch.Add({8, 3 + b});
    // Each after the last was answered: the compute thread is polling when it arrives (after a
    // pause on odd turns, at once on even ones).
    if (b % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const absl::StatusOr<EngineOutput> got = (*polls)->Run(batch);
    const absl::StatusOr<EngineOutput> want = (*sleeps)->Run(batch);
    ASSERT_TRUE(got.ok() && want.ok()) << got.status() << " / " << want.status();
    EXPECT_EQ(got->data, want->data) << "batch " << b;  // bit for bit
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  polls->reset();  // while its compute thread polls
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace quiver::engine
