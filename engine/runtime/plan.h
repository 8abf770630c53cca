// Planning a batch for the forward pass, once, before the layer loop: optional padding to its
// CUDA-graph bucket (graph_bucket.h), each token's position, the bounds of the rows to pool
// (sequences, or late-chunking spans) and the attention metadata. Read-only after BuildPlan.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/base/attention_plan.h"
#include "engine/batch.h"
#include "engine/models/model.h"

namespace quiver::engine {

struct BatchPlan {
  void Clear() {
    batch = nullptr;
    attention.cu_seqlens = nullptr;
  }

  RaggedBatch padded;                  // the padded copy, when padding
  const RaggedBatch* batch = nullptr;  // what runs: the input or `padded`
  int64_t num_real_seqs = 0;           // the input's sequences (padding adds empty ones after them)
  std::vector<int32_t> positions;      // [num_tokens], each token's position in its sequence
  std::vector<int32_t> seq_bounds;     // [num_real_seqs, 2] (begin, end)
  // [num_rows, 3] (begin, end, origin): the input's spans, or each sequence from its first token
  // pooled (past its prompt where the model leaves prompts out), origin its first token.
  std::vector<int32_t> row_bounds;
  AttentionPlan attention;
};

// `input` padded up to its bucket: extra tokens form one trailing sequence, extra sequence slots
// are empty; neither can reach a real sequence (attention stays inside each sequence).
RaggedBatch PadToBucket(const RaggedBatch& input);

// Fills `plan` for `input`, reusing the plan's vectors (bucket padding copies the batch). The
// plan points into `input` and into itself: it is valid while `input` is, and Clear() drops
// those pointers once the batch ran.
// `include_prompt` false: rows start past input.prompt_lengths.
void BuildPlan(const RaggedBatch& input, bool pad_to_buckets, const ModelInfo& model,
               BatchPlan& plan, bool include_prompt = true);

}  // namespace quiver::engine
