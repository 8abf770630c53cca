#include "engine/batch.h"

#include <algorithm>
#include <cstring>

#include "common/strings.h"

namespace quiver::engine {

int64_t RaggedBatch::max_seqlen() const {
  int64_t longest = 0;
  for (size_t i = 1; i < cu_seqlens.size(); ++i) {
    longest = std::max<int64_t>(longest, cu_seqlens[i] - cu_seqlens[i - 1]);
  }
  return longest;
}

void RaggedBatch::Add(const std::vector<int32_t>& ids, const std::vector<int32_t>* types) {
  if (cu_seqlens.empty()) cu_seqlens.push_back(0);
  token_ids.insert(token_ids.end(), ids.begin(), ids.end());
  if (types != nullptr) {
    token_type_ids.resize(token_ids.size() - ids.size(), 0);
    token_type_ids.insert(token_type_ids.end(), types->begin(), types->end());
  } else if (!token_type_ids.empty()) {
    token_type_ids.resize(token_ids.size(), 0);
  }
  cu_seqlens.push_back(static_cast<int32_t>(token_ids.size()));
}

void DropTrailingTokens(RaggedBatch& batch, int32_t id) {
  size_t out = 0;
  const bool types = !batch.token_type_ids.empty();
  for (size_t s = 0; s + 1 < batch.cu_seqlens.size(); ++s) {
    const int32_t begin = batch.cu_seqlens[s];
    int32_t end = batch.cu_seqlens[s + 1];
    while (end - begin > 1 && batch.token_ids[end - 1] == id) --end;
    for (int32_t t = begin; t < end; ++t, ++out) {
      batch.token_ids[out] = batch.token_ids[t];
      if (types) batch.token_type_ids[out] = batch.token_type_ids[t];
    }
    batch.cu_seqlens[s] = static_cast<int32_t>(out) - (end - begin);
    if (!batch.prompt_lengths.empty()) {
      batch.prompt_lengths[s] = std::min(batch.prompt_lengths[s], end - begin - 1);
    }
  }
  batch.cu_seqlens.back() = static_cast<int32_t>(out);
  batch.token_ids.resize(out);
  if (types) batch.token_type_ids.resize(out);
}

absl::Status ValidateBatch(const RaggedBatch& batch, int64_t vocab_size, int64_t type_vocab_size,
                           int64_t max_input_tokens) {
  if (batch.cu_seqlens.size() < 2 || batch.cu_seqlens.front() != 0) {
    return absl::InvalidArgumentError("cu_seqlens must start at 0 and hold num_seqs + 1 entries");
  }
  if (batch.cu_seqlens.back() != batch.num_tokens()) {
    return absl::InvalidArgumentError(StrCat("cu_seqlens ends at ", batch.cu_seqlens.back(),
                                             " but there are ", batch.num_tokens(), " tokens"));
  }
  for (int64_t s = 0; s < batch.num_seqs(); ++s) {
    const int64_t len = batch.cu_seqlens[s + 1] - batch.cu_seqlens[s];
    if (len <= 0) return absl::InvalidArgumentError(StrCat("sequence ", s, " is empty"));
    if (len > max_input_tokens) {
      return absl::InvalidArgumentError(StrCat(
          "sequence ", s, " has ", len, " tokens; the model accepts at most ", max_input_tokens));
    }
  }
  if (!batch.token_type_ids.empty() && batch.token_type_ids.size() != batch.token_ids.size()) {
    return absl::InvalidArgumentError(StrCat("token_type_ids has ", batch.token_type_ids.size(),
                                             " entries for ", batch.num_tokens(), " tokens"));
  }
  for (size_t i = 0; i < batch.token_ids.size(); ++i) {
    if (batch.token_ids[i] < 0 || batch.token_ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(StrCat("token id ", batch.token_ids[i], " at position ", i,
                                               " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  // A model without token types (DistilBERT, Qwen3: type_vocab_size 0) ignores them, as
  // transformers does; a tokenizer's pair template may still number the second segment 1.
  for (size_t i = 0; type_vocab_size > 0 && i < batch.token_type_ids.size(); ++i) {
    if (batch.token_type_ids[i] < 0 || batch.token_type_ids[i] >= type_vocab_size) {
      return absl::InvalidArgumentError(StrCat("token type id ", batch.token_type_ids[i],
                                               " at position ", i, " is outside [0, ",
                                               type_vocab_size, ")"));
    }
  }
  if (batch.span_bounds.size() % 2 != 0) {
    return absl::InvalidArgumentError("span_bounds must hold (begin, end) pairs");
  }
  for (size_t i = 0; i < batch.span_bounds.size(); i += 2) {
    const int32_t b = batch.span_bounds[i], e = batch.span_bounds[i + 1];
    if (b < 0 || e <= b || e > batch.num_tokens()) {
      return absl::InvalidArgumentError(StrCat("span ", i / 2, " [", b, ", ", e,
                                               ") is empty or "
                                               "outside the tokens"));
    }
    const auto seq = std::upper_bound(batch.cu_seqlens.begin(), batch.cu_seqlens.end(), b) - 1;
    if (e > *(seq + 1)) {
      return absl::InvalidArgumentError(StrCat("span ", i / 2, " crosses a sequence boundary"));
    }
  }
  if (!batch.prompt_lengths.empty() &&
      static_cast<int64_t>(batch.prompt_lengths.size()) != batch.num_seqs()) {
    return absl::InvalidArgumentError(StrCat("prompt_lengths has ", batch.prompt_lengths.size(),
                                             " values for ", batch.num_seqs(), " sequences"));
  }
  for (size_t s = 0; s < batch.prompt_lengths.size(); ++s) {
    const int32_t length = batch.cu_seqlens[s + 1] - batch.cu_seqlens[s];
    if (batch.prompt_lengths[s] < 0) {
      return absl::InvalidArgumentError(
          StrCat("sequence ", s, ": prompt length ", batch.prompt_lengths[s], " is negative"));
    }
    if (batch.prompt_lengths[s] >= length) {
      return absl::InvalidArgumentError(StrCat("sequence ", s, ": prompt length ",
                                               batch.prompt_lengths[s], " leaves none of its ",
                                               length, " tokens to pool"));
    }
  }
  if (batch.output.dimensions < 0) {
    return absl::InvalidArgumentError("dimensions must be positive");
  }
  return absl::OkStatus();
}

std::vector<float> EngineOutput::RowF32(int64_t i) const {
  std::vector<float> row(static_cast<size_t>(dimensions));
  std::memcpy(row.data(), data.data() + static_cast<size_t>(i * dimensions) * sizeof(float),
              row.size() * sizeof(float));
  return row;
}

}  // namespace quiver::engine
