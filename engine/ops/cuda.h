// The ops' CUDA half (private to engine/ops, only in builds with QUIVER_WITH_CUDA): the stream of
// the context and the check that turns a launch error into the ops' failure (check.h).
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "engine/base/exec_context.h"
#include "engine/kernels/cuda/context.h"
#include "engine/kernels/cuda/kernels.h"

namespace quiver::engine::ops::internal {

// ctx.cuda's stream; fails naming `op` when the context has no CUDA state.
cudaStream_t StreamOf(std::string_view op, const ExecContext& ctx);
cuda::DeviceContext& CudaOf(std::string_view op, const ExecContext& ctx);

// Fails naming `op` and the CUDA error when `error` is not cudaSuccess.
void CheckLaunch(std::string_view op, cudaError_t error);
void CheckStatus(std::string_view op, const absl::Status& status);

// The add-and-norm kernel's arguments over a residual stream f32 [rows, n]: residual += add (act
// [rows, n]; null: nothing added), then each row's norm with gamma (and beta, f32 [n]; null for
// RmsNorm). Where the normed rows go is the caller's to set: `normed` (act, row stride n, set
// here) and/or store_normed_in_residual.
cuda::AddNormArgs AddNormOver(float* residual, const void* add, cuda::NormKind norm,
                              const float* gamma, const float* beta, float eps, int64_t rows,
                              int64_t n, DType act);
// cuda::AddNorm(args) on ctx's stream, a failure naming `op`.
void LaunchAddNorm(std::string_view op, const ExecContext& ctx, const cuda::AddNormArgs& args);

}  // namespace quiver::engine::ops::internal
