// config.json's label count for the classification heads (transformers' PretrainedConfig rule):
// num_labels where given, else the size of id2label, else 2.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "common/status.h"

namespace quiver::engine {

// INVALID_ARGUMENT naming the field for a count below 1 or a value of the wrong type.
inline absl::StatusOr<int64_t> ParseNumLabels(const JsonValue& json) {
  int64_t labels = 2;
  if (const JsonValue* id2label = json.Find("id2label"); id2label && id2label->is_object()) {
    labels = static_cast<int64_t>(id2label->members().size());
  }
  QUIVER_ASSIGN_OR_RETURN(const int64_t num_labels, JsonInt(json, "num_labels", labels));
  QUIVER_RETURN_IF_ERROR(RequirePositive("num_labels", num_labels));
  return num_labels;
}

}  // namespace quiver::engine
