// Scoring heads on pooled rows.
//
//   ClassifierHead   scores [num_seqs, num_labels] = out_proj(act(dense(pooled))), act tanh: the
//                    sequence-classification head of BERT (pooler + classifier) and RoBERTa /
//                    XLM-R (classifier.dense + out_proj); act relu: DistilBERT's
//                    (pre_classifier + classifier); cross-encoder rerankers. pooled
//                    f32 [num_seqs, hidden] (the CLS rows); dense [hidden, hidden] and out_proj
//                    [num_labels, hidden]; scratch f32 [num_seqs, hidden].
//                    On CUDA pooled and scratch are bf16 (the GEMMs' input type); scores f32.
//   LogitDifference  scores [num_seqs, 1] = pooled · yes - pooled · no: a Qwen3-style reranker's
//                    logit("yes") - logit("no") from two rows of the LM head (f32 [hidden] each),
//                    never the whole vocabulary.
#pragma once

#include "engine/base/exec_context.h"
#include "engine/base/tensor.h"
#include "engine/ops/linear.h"

namespace quiver::engine::ops {

enum class HeadActivation { kTanh, kRelu };
void ClassifierHead(const ExecContext& ctx, const Tensor& pooled, const LinearWeights& dense,
                    const LinearWeights& out_proj, const Tensor& scratch, const Tensor& scores,
                    HeadActivation activation = HeadActivation::kTanh);

void LogitDifference(const ExecContext& ctx, const Tensor& pooled, const Tensor& yes,
                     const Tensor& no, const Tensor& scores);

}  // namespace quiver::engine::ops
