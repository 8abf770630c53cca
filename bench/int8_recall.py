"""Retrieval with --quantize int8 against f32, on the repository corpus.

Every query of corpus/queries.jsonl (a man page's one-line summary) is relevant to the document
with the same id (corpus/docs_en.jsonl and docs_multi.jsonl: the page itself). `quiver embed`
embeds queries and documents (cut at the model's max_seq_length) once in f32 and once with
--quantize int8; recall@10 is the share of queries whose page is among the 10 documents closest by
cosine. Also reported: the smallest and mean cosine between a text's int8 and f32 embeddings, and
how many of each query's f32 top 10 the int8 top 10 keeps.

    int8_recall.py --quiver build/quiver [--model models/all-MiniLM-L6-v2] --out result.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(name):
    return [json.loads(l) for l in open(os.path.join(ROOT, "corpus", name), encoding="utf-8")]


def embed(quiver, model, rows, quantize, threads, work, tag):
    src = os.path.join(work, f"{tag}.jsonl")
    with open(src, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({"text": r["text"]}) + "\n")
    out = os.path.join(work, f"{tag}-{quantize}.npy")
    t = time.perf_counter()
    subprocess.run([quiver, "embed", "--model", model, "--input", src, "--output", out,
                    "--normalize", "--quantize", quantize, "--threads", str(threads)],
                   check=True, stdout=subprocess.DEVNULL)
    print(f"{tag} {quantize}: {len(rows)} texts in {time.perf_counter() - t:.1f} s",
          file=sys.stderr)
    return np.load(out)


def top10(queries, docs):
    return np.argsort(-(queries @ docs.T), axis=1)[:, :10]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quiver", required=True)
    p.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    docs = read("docs_en.jsonl") + read("docs_multi.jsonl")
    index = {d["id"]: i for i, d in enumerate(docs)}
    queries = [q for q in read("queries.jsonl") if q["id"] in index]
    relevant = np.asarray([index[q["id"]] for q in queries])
    result = {"queries": len(queries), "documents": len(docs)}
    with tempfile.TemporaryDirectory() as work:
        emb = {}
        for quantize in ("none", "int8"):
            emb[quantize] = (embed(args.quiver, args.model, queries, quantize, args.threads, work,
                                   "queries"),
                             embed(args.quiver, args.model, docs, quantize, args.threads, work,
                                   "docs"))
    tops = {}
    for quantize, (q, d) in emb.items():
        tops[quantize] = top10(q, d)
        hits = (tops[quantize] == relevant[:, None]).any(axis=1)
        result[f"recall_at_10_{'f32' if quantize == 'none' else 'int8'}"] = float(hits.mean())
    for part, i in (("queries", 0), ("documents", 1)):
        cos = (emb["none"][i] * emb["int8"][i]).sum(axis=1)
        result[f"int8_vs_f32_cosine_{part}"] = {"min": float(cos.min()), "mean": float(cos.mean())}
    kept = [len(set(a) & set(b)) / 10 for a, b in zip(tops["none"], tops["int8"])]
    result["int8_top10_overlap_with_f32"] = float(np.mean(kept))
    result["recall_difference"] = result["recall_at_10_int8"] - result["recall_at_10_f32"]
    json.dump(result, open(args.out, "w"), indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
