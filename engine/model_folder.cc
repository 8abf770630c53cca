#include "engine/model_folder.h"

#include <filesystem>
#include <utility>

#include "common/strings.h"
#include "common/file.h"
#include "common/json.h"
#include "common/status.h"

namespace quiver::engine {

absl::StatusOr<ModelFolder> LoadModelFolder(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) {
    return absl::NotFoundError(StrCat("model folder '", dir, "' does not exist"));
  }
  ModelFolder folder;
  folder.dir = dir;

  const std::string config_path = (fs::path(dir) / "config.json").string();
  absl::StatusOr<std::string> config_text = ReadFile(config_path);
  if (!config_text.ok()) return config_text.status();
  absl::StatusOr<JsonValue> config_json = JsonValue::Parse(*config_text);
  if (!config_json.ok()) return WithContext(config_json.status(), config_path);
  absl::StatusOr<ModelConfig> config = ParseModelConfig(*config_json);
  if (!config.ok()) return WithContext(config.status(), config_path);
  folder.config = *std::move(config);

  folder.tokenizer_path = (fs::path(dir) / "tokenizer.json").string();
  if (!fs::exists(folder.tokenizer_path)) {
    return absl::NotFoundError(StrCat(folder.tokenizer_path, " is missing (quiver needs "
                                            "the fast-tokenizer file, not only vocab.txt)"));
  }
  QUIVER_ASSIGN_OR_RETURN(folder.pooling, LoadPoolingConfig(dir, folder.config));
  QUIVER_ASSIGN_OR_RETURN(folder.weights, WeightStore::OpenFolder(dir));
  absl::StatusOr<ResolvedWeights> resolved = ResolveWeights(folder.config, folder.weights);
  if (!resolved.ok()) return WithContext(resolved.status(), dir);
  folder.resolved = *std::move(resolved);
  return folder;
}

}  // namespace quiver::engine
