// Which attention backend a batch runs: a table keyed by device, model family (ModelInfo::family,
// "bert", "qwen3", ...), head_dim and the batch's longest sequence. A family without rows of its
// own takes the device's default rows, so a new architecture needs no entry here until a
// measurement says it should differ. The engine makes each backend the table can name once, at
// load.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/base/tensor.h"

namespace quiver::engine {

std::string_view ChooseAttentionBackend(Device device, std::string_view family, int64_t head_dim,
                                        int64_t max_seqlen);
// Every backend the table names for `device` (what the engine prepares at load).
std::vector<std::string_view> TableAttentionBackends(Device device);
// The backends the table can choose for a model of `family` and `head_dim` on `device`, at any
// length, in the table's order.
std::vector<std::string_view> TableAttentionBackends(Device device, std::string_view family,
                                                     int64_t head_dim);

}  // namespace quiver::engine
