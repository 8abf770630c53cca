#include "engine/ops/embedding.h"

#include "common/strings.h"
#include "engine/kernels/cpu/kernels.h"
#include "engine/ops/check.h"
#ifdef QUIVER_WITH_CUDA
#include "engine/kernels/cuda/kernels.h"
#include "engine/ops/cuda.h"
#endif

namespace quiver::engine::ops {

void Embedding(const ExecContext& ctx, const Tensor& ids, const Tensor& positions,
               const Tensor& type_ids, const EmbeddingTables& t, const Tensor& x,
               const Tensor& x_act) {
  using internal::Check;
  using internal::CheckContiguous;
  using internal::CheckOptional;
  // Tables and x: f32, or on CUDA bf16 too (tables and x independently).
  const DType table = internal::ActDType("Embedding", "word", ctx, t.word);
  CheckContiguous("Embedding", "word", ctx, t.word, table, {-1, -1});
  const int64_t hidden = t.word.dim(1);
  CheckContiguous("Embedding", "ids", ctx, ids, DType::kI32, {-1});
  const int64_t num_tokens = ids.dim(0);
  const DType act = internal::ActDType("Embedding", "x", ctx, x);
  CheckContiguous("Embedding", "x", ctx, x, act, {num_tokens, hidden});
  if (!x_act.empty()) {
    if (ctx.device == Device::kCpu || act != DType::kF32) {
      internal::Fail("Embedding", StrCat("x_act is given beside x ", x.Describe(),
                                         ": only CUDA writes a second copy, beside an f32 x"));
    }
    CheckContiguous("Embedding", "x_act", ctx, x_act, DType::kBF16, {num_tokens, hidden});
  }
  if (!t.position.empty()) {
    CheckContiguous("Embedding", "position", ctx, t.position, table, {-1, hidden});
    CheckContiguous("Embedding", "positions", ctx, positions, DType::kI32, {num_tokens});
  }
  if (!t.type.empty()) {
    CheckContiguous("Embedding", "type", ctx, t.type, table, {-1, hidden});
    CheckOptional("Embedding", "type_ids", ctx, type_ids, DType::kI32, {num_tokens});
  }
  if (t.gamma.empty() != t.beta.empty()) internal::Fail("Embedding", "gamma and beta go together");
  if (!t.gamma.empty()) {
    Check("Embedding", "gamma", ctx, t.gamma, DType::kF32, {hidden});
    Check("Embedding", "beta", ctx, t.beta, DType::kF32, {hidden});
  }
  auto ptr = [](const Tensor& tensor) -> const float* {
    return tensor.empty() ? nullptr : tensor.f32();
  };
  switch (ctx.device) {
    case Device::kCpu:
      cpu::Embedding(*ctx.pool, ids.i32(), t.position.empty() ? nullptr : positions.i32(),
                     type_ids.empty() ? nullptr : type_ids.i32(), t.word.f32(), ptr(t.position),
                     ptr(t.type), ptr(t.gamma), ptr(t.beta), x.f32(), num_tokens, hidden, t.eps);
      return;
    case Device::kCuda: {
#ifdef QUIVER_WITH_CUDA
      cuda::EmbeddingArgs a;
      a.ids = ids.i32();
      a.positions = t.position.empty() ? nullptr : positions.i32();
      a.type_ids = type_ids.empty() ? nullptr : type_ids.i32();
      a.word = t.word.data<void>();
      a.position = t.position.empty() ? nullptr : t.position.data<void>();
      a.type = t.type.empty() ? nullptr : t.type.data<void>();
      a.table_dtype = table;
      a.norm = t.gamma.empty() ? cuda::NormKind::kNone : cuda::NormKind::kLayerNorm;
      a.gamma = ptr(t.gamma);
      a.beta = ptr(t.beta);
      a.eps = t.eps;
      a.num_tokens = num_tokens;
      a.hidden = hidden;
      if (x_act.empty()) {
        a.normed = x.data<void>();
        a.act = act;
      } else {
        a.normed_f32 = x.f32();
        a.normed = x_act.data<void>();
        a.act = DType::kBF16;
      }
      internal::CheckLaunch("Embedding", cuda::Embedding(a, internal::StreamOf("Embedding", ctx)));
      return;
#endif
      internal::NoKernel("Embedding", ctx);
    }
  }
}

}  // namespace quiver::engine::ops
