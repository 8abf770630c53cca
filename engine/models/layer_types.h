// Config fields shared by the models that mix global and sliding-window layers (ModernBERT,
// Gemma 3): transformers 5's per-layer-type rotary settings and its layer_types list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "common/status.h"
#include "common/strings.h"

namespace quiver::engine {

// The rotary theta of one layer type: rope_parameters[layer_type].rope_theta (transformers 5),
// else the older top-level `old_field`, else `fallback`; a non-default rope_type is refused.
inline absl::StatusOr<double> LayerTypeRopeTheta(const JsonValue& json, const char* layer_type,
                                                 const char* old_field, double fallback) {
  QUIVER_ASSIGN_OR_RETURN(double theta, JsonDouble(json, old_field, fallback));
  const JsonValue* rope = json.Find("rope_parameters");
  if (rope == nullptr || !rope->is_object()) return theta;
  const JsonValue* params = rope->Find(layer_type);
  if (params == nullptr || !params->is_object()) return theta;
  QUIVER_ASSIGN_OR_RETURN(std::string type, JsonString(*params, "rope_type", "default"));
  if (type != "default") {
    return absl::InvalidArgumentError(
        StrCat("field 'rope_parameters.", layer_type,
               ".rope_type': only 'default' rotary is supported, got '", type, "'"));
  }
  return JsonDouble(*params, "rope_theta", theta);
}

// Per layer, whether it is global ("full_attention") rather than windowed
// ("sliding_attention"), from config.json's layer_types; empty when the config has none (the
// caller derives them from its older pattern field).
inline absl::StatusOr<std::vector<bool>> GlobalLayersFromTypes(const JsonValue& json,
                                                               int64_t num_layers) {
  std::vector<bool> global;
  const JsonValue* types = json.Find("layer_types");
  if (types == nullptr || !types->is_array()) return global;
  if (static_cast<int64_t>(types->items().size()) != num_layers) {
    return absl::InvalidArgumentError(StrCat("field 'layer_types': ", types->items().size(),
                                             " entries for ", num_layers, " layers"));
  }
  for (const JsonValue& t : types->items()) {
    const std::string type = t.is_string() ? t.as_string() : "";
    if (type != "full_attention" && type != "sliding_attention") {
      return absl::InvalidArgumentError(
          StrCat("field 'layer_types': '", type, "' is not full_attention or sliding_attention"));
    }
    global.push_back(type == "full_attention");
  }
  return global;
}

}  // namespace quiver::engine
