#include "engine/model_folder.h"

#include <filesystem>
#include <string_view>
#include <utility>

#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "common/strings.h"
#include "engine/dense_modules.h"
#include "engine/loader/weight_loader.h"

namespace quiver::engine {
namespace {

// config.json's first architecture into folder.architecture and its registry entry into
// folder.entry; an unknown one refused, naming what is supported (and, for an architecture that
// exists only as its authors' remote code, why it is not).
absl::Status FindArchitecture(const JsonValue& config, const std::string& config_path,
                              ModelFolder& folder) {
  const JsonValue* architectures = config.Find("architectures");
  if (architectures == nullptr || !architectures->is_array() || architectures->items().empty() ||
      !architectures->items()[0].is_string()) {
    return WithContext(absl::InvalidArgumentError("field 'architectures' must be a non-empty list "
                                                  "of names (e.g. [\"BertModel\"])"),
                       config_path);
  }
  folder.architecture = architectures->items()[0].as_string();
  folder.entry = Models().Find(folder.architecture);
  if (folder.entry == nullptr) {
    // Architectures whose only implementation is their authors' remote code (auto_map in
    // config.json, trust_remote_code in transformers): no reference can be run offline to check
    // a port against, so they are refused by name rather than guessed at.
    static constexpr std::pair<std::string_view, std::string_view> kRemoteCode[] = {
        {"NomicBertModel", "nomic-embed-text (NomicBERT)"},
        {"NewModel", "Alibaba GTE v1.5 (\"NewModel\")"},
        {"NewForSequenceClassification", "Alibaba GTE v1.5 rerankers (\"NewModel\")"},
        {"JinaBertModel", "jina-embeddings-v2 (JinaBERT)"},
        {"JinaBertForSequenceClassification", "jina-reranker-v1 (JinaBERT)"},
    };
    for (const auto& [name, what] : kRemoteCode) {
      if (folder.architecture == name) {
        return WithContext(
            absl::InvalidArgumentError(
                StrCat("architecture '", folder.architecture, "' (", what,
                       ") exists only as remote code (config.json's auto_map, trust_remote_code): "
                       "quiver cannot check a port against it offline, so it does not serve it; "
                       "supported: ",
                       Models().Names())),
            config_path);
      }
    }
    return WithContext(
        absl::InvalidArgumentError(StrCat("unknown architecture '", folder.architecture,
                                          "'; supported: ", Models().Names())),
        config_path);
  }
  return absl::OkStatus();
}

}  // namespace

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
  folder.config = *std::move(config_json);
  const JsonValue& config = folder.config;
  if (!config.is_object()) {
    return WithContext(absl::InvalidArgumentError("config is not a JSON object"), config_path);
  }
  QUIVER_RETURN_IF_ERROR(FindArchitecture(config, config_path, folder));

  folder.tokenizer_path = (fs::path(dir) / "tokenizer.json").string();
  if (!fs::exists(folder.tokenizer_path)) {
    return absl::NotFoundError(StrCat(folder.tokenizer_path,
                                      " is missing (quiver needs "
                                      "the fast-tokenizer file, not only vocab.txt)"));
  }
  QUIVER_ASSIGN_OR_RETURN(folder.weights, WeightStore::OpenFolder(dir));
  // The architecture's declarations, checked against the checkpoint without reading it.
  WeightLoader check(folder.weights, folder.architecture, std::string(folder.entry->module_prefix),
                     WeightLoader::Mode::kCheck);
  const ModelOptions no_options;
  absl::StatusOr<std::unique_ptr<Model>> model =
      folder.entry->factory({folder.architecture, config, check, no_options});
  if (!model.ok()) {
    return WithContext(model.status(), check.status().ok() ? config_path : dir);
  }
  folder.info = (*model)->info();
  folder.weight_names = check.names();
  QUIVER_ASSIGN_OR_RETURN(folder.pooling, LoadPoolingConfig(dir, folder.info.default_pooling));
  if (!folder.pooling.dense.empty()) {  // their weights' names and shapes, checked here
    if (folder.info.num_labels > 0) {
      return absl::InvalidArgumentError(StrCat(dir, ": a Dense module on a scoring model (",
                                               folder.architecture, ") is not supported"));
    }
    // The first Dense module reads the pooled row: hidden_size per pooling mode.
    absl::StatusOr<DenseModules> dense = DenseModules::Load(
        folder.pooling.dense,
        folder.info.hidden_size * static_cast<int64_t>(folder.pooling.modes.size()),
        WeightLoader::Mode::kCheck);
    if (!dense.ok()) return dense.status();
  }
  return folder;
}

}  // namespace quiver::engine
