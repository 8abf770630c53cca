// Composition glue: what the engine needs from the tokenizer (the ids of "yes" and "no" for a
// Qwen3 reranker), looked up here so the engine never depends on the tokenizer.
#include "app/commands.h"
#include "common/strings.h"
#include "engine/model_folder.h"
#include "tokenizer/tokenizer.h"

namespace quiver::app {

absl::StatusOr<engine::ModelOptions> ResolveModelOptions(const engine::ModelFolder& folder) {
  engine::ModelOptions options;
  if (!folder.info.yes_no_reranker) return options;
  auto tok = tokenizer::Tokenizer::FromFile(folder.tokenizer_path);
  if (!tok.ok()) return tok.status();
  for (const char* word : {"yes", "no"}) {
    std::optional<uint32_t> id = (*tok)->TokenToId(word);
    if (!id) {
      return absl::InvalidArgumentError(StrCat(folder.tokenizer_path, ": no single token '", word,
                                               "', which a yes/no reranker scores with"));
    }
    (word[0] == 'y' ? options.yes_token_id : options.no_token_id) = static_cast<int32_t>(*id);
  }
  return options;
}

}  // namespace quiver::app
