// libFuzzer target: arbitrary bytes as a request body, through JsonDocument::Parse and every
// dialect's request parser (gateway/api/requests.h), with small and default limits. Nothing may
// crash, hang or leak; a parsed request must respect the limits it was parsed under.
//
//   scripts/fuzz.sh [seconds] request_json_fuzz
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "gateway/api/requests.h"

namespace {

using namespace quiver;
using namespace quiver::gateway::api;

template <typename T>
void Check(const absl::StatusOr<T>& r) {
  // Every refusal carries a message a client can read.
  if (!r.ok() && r.status().message().empty()) __builtin_trap();
}

void CheckInputs(const absl::StatusOr<EmbedRequest>& r, const ApiLimits& limits) {
  Check(r);
  if (!r.ok()) return;
  if (r->inputs.empty()) __builtin_trap();
  if (static_cast<int64_t>(r->inputs.size()) > limits.max_inputs) __builtin_trap();
  for (const Input& in : r->inputs) {
    if (in.is_ids) {
      for (uint32_t id : in.ids) {
        if (id > static_cast<uint32_t>(INT32_MAX)) __builtin_trap();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(text);
  if (!doc.ok()) {
    if (doc.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  ApiLimits small;
  small.max_inputs = 3;
  for (const ApiLimits& limits : {ApiLimits{}, small}) {
    const JsonView body = doc->root();
    CheckInputs(ParseOpenAiEmbed(body, limits), limits);
    CheckInputs(ParseTeiEmbed(body, limits), limits);
    CheckInputs(ParseCohereEmbed(body, limits, 1), limits);
    CheckInputs(ParseCohereEmbed(body, limits, 2), limits);
    Check(ParseContextualized(body, limits));
    if (auto r = ParseRerank(body, limits); r.ok()) {
      if (r->documents.empty() || static_cast<int64_t>(r->documents.size()) > limits.max_inputs) {
        __builtin_trap();
      }
    }
    Check(ParseScore(body, limits));
    Check(ParseSimilarity(body, limits));
    Check(ParseTokenize(body, limits));
    Check(ParseVllmTokenize(body));
    std::string model;
    Check(ParseVllmDetokenize(body, &model));
    if (auto r = ParsePredict(body, limits); r.ok()) {
      if (r->inputs.empty() || static_cast<int64_t>(r->inputs.size()) > limits.max_inputs) {
        __builtin_trap();
      }
    }
    if (auto r = ParseClassify(body, limits); r.ok()) {
      if (r->inputs.empty() || static_cast<int64_t>(r->inputs.size()) > limits.max_inputs) {
        __builtin_trap();
      }
      for (const PredictInput& in : r->inputs) {
        if (in.pair || (!in.is_ids && in.text.empty())) __builtin_trap();
      }
    }
    if (auto r = ParseDecode(body, limits); r.ok()) {
      for (const auto& ids : r->ids) {
        for (uint32_t id : ids) {
          if (id > static_cast<uint32_t>(INT32_MAX)) __builtin_trap();
        }
      }
    }
  }
  return 0;
}
