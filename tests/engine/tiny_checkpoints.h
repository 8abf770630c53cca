// Every tiny checkpoint of tests/fixtures/tiny that the golden and invariance suites run, in one
// list: a fixture added to tools/golden/make_fixtures.py is added here once.
#pragma once

#include <array>

namespace quiver::engine {

inline constexpr std::array<const char*, 37> kTinyCheckpoints = {"bert_mean",
                                                                 "bert_cross_encoder",
                                                                 "qwen3_causal_lasttoken",
                                                                 "qwen3_bidirectional_mean",
                                                                 "qwen3_reranker",
                                                                 "distilbert_mean",
                                                                 "distilbert_classifier",
                                                                 "xlmr_cls",
                                                                 "camembert_cls",
                                                                 "xlmr_cross_encoder",
                                                                 "bert_max",
                                                                 "qwen2_lasttoken",
                                                                 "mistral_lasttoken",
                                                                 "llama_lasttoken",
                                                                 "mpnet_mean",
                                                                 "mpnet_cross_encoder",
                                                                 "modernbert_cls",
                                                                 "modernbert_cross_encoder",
                                                                 "bert_dense",
                                                                 "t5_mean",
                                                                 "t5_gated",
                                                                 "gemma3_mean",
                                                                 "bert_weightedmean",
                                                                 "bert_mean_sqrt_len",
                                                                 "qwen2_bidirectional_mean",
                                                                 "splade",
                                                                 "bert_prompt_mean",
                                                                 "bert_prompt_weightedmean",
                                                                 "bert_prompt_cls",
                                                                 "qwen3_seq_cls",
                                                                 "llama_classifier",
                                                                 "qwen2_seq_cls",
                                                                 "mistral_seq_cls",
                                                                 "splade_distilbert",
                                                                 "splade_roberta",
                                                                 "bert_concat_pooling",
                                                                 "bert_concat_pooling_legacy"};

}  // namespace quiver::engine
