#include "engine/models/registry.h"

#include "common/strings.h"

namespace quiver::engine {

// One line per model file (engine/models/<arch>.cc).
void RegisterBertModels(ModelRegistry& registry);
void RegisterQwen3Models(ModelRegistry& registry);
void RegisterModernBertModels(ModelRegistry& registry);
void RegisterT5Models(ModelRegistry& registry);
void RegisterGemma3Models(ModelRegistry& registry);

const ModelRegistry& Models() {
  static const ModelRegistry* registry = [] {
    auto* r = new ModelRegistry();
    RegisterBertModels(*r);
    RegisterQwen3Models(*r);
    RegisterModernBertModels(*r);
    RegisterT5Models(*r);
    RegisterGemma3Models(*r);
    return r;
  }();
  return *registry;
}

const ArchitectureEntry* ModelRegistry::Find(std::string_view name) const {
  for (const ArchitectureEntry& entry : entries_) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

std::string ModelRegistry::Names() const {
  std::vector<std::string_view> names;
  for (const ArchitectureEntry& entry : entries_) names.push_back(entry.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace quiver::engine
