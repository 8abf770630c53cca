// What a worker says of its model (the ModelInfo call): the engine's model as the wire contract
// describes it. quiver serve describes its in-process engine the same way, so that a gateway and
// serve build the same API description from it (app/model_description.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/engine.h"
#include "quiver/v1/inference.pb.h"

namespace quiver::worker {

// What `engine` computes in, as TEI's /info names it: "float32", "bfloat16" or "int8".
std::string_view EngineDtype(const engine::Engine& engine);

quiver::v1::ModelInfoResponse DescribeEngine(const engine::Engine& engine,
                                             const std::string& model_name,
                                             int64_t max_batch_tokens, int64_t max_queued_tokens);

}  // namespace quiver::worker
