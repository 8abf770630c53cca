// The engine-level stages of quiver_gpu_check: whole models through engine::Engine on cuda:0, fed
// token ids (no tokenizer library: the ids come from the fixtures' reference files or are drawn
// at random). Both fill `report` and never throw or crash on an engine or CUDA error: each one
// becomes a failed check naming the status.
//
//   models  every tiny fixture (tests/fixtures/tiny/*) on cuda:0 with lazy CUDA graphs and on
//           the CPU engine (f32), each row against the Hugging Face reference and against the CPU
//           (embeddings by cosine, scores as one vector); each batch runs three times (eager,
//           capture, replay), and the three answers must be the same bytes. Late chunking
//           (span_bounds) on bert_mean against the CPU. Then a Qwen3-0.6B-shaped model with
//           seeded random weights (written into the work folder, reused by the engine stage)
//           against the CPU f32 engine.
//   engine  a MiniLM-L6 shape (the real all-MiniLM-L6-v2 where models/ holds it, else seeded
//           random weights) and the Qwen3-0.6B shape: eager vs graph-replay latency at 1 x 128
//           and replay == eager bit for bit, 100 x 512 tokens/s and MFU, a tokens-per-forward
//           sweep, batch-1 latency, scoring latency (the 0.6B weights as a Qwen3 reranker),
//           concurrent clients. Writes work_dir/peer_input.json (ids, quiver's vectors and
//           latency) for bench/gpu_peer_sentence_transformers.py.
#pragma once

#include "tests/gpu/check_common.h"

namespace quiver::gpu_check {

void RunModelsStage(Report& report, const Options& options);
void RunEngineStage(Report& report, const Options& options);

}  // namespace quiver::gpu_check
