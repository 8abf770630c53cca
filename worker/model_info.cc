#include "worker/model_info.h"

#include <algorithm>
#include <cstdint>

#include "common/strings.h"
#include "worker/chunk_codec.h"

namespace quiver::worker {

std::string_view EngineDtype(const engine::Engine& engine) {
  if (engine.options().device.device != engine::Device::kCpu) return "bfloat16";
  switch (engine.options().quantize) {
    case engine::ops::WeightPrecision::kInt8:
      return "int8";
    case engine::ops::WeightPrecision::kBf16:
      return "bfloat16";
    default:
      return "float32";
  }
}

quiver::v1::ModelInfoResponse DescribeEngine(const engine::Engine& engine,
                                             const std::string& model_name,
                                             int64_t max_batch_tokens, int64_t max_queued_tokens) {
  quiver::v1::ModelInfoResponse info;
  const engine::ModelFolder& folder = engine.folder();
  info.set_name(model_name);
  info.set_architecture(folder.architecture);
  info.set_max_input_tokens(static_cast<uint32_t>(engine.max_input_tokens()));
  info.set_hidden_size(static_cast<uint32_t>(engine.output_size()));  // after Dense
  info.set_token_hidden_size(static_cast<uint32_t>(engine.hidden_size()));
  info.set_pooling(EncodePoolingMode(folder.pooling.modes.front()));
  if (folder.pooling.modes.size() > 1) {
    for (engine::PoolingMode mode : folder.pooling.modes) {
      info.add_poolings(EncodePoolingMode(mode));
    }
  }
  info.set_normalize(folder.pooling.normalize);
  info.set_dtype(std::string(EngineDtype(engine)));
  info.set_exclude_prompt(!folder.pooling.include_prompt);
  const bool sparse = engine.info().sparse;
  info.set_can_embed(!engine.is_scorer());
  info.set_can_score(engine.is_scorer() && !sparse);
  info.set_yes_no_reranker(engine.info().yes_no_reranker);
  if (sparse) info.set_sparse_width(static_cast<uint32_t>(engine.info().num_labels));
  info.set_max_batch_tokens(static_cast<uint32_t>(max_batch_tokens));
  info.set_max_queued_tokens(
      static_cast<uint32_t>(std::clamp<int64_t>(max_queued_tokens, 0, UINT32_MAX)));
  // The trained length, never beyond what the position table allows.
  info.set_max_seq_length(static_cast<uint32_t>(
      std::min<int64_t>(folder.pooling.max_seq_length.value_or(engine.max_input_tokens()),
                        engine.max_input_tokens())));
  for (int64_t i = 0; !sparse && i < engine.info().num_labels; ++i) {
    info.add_labels(StrCat("LABEL_", i));
  }
  return info;
}

}  // namespace quiver::worker
