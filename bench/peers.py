"""The peers in-process, on the suites' shapes, as quiver_engine_bench runs quiver's engine.

Same texts (bench/make_inputs.py), same model, same thread count, one system after the other in
one run; prints one JSON object per system (the same fields as quiver_engine_bench):

  - sentence-transformers on PyTorch: SentenceTransformer.encode (max_seq_length raised to the
    model's 512 positions so that 512-token inputs are not cut);
  - ONNX Runtime: the model exported by tools/peers/export_onnx.py, CPU provider, all graph
    optimizations, inputs tokenized before the clock starts, mean pooling and normalization in
    numpy (inside the clock);
  - llama.cpp through llama-cpp-python: the GGUF f32 conversion, Llama.embed(normalize=True).

Run by bench/run_suites.sh inside the peers venv (tools/peers/setup.sh).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from suites import latency_fields  # bench/ is the script's folder, so on sys.path

LATENCY_LENGTHS = (128, 512, 4096)
SCORING_DOCS = (5, 25, 50)


def repeat(fn, seconds, min_runs):
    """fn() after two warm-up calls, at least min_runs times and `seconds` long; latencies in ms."""
    fn()
    fn()
    ms = []
    start = time.perf_counter()
    while len(ms) < min_runs or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t) * 1e3)
    return ms


def cosine_scores(embeddings):
    query, docs = embeddings[0], embeddings[1:]
    return docs @ query / (np.linalg.norm(docs, axis=1) * np.linalg.norm(query))


def run_suites(name, embed, max_tokens, inputs, seconds):
    """embed(list of texts) -> [n, dims] array, for one peer."""
    sets = {int(k): v for k, v in inputs["sets"].items()}
    queries = inputs["queries"]
    result = {"system": name}
    latency = []
    for tokens in LATENCY_LENGTHS:
        if tokens > max_tokens or tokens not in sets:
            latency.append({"tokens": tokens,
                            "not_applicable": f"longer than the model's {max_tokens} positions"})
            continue
        texts = sets[tokens]
        state = {"next": 0}

        def one():
            embed([texts[state["next"] % len(texts)]])
            state["next"] += 1

        latency.append({"tokens": tokens, **latency_fields(repeat(one, seconds, 20))})
        print(f"{name}: latency {tokens} p50 {latency[-1]['p50_ms']:.2f} ms", file=sys.stderr)
    result["latency"] = latency

    if 512 in sets and max_tokens >= 512:
        docs = sets[512]
        scoring = []
        for n in SCORING_DOCS:
            state = {"next": 0}

            def score():
                i = state["next"]
                state["next"] += 1
                batch = [queries[i % len(queries)]] + [docs[(i + d) % len(docs)] for d in range(n)]
                cosine_scores(np.asarray(embed(batch), dtype=np.float32))

            scoring.append({"documents": n, "document_tokens": 512,
                            **latency_fields(repeat(score, seconds, 3))})
            print(f"{name}: scoring {n} p50 {scoring[-1]['p50_ms']:.1f} ms", file=sys.stderr)
        result["scoring"] = scoring

    texts = sets[128]
    embed(texts)
    ms = []
    start = time.perf_counter()
    while len(ms) < 3 or time.perf_counter() - start < 2 * seconds:
        t = time.perf_counter()
        embed(texts)
        ms.append((time.perf_counter() - t) * 1e3)
    elapsed = time.perf_counter() - start
    result["throughput"] = {
        "batch": len(texts), "tokens": 128, "clients": 1,
        "requests_per_s": len(ms) / elapsed,
        "tokens_per_s": len(ms) * len(texts) * 128 / elapsed,
        **latency_fields(ms),
    }
    print(f"{name}: throughput {result['throughput']['tokens_per_s']:.0f} tokens/s", file=sys.stderr)
    return result


def sentence_transformers_peer(model_dir, threads):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    model = SentenceTransformer(model_dir, device="cpu")
    model.max_seq_length = 512

    def embed(texts):
        with torch.inference_mode():
            return model.encode(texts, batch_size=len(texts), convert_to_numpy=True)

    return f"sentence-transformers {__import__('sentence_transformers').__version__} "\
           f"(torch {torch.__version__})", embed, 512


def onnxruntime_peer(model_dir, onnx_path, threads):
    import onnxruntime
    from tokenizers import Tokenizer

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tokenizer.no_truncation()
    cache = {}

    def tokenize(texts):
        key = tuple(texts)
        if key not in cache:  # tokenized once, outside the timed calls after the first
            encodings = tokenizer.encode_batch(list(texts))
            width = max(len(e.ids) for e in encodings)
            ids = np.zeros((len(texts), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for i, e in enumerate(encodings):
                ids[i, : len(e.ids)] = e.ids
                mask[i, : len(e.ids)] = 1
            cache[key] = (ids, mask, np.zeros_like(ids))
        return cache[key]

    def embed(texts):
        ids, mask, types = tokenize(texts)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                    "token_type_ids": types})[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / m.sum(axis=1)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    return f"ONNX Runtime {onnxruntime.__version__}", embed, 512


def llama_cpp_peer(gguf_path, threads, ubatch):
    import llama_cpp

    llm = llama_cpp.Llama(model_path=gguf_path, embedding=True, n_threads=threads,
                          n_threads_batch=threads, n_ctx=ubatch, n_batch=ubatch,
                          n_ubatch=ubatch, verbose=False)

    def embed(texts):
        return llm.embed(texts if len(texts) > 1 else texts[0], normalize=True)

    def embed_rows(texts):
        out = embed(texts)
        return out if len(texts) > 1 else [out]

    return f"llama.cpp (llama-cpp-python {llama_cpp.__version__}, n_ubatch {ubatch})", \
        embed_rows, 512


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="the model folder")
    parser.add_argument("--onnx", required=True)
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=4)
    # 512 (the model's positions, the least that fits a 512-token input): measured 3x the
    # throughput of 2048 here (llama.cpp attends across the whole micro-batch).
    parser.add_argument("--llama-ubatch", type=int, default=512)
    parser.add_argument("--peers", default="onnxruntime,sentence-transformers,llama.cpp")
    parser.add_argument("--out", required=True, help="JSON list of the peers' results")
    args = parser.parse_args()
    with open(args.inputs, encoding="utf-8") as f:
        inputs = json.load(f)
    results = []
    for peer in args.peers.split(","):
        if peer == "onnxruntime":
            name, embed, max_tokens = onnxruntime_peer(args.model, args.onnx, args.threads)
        elif peer == "sentence-transformers":
            name, embed, max_tokens = sentence_transformers_peer(args.model, args.threads)
        elif peer == "llama.cpp":
            name, embed, max_tokens = llama_cpp_peer(args.gguf, args.threads, args.llama_ubatch)
        else:
            raise SystemExit(f"unknown peer {peer}")
        result = run_suites(name, embed, max_tokens, inputs, args.seconds)
        result["threads"] = args.threads
        results.append(result)
        del embed
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
