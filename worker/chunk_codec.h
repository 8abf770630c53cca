// The one translation between the wire (proto/quiver/v1/inference.proto: Chunk, OutputOptions,
// OutputType, Pooling) and the engine's RaggedBatch and enums, used by the worker's RPCs and by
// `quiver serve`'s in-process replica alike, so both accept and refuse the same chunks. Enums are
// mapped by exhaustive switches; a value the wire enum does not define is INVALID_ARGUMENT.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/batch.h"
#include "engine/loader/pooling_config.h"
#include "quiver/v1/inference.pb.h"

namespace quiver::worker {

// `in` as a batch: cu_seqlens must rise from its first entry, ids must fit int32, the output
// options must use defined enum values. The engine's own Validate (vocabulary, lengths) still
// runs where the batch is computed.
absl::Status DecodeChunk(const quiver::v1::Chunk& in, engine::RaggedBatch& out);

absl::StatusOr<engine::Pooling> DecodePooling(quiver::v1::Pooling pooling);
absl::StatusOr<engine::OutputType> DecodeOutputType(quiver::v1::OutputType type);
quiver::v1::OutputType EncodeOutputType(engine::OutputType type);
quiver::v1::Pooling EncodePoolingMode(engine::PoolingMode mode);

}  // namespace quiver::worker
