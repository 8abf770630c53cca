#include "engine/runtime/device_runtime.h"

#include "engine/ops/pooling.h"

namespace quiver::engine {
namespace {

Tensor HostI32(const std::vector<int32_t>& values) {
  if (values.empty()) return {};
  return Tensor(values.data(), DType::kI32, Device::kCpu, {static_cast<int64_t>(values.size())});
}

enum OwnSlot { kRows };

}  // namespace

Tensor HostBounds(const std::vector<int32_t>& pairs) {
  return Tensor(pairs.data(), DType::kI32, Device::kCpu,
                {static_cast<int64_t>(pairs.size() / 2), 2});
}

Tensor HostRowBounds(const std::vector<int32_t>& rows) {
  return Tensor(rows.data(), DType::kI32, Device::kCpu, {static_cast<int64_t>(rows.size() / 3), 3});
}

ForwardContext HostForwardContext(const ExecContext& exec, const BatchPlan& plan,
                                  const AttentionBackend& attention, Workspace& ws) {
  const RaggedBatch& batch = *plan.batch;
  return ForwardContext{exec,
                        HostI32(batch.token_ids),
                        HostI32(batch.token_type_ids),
                        HostI32(plan.positions),
                        HostBounds(plan.seq_bounds),
                        Tensor(),
                        plan.attention,
                        attention,
                        ws};
}

bool OutputRows(const Model& model, const BatchWork& work, std::vector<int32_t>& rows) {
  rows.clear();
  const BatchPlan& plan = *work.plan;
  if (work.score) {
    const bool first = model.ScoresFirstTokens();
    if (!first && !model.ScoresLastTokens()) return false;
    for (int64_t s = 0; s < plan.num_real_seqs; ++s) {
      rows.push_back(first ? plan.seq_bounds[2 * s] : plan.seq_bounds[2 * s + 1] - 1);
    }
    return true;
  }
  if (work.pools.size() != 1 ||
      (work.pools[0] != PoolMode::kCls && work.pools[0] != PoolMode::kLastToken)) {
    return false;
  }
  // One row per sequence (no spans: those pool by their mean), each row's token inside its own
  // sequence: distinct.
  if (!plan.batch->span_bounds.empty()) return false;
  for (size_t r = 0; r + 2 < plan.row_bounds.size(); r += 3) {
    rows.push_back(work.pools[0] == PoolMode::kCls ? plan.row_bounds[r]
                                                   : plan.row_bounds[r + 1] - 1);
  }
  return true;
}

absl::StatusOr<int> CpuRuntime::Start(const BatchWork& work, std::function<void()> on_complete) {
  const BatchPlan& plan = *work.plan;
  ForwardContext ctx = HostForwardContext(exec_, plan, *work.attention, model_ws_);
  if (output_rows_ && OutputRows(model_, work, picked_)) ctx.output_rows = HostI32(picked_);
  const Tensor hidden = model_.Forward(ctx);
  const int64_t blocks = work.score ? 1 : static_cast<int64_t>(work.pools.size());
  const Tensor rows = own_ws_.F32(kRows, {blocks * work.rows, work.width});
  if (work.score) {
    model_.Score(ctx, hidden, rows);
  } else {
    for (int64_t b = 0; b < blocks; ++b) {
      const Tensor block(rows.f32() + b * work.rows * work.width, DType::kF32, Device::kCpu,
                         {work.rows, work.width});
      ops::Pool(exec_, hidden, HostRowBounds(plan.row_bounds), work.pools[static_cast<size_t>(b)],
                block);
    }
  }
  rows_ = rows.f32();
  if (on_complete) on_complete();
  return 0;
}

absl::StatusOr<const float*> CpuRuntime::Finish(int /*ticket*/) { return rows_; }

}  // namespace quiver::engine
