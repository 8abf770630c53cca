// A ragged batch: sequences laid end to end without padding, delimited by prefix sums.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/base/op_types.h"

namespace quiver::engine {

// kF32, kF16, kInt8, kBinary: what FormatOutput writes (base/op_types.h).
using OutputType = Encoding;
enum class Pooling { kModelDefault, kCls, kMean, kLastToken };

// What to do with each sequence's pooled vector.
struct OutputOptions {
  Pooling pooling = Pooling::kModelDefault;
  // nullopt: the model's own setting (sentence-transformers Normalize module).
  std::optional<bool> normalize;
  int64_t dimensions = 0;  // Matryoshka truncation; 0 = full width
  OutputType output_type = OutputType::kF32;
  // Rows as the encoder's last hidden state, before the model's Dense modules (TEI's
  // /embed_all: one span per token).
  bool raw_hidden = false;
};

struct RaggedBatch {
  std::vector<int32_t> token_ids;       // [num_tokens]
  std::vector<int32_t> cu_seqlens;      // [num_seqs + 1], cu_seqlens[0] = 0
  std::vector<int32_t> token_type_ids;  // [num_tokens] or empty (all 0)
  // Late chunking: [2 * num_spans] (begin, end) token offsets, each inside one sequence. When
  // non-empty the output has one mean-pooled row per span (pooling is ignored).
  std::vector<int32_t> span_bounds;
  // [num_seqs] or empty (all 0): the tokens at the start of each sequence that came from a prompt
  // (sentence-transformers' prompt_length), left out of the pooled range where the model's
  // Pooling has include_prompt false; each below its sequence's length. Ignored with spans.
  std::vector<int32_t> prompt_lengths;
  OutputOptions output;

  int64_t num_rows() const {
    return span_bounds.empty() ? num_seqs() : static_cast<int64_t>(span_bounds.size() / 2);
  }

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(cu_seqlens.size()) - 1; }
  int64_t max_seqlen() const;
  // Appends one sequence.
  void Add(const std::vector<int32_t>& ids, const std::vector<int32_t>* types = nullptr);
};

// Leaves out each sequence's trailing tokens equal to `id`, all but its first token where every
// one is (ModelInfo::score_before_trailing_id); the type ids and prompt lengths follow. For
// batches without spans, after ValidateBatch.
void DropTrailingTokens(RaggedBatch& batch, int32_t id);

// INVALID_ARGUMENT naming the problem: cu_seqlens not starting at 0 / not increasing / not
// ending at num_tokens, type ids of the wrong length, ids outside [0, vocab_size), a sequence
// longer than max_input_tokens (naming the sequence and the limit), an empty sequence.
absl::Status ValidateBatch(const RaggedBatch& batch, int64_t vocab_size, int64_t type_vocab_size,
                           int64_t max_input_tokens);

// The engine's answer for a batch: one row per sequence, packed little-endian (the wire format
// of proto/quiver/v1/inference.proto). For kBinary a row is ceil(dimensions / 8) bytes, sign
// bits most significant first. Scores (cross-encoders, rerankers) are kF32 rows of width
// num_labels (1 for rerankers).
struct EngineOutput {
  int64_t num_seqs = 0;
  int64_t dimensions = 0;
  OutputType output_type = OutputType::kF32;
  std::vector<uint8_t> data;

  // Row i as floats (kF32 only), for tests and tools.
  std::vector<float> RowF32(int64_t i) const;
};

}  // namespace quiver::engine
