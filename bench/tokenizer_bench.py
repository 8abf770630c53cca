#!/usr/bin/env python3
"""quiver's tokenizer against Hugging Face tokenizers, side by side in one run.

    python bench/tokenizer_bench.py [--build build] [--out docs/benchmarks] [--tokenizers a,b]

For each of the four tokenizers of tests/fixtures/tokenizers (or those --tokenizers names) and
each text set of
corpus/ (all documents; all queries): per-text latency (p50/p99, one thread, each text
alone) and throughput (MB/s, tokens/s) with 1 and 2 threads. Hugging Face runs in its Python API
as users call it: `encode` per text, and `encode_batch` (its Rust thread pool, sized with
RAYON_RS_NUM_CPUS). Each configuration runs in its own process. Writes tokenizer.json (raw) and
tokenizer.md (table) under --out; the table goes into docs/benchmarks.md.
"""

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"
TOKENIZERS = ["minilm_wordpiece", "qwen_style_bpe", "xlmr_style_unigram",
              "xlmr_precompiled_unigram"]


def percentile(values, p):
    values = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(values)))
    return values[min(len(values), rank) - 1]


def hf_worker(tokenizer_path, texts_path, threads, mode):
    """Runs in a child process, so RAYON_RS_NUM_CPUS takes effect before rayon starts."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer_path)
    tok.no_truncation()
    tok.no_padding()
    texts = [json.loads(line)["text"] for line in open(texts_path, encoding="utf-8")]
    nbytes = sum(len(t.encode()) for t in texts)
    tokens = sum(len(e.ids) for e in tok.encode_batch(texts))  # warm-up
    out = {"texts": len(texts), "bytes": nbytes, "tokens": tokens, "threads": threads}
    if mode == "encode":
        for t in texts:
            tok.encode(t)
        lat = []
        for t in texts:
            start = time.perf_counter_ns()
            tok.encode(t)
            lat.append((time.perf_counter_ns() - start) / 1e3)
        out["p50_us"] = percentile(lat, 50)
        out["p99_us"] = percentile(lat, 99)
        best = min(_timed(lambda: [tok.encode(t) for t in texts]) for _ in range(2))
    else:
        best = min(_timed(lambda: tok.encode_batch(texts)) for _ in range(3))
    out["seconds"] = best
    out["mb_per_s"] = nbytes / best / 1e6
    out["tokens_per_s"] = tokens / best
    print(json.dumps(out))


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_hf(tokenizer_path, texts_path, threads, mode):
    env = dict(os.environ, RAYON_RS_NUM_CPUS=str(threads), TOKENIZERS_PARALLELISM="true")
    cmd = [sys.executable, __file__, "--hf-worker", tokenizer_path, texts_path, str(threads), mode]
    return json.loads(subprocess.check_output(cmd, env=env))


def run_quiver(binary, tokenizer_path, texts_path, threads):
    cmd = [str(binary), "--tokenizer", tokenizer_path, "--texts", texts_path, "--threads",
           str(threads)]
    return json.loads(subprocess.check_output(cmd))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--hf-worker":
        hf_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    parser.add_argument("--tokenizers", default=",".join(TOKENIZERS))
    args = parser.parse_args()
    binary = Path(args.build) / "quiver_tokenizer_bench"
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    import tokenizers

    with tempfile.TemporaryDirectory() as tmp:
        sets = {}
        docs = [l for f in ("docs_en.jsonl", "docs_multi.jsonl")
                for l in open(CORPUS / f, encoding="utf-8")]
        sets["documents"] = Path(tmp) / "docs.jsonl"
        sets["documents"].write_text("".join(docs), encoding="utf-8")
        sets["queries"] = CORPUS / "queries.jsonl"

        results = []
        for name in args.tokenizers.split(","):
            path = str(ROOT / "tests" / "fixtures" / "tokenizers" / name / "tokenizer.json")
            for set_name, texts in sets.items():
                row = {"tokenizer": name, "texts": set_name}
                row["hf_encode_1t"] = run_hf(path, str(texts), 1, "encode")
                row["hf_batch_1t"] = run_hf(path, str(texts), 1, "batch")
                row["hf_batch_2t"] = run_hf(path, str(texts), 2, "batch")
                row["quiver_1t"] = run_quiver(binary, path, str(texts), 1)
                row["quiver_2t"] = run_quiver(binary, path, str(texts), 2)
                hf_1t = max(row["hf_encode_1t"]["mb_per_s"], row["hf_batch_1t"]["mb_per_s"])
                row["ratio_p50"] = row["hf_encode_1t"]["p50_us"] / row["quiver_1t"]["p50_us"]
                row["ratio_p99"] = row["hf_encode_1t"]["p99_us"] / row["quiver_1t"]["p99_us"]
                row["ratio_throughput_1t"] = row["quiver_1t"]["mb_per_s"] / hf_1t
                row["ratio_throughput_2t"] = (row["quiver_2t"]["mb_per_s"] /
                                              row["hf_batch_2t"]["mb_per_s"])
                results.append(row)
                print(f"{name:20s} {set_name:9s} p50 x{row['ratio_p50']:.1f} "
                      f"thr1 x{row['ratio_throughput_1t']:.1f} "
                      f"thr2 x{row['ratio_throughput_2t']:.1f}", flush=True)

    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": platform.processor() or
            platform.machine(), "cpus": os.cpu_count(), "hf_tokenizers": tokenizers.__version__,
            "command": "make bench (python bench/tokenizer_bench.py" +
            ("" if args.tokenizers == ",".join(TOKENIZERS) else
             f" --tokenizers {args.tokenizers}") + ")"}
    (out_dir / "tokenizer.json").write_text(json.dumps({"meta": meta, "results": results},
                                                       indent=1) + "\n")
    lines = [
        f"Measured {meta['date']} on {meta['cpus']} CPUs, Hugging Face tokenizers "
        f"{meta['hf_tokenizers']}, command `{meta['command']}`.",
        "",
        "| tokenizer | texts | HF encode p50 / p99 (µs) | quiver p50 / p99 (µs) | p50 ratio | "
        "HF best 1 thread (MB/s) | quiver 1 thread (MB/s, Mtok/s) | ratio | "
        "HF encode_batch 2 threads (MB/s) | quiver 2 threads (MB/s) | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        hf1 = max(r["hf_encode_1t"]["mb_per_s"], r["hf_batch_1t"]["mb_per_s"])
        lines.append(
            f"| {r['tokenizer']} | {r['texts']} | {r['hf_encode_1t']['p50_us']:.1f} / "
            f"{r['hf_encode_1t']['p99_us']:.0f} | {r['quiver_1t']['p50_us']:.1f} / "
            f"{r['quiver_1t']['p99_us']:.0f} | **{r['ratio_p50']:.1f}x** | {hf1:.2f} | "
            f"{r['quiver_1t']['mb_per_s']:.2f}, {r['quiver_1t']['tokens_per_s'] / 1e6:.2f} | "
            f"**{r['ratio_throughput_1t']:.1f}x** | {r['hf_batch_2t']['mb_per_s']:.2f} | "
            f"{r['quiver_2t']['mb_per_s']:.2f} | **{r['ratio_throughput_2t']:.1f}x** |")
    (out_dir / "tokenizer.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
