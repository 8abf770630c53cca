// Token embeddings: x [num_tokens, hidden] = word[ids] (+ position[positions]) (+ type[types]),
// then, when gamma is given, LayerNorm(gamma, beta): BERT's embedding layer fused in one pass;
// with neither position nor type table, a plain gather (decoder models).
//
//   ids, positions, type_ids  i32 [num_tokens] (positions: empty without a position table;
//                             type_ids: empty for all zeros)
//   word      f32 [vocab_size, hidden]
//   position  f32 [num_positions, hidden] or empty (row p is position p: a model with an offset
//             passes the rows from its offset on)
//   type      f32 [type_vocab_size, hidden] or empty
//   gamma, beta  f32 [hidden] or empty (no norm)
//   x         f32 [num_tokens, hidden], contiguous (CUDA: f32 or bf16)
//   x_act     optional, CUDA only: the same rows again in bf16 beside an f32 x (the residual
//             stream in f32, the first GEMM's input in bf16, from one pass)
//
// Ids must be inside their tables (the engine validates every batch before it runs).
#pragma once

#include "engine/base/exec_context.h"
#include "engine/base/tensor.h"

namespace quiver::engine::ops {

struct EmbeddingTables {
  Tensor word, position, type;
  Tensor gamma, beta;  // LayerNorm after the sum; both empty for none
  float eps = 0.0f;
};

void Embedding(const ExecContext& ctx, const Tensor& ids, const Tensor& positions,
               const Tensor& type_ids, const EmbeddingTables& tables, const Tensor& x,
               const Tensor& x_act = {});

}  // namespace quiver::engine::ops
