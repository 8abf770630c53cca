#include "app/model_description.h"

#include <string_view>

#include "common/strings.h"

namespace quiver::app {
namespace {

// TEI's /info names: last_token, the others as sentence-transformers names them.
std::string_view PoolingName(int pooling) {
  switch (pooling) {
    case quiver::v1::POOLING_MEAN:
      return "mean";
    case quiver::v1::POOLING_LAST_TOKEN:
      return "last_token";
    case quiver::v1::POOLING_MAX:
      return "max";
    case quiver::v1::POOLING_MEAN_SQRT_LEN:
      return "mean_sqrt_len_tokens";
    case quiver::v1::POOLING_WEIGHTED_MEAN:
      return "weightedmean";
    default:
      return "cls";
  }
}

}  // namespace

gateway::api::ModelDescription DescribeModel(const quiver::v1::ModelInfoResponse& info) {
  gateway::api::ModelDescription model;
  model.name = info.name();
  model.architecture = info.architecture();
  // sentence-transformers' max_seq_length (the length the model was trained for) where the folder
  // has it, else the position table.
  model.max_input_tokens =
      info.max_seq_length() > 0 ? info.max_seq_length() : info.max_input_tokens();
  model.hidden_size = info.hidden_size();  // the embedding width, after any Dense
  model.token_hidden_size = info.token_hidden_size();
  model.normalize = info.normalize();
  model.exclude_prompt = info.exclude_prompt();
  model.can_embed = info.can_embed();
  model.can_score = info.can_score();
  model.num_labels = info.labels_size();
  model.sparse_width = info.sparse_width();
  // A worker from before the field: the one yes/no architecture there was then.
  const bool yes_no_reranker = info.has_yes_no_reranker()
                                   ? info.yes_no_reranker()
                                   : info.can_score() && info.architecture() == "Qwen3ForCausalLM";
  if (yes_no_reranker) model.score_prompt = gateway::api::Qwen3RerankerPrompt();
  // Several concatenated modes joined by '+'.
  model.pooling = PoolingName(info.pooling());
  if (info.poolings_size() > 1) {
    model.pooling.clear();
    for (int pooling : info.poolings()) {
      model.pooling += StrCat(model.pooling.empty() ? "" : "+", PoolingName(pooling));
    }
  }
  if (model.sparse_width > 0) model.pooling = "splade";  // TEI's /info for a SPLADE model
  model.max_batch_tokens = info.max_batch_tokens();
  if (!info.dtype().empty()) model.dtype = info.dtype();
  return model;
}

}  // namespace quiver::app
