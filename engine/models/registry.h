// config.json's "architectures" name -> the model file that serves it. Each model file has one
// registration function that adds its names; registry.cc calls them, in the order listed there.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/models/model.h"

namespace quiver::engine {

struct ArchitectureEntry {
  std::string_view name;           // as config.json writes it: "BertModel"
  std::string_view module_prefix;  // the base model's weight prefix in task checkpoints: "bert."
  ModelFactory factory;
};

class ModelRegistry {
 public:
  void Add(ArchitectureEntry entry) { entries_.push_back(entry); }
  const ArchitectureEntry* Find(std::string_view name) const;
  // "BertModel, BertForSequenceClassification, ...", for messages.
  std::string Names() const;

 private:
  std::vector<ArchitectureEntry> entries_;
};

// Every architecture this build serves.
const ModelRegistry& Models();

}  // namespace quiver::engine
