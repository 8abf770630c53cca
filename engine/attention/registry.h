// The attention backends this build has, by (device, name). CPU: "reference", "packed", "tiled",
// "flash" (kernels/cpu/attention.h says what each is). A CUDA backend is added to registry.cc's
// list under QUIVER_WITH_CUDA; nothing else changes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/attention/backend.h"

namespace quiver::engine {

// A new backend; INVALID_ARGUMENT naming the device's backends when `name` is not one of them.
absl::StatusOr<std::unique_ptr<AttentionBackend>> MakeAttentionBackend(Device device,
                                                                       std::string_view name);
// The names MakeAttentionBackend accepts for `device`, in registration order.
std::vector<std::string_view> AttentionBackendNames(Device device);

}  // namespace quiver::engine
