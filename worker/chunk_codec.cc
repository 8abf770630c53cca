#include "worker/chunk_codec.h"

#include <cstdint>

#include "common/status.h"
#include "common/strings.h"

namespace quiver::worker {

absl::StatusOr<engine::Pooling> DecodePooling(quiver::v1::Pooling pooling) {
  switch (pooling) {
    case quiver::v1::POOLING_MODEL_DEFAULT:
      return engine::Pooling::kModelDefault;
    case quiver::v1::POOLING_CLS:
      return engine::Pooling::kCls;
    case quiver::v1::POOLING_MEAN:
      return engine::Pooling::kMean;
    case quiver::v1::POOLING_LAST_TOKEN:
      return engine::Pooling::kLastToken;
    default:
      return absl::InvalidArgumentError(
          StrCat("chunk.output.pooling: unknown value ", static_cast<int>(pooling)));
  }
}

absl::StatusOr<engine::OutputType> DecodeOutputType(quiver::v1::OutputType type) {
  switch (type) {
    case quiver::v1::OUTPUT_F32:
      return engine::OutputType::kF32;
    case quiver::v1::OUTPUT_F16:
      return engine::OutputType::kF16;
    case quiver::v1::OUTPUT_INT8:
      return engine::OutputType::kInt8;
    case quiver::v1::OUTPUT_BINARY:
      return engine::OutputType::kBinary;
    default:
      return absl::InvalidArgumentError(
          StrCat("chunk.output.output_type: unknown value ", static_cast<int>(type)));
  }
}

quiver::v1::OutputType EncodeOutputType(engine::OutputType type) {
  switch (type) {
    case engine::OutputType::kF32:
      return quiver::v1::OUTPUT_F32;
    case engine::OutputType::kF16:
      return quiver::v1::OUTPUT_F16;
    case engine::OutputType::kInt8:
      return quiver::v1::OUTPUT_INT8;
    case engine::OutputType::kBinary:
      return quiver::v1::OUTPUT_BINARY;
  }
  return quiver::v1::OUTPUT_F32;
}

quiver::v1::Pooling EncodePoolingMode(engine::PoolingMode mode) {
  switch (mode) {
    case engine::PoolingMode::kCls:
      return quiver::v1::POOLING_CLS;
    case engine::PoolingMode::kMean:
      return quiver::v1::POOLING_MEAN;
    case engine::PoolingMode::kLastToken:
      return quiver::v1::POOLING_LAST_TOKEN;
    case engine::PoolingMode::kMax:
      return quiver::v1::POOLING_MAX;
    case engine::PoolingMode::kMeanSqrtLen:
      return quiver::v1::POOLING_MEAN_SQRT_LEN;
    case engine::PoolingMode::kWeightedMean:
      return quiver::v1::POOLING_WEIGHTED_MEAN;
  }
  return quiver::v1::POOLING_MODEL_DEFAULT;
}

absl::Status DecodeChunk(const quiver::v1::Chunk& in, engine::RaggedBatch& b) {
  if (in.cu_seqlens_size() < 2) {
    return absl::InvalidArgumentError("chunk.cu_seqlens must hold num_seqs + 1 >= 2 entries");
  }
  for (int i = 1; i < in.cu_seqlens_size(); ++i) {
    if (in.cu_seqlens(i) < in.cu_seqlens(i - 1)) {
      return absl::InvalidArgumentError(StrCat("chunk.cu_seqlens decreases at index ", i));
    }
  }
  for (uint32_t c : in.cu_seqlens()) {
    if (c > static_cast<uint32_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(StrCat("chunk.cu_seqlens: ", c, " is out of range"));
    }
  }
  b.token_ids.clear();
  b.token_ids.reserve(static_cast<size_t>(in.token_ids_size()));
  for (uint32_t id : in.token_ids()) {
    if (id > static_cast<uint32_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(StrCat("chunk.token_ids: id ", id, " is out of range"));
    }
    b.token_ids.push_back(static_cast<int32_t>(id));
  }
  b.cu_seqlens.assign(in.cu_seqlens().begin(), in.cu_seqlens().end());
  b.token_type_ids.clear();
  for (uint32_t t : in.token_type_ids()) {
    if (t > static_cast<uint32_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(StrCat("chunk.token_type_ids: ", t, " is out of range"));
    }
    b.token_type_ids.push_back(static_cast<int32_t>(t));
  }
  b.span_bounds.clear();
  for (uint32_t s : in.span_bounds()) {
    if (s > static_cast<uint32_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(StrCat("chunk.span_bounds: ", s, " is out of range"));
    }
    b.span_bounds.push_back(static_cast<int32_t>(s));
  }
  if (in.prompt_lengths_size() != 0 && in.prompt_lengths_size() != in.cu_seqlens_size() - 1) {
    return absl::InvalidArgumentError(StrCat("chunk.prompt_lengths has ", in.prompt_lengths_size(),
                                             " values for ", in.cu_seqlens_size() - 1,
                                             " sequences"));
  }
  b.prompt_lengths.clear();
  for (int s = 0; s < in.prompt_lengths_size(); ++s) {
    const uint32_t length = in.prompt_lengths(s);
    if (length >= in.cu_seqlens(s + 1) - in.cu_seqlens(s)) {
      return absl::InvalidArgumentError(StrCat("chunk.prompt_lengths: sequence ", s,
                                               "'s prompt of ", length,
                                               " tokens leaves none of its tokens"));
    }
    b.prompt_lengths.push_back(static_cast<int32_t>(length));
  }
  const quiver::v1::OutputOptions& o = in.output();
  QUIVER_ASSIGN_OR_RETURN(b.output.pooling, DecodePooling(o.pooling()));
  b.output.normalize = o.has_normalize() ? std::optional<bool>(o.normalize()) : std::nullopt;
  b.output.dimensions = o.dimensions();
  b.output.raw_hidden = o.raw_hidden();
  QUIVER_ASSIGN_OR_RETURN(b.output.output_type, DecodeOutputType(o.output_type()));
  return absl::OkStatus();
}

}  // namespace quiver::worker
