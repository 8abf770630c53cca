// The ops' CUDA half (private to engine/ops, only in builds with QUIVER_WITH_CUDA): the stream of
// the context and the check that turns a launch error into the ops' failure (check.h).
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "engine/base/exec_context.h"
#include "engine/kernels/cuda/context.h"

namespace quiver::engine::ops::internal {

// ctx.cuda's stream; fails naming `op` when the context has no CUDA state.
cudaStream_t StreamOf(std::string_view op, const ExecContext& ctx);
cuda::DeviceContext& CudaOf(std::string_view op, const ExecContext& ctx);

// Fails naming `op` and the CUDA error when `error` is not cudaSuccess.
void CheckLaunch(std::string_view op, cudaError_t error);
void CheckStatus(std::string_view op, const absl::Status& status);

}  // namespace quiver::engine::ops::internal
