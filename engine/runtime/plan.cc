#include "engine/runtime/plan.h"

#include <cmath>

#include "engine/graph_bucket.h"

namespace quiver::engine {

RaggedBatch PadToBucket(const RaggedBatch& input) {
  const GraphBucket bucket = BucketFor(input.num_tokens(), input.num_seqs());
  RaggedBatch padded = input;
  const int64_t extra = bucket.tokens - input.num_tokens();
  if (extra > 0) {
    padded.token_ids.resize(static_cast<size_t>(bucket.tokens), 0);
    if (!padded.token_type_ids.empty()) padded.token_type_ids.resize(padded.token_ids.size(), 0);
    padded.cu_seqlens.push_back(static_cast<int32_t>(bucket.tokens));
  }
  while (padded.num_seqs() < bucket.seqs) padded.cu_seqlens.push_back(padded.cu_seqlens.back());
  return padded;
}

void BuildPlan(const RaggedBatch& input, bool pad_to_buckets, const ModelInfo& model,
               BatchPlan& plan, bool include_prompt) {
  plan.batch = &input;
  if (pad_to_buckets) {
    plan.padded = PadToBucket(input);
    plan.batch = &plan.padded;
  }
  const RaggedBatch& batch = *plan.batch;
  plan.num_real_seqs = input.num_seqs();
  plan.positions.resize(static_cast<size_t>(batch.num_tokens()));
  for (int64_t s = 0; s < batch.num_seqs(); ++s) {
    for (int32_t t = batch.cu_seqlens[s]; t < batch.cu_seqlens[s + 1]; ++t) {
      plan.positions[t] = t - batch.cu_seqlens[s];
    }
  }
  plan.seq_bounds.clear();
  for (int64_t s = 0; s < plan.num_real_seqs; ++s) {
    plan.seq_bounds.push_back(input.cu_seqlens[s]);
    plan.seq_bounds.push_back(input.cu_seqlens[s + 1]);
  }
  plan.row_bounds.clear();
  if (!input.span_bounds.empty()) {
    for (size_t i = 0; i < input.span_bounds.size(); i += 2) {
      plan.row_bounds.insert(plan.row_bounds.end(), {input.span_bounds[i], input.span_bounds[i + 1],
                                                     input.span_bounds[i]});
    }
  } else {
    const bool skip = !include_prompt && !input.prompt_lengths.empty();
    for (int64_t s = 0; s < plan.num_real_seqs; ++s) {
      const int32_t begin = input.cu_seqlens[s];
      plan.row_bounds.insert(plan.row_bounds.end(), {begin + (skip ? input.prompt_lengths[s] : 0),
                                                     input.cu_seqlens[s + 1], begin});
    }
  }
  AttentionPlan& a = plan.attention;
  a.cu_seqlens = batch.cu_seqlens.data();
  a.num_seqs = batch.num_seqs();
  a.max_seqlen = batch.max_seqlen();
  a.num_heads = model.num_heads;
  a.num_kv_heads = model.num_kv_heads;
  a.head_dim = model.head_dim;
  a.causal = model.causal;
  a.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
}

}  // namespace quiver::engine
