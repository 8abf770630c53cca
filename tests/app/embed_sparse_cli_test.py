#!/usr/bin/env python3
"""`quiver embed` with a SPLADE model (the tiny fixture: BertForMaskedLM saved by
sentence-transformers' SparseEncoder), against real processes (standard library only):

  - JSON lines, each "embedding" the positive terms as {"index", "value"} in index order, equal
    to the term weights sentence-transformers gave (reference.jsonl, dense over the vocabulary;
    two of its texts cut at the model's 300 tokens, as sentence-transformers cuts them);
  - --shard I/2 outputs concatenated are the whole output, byte for byte;
  - through a `quiver worker` (--workers): byte-identical to the local engine;
  - what does not apply to sparse terms (.npy, --dimensions, --normalize, --dtype int8) exits 2
    naming it; a cross-encoder is still refused as a scoring model.

    embed_sparse_cli_test.py QUIVER_BINARY SOURCE_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

QUIVER, SOURCE = sys.argv[1:3]
TINY = os.path.join(SOURCE, "tests", "fixtures", "tiny")
SPLADE = os.path.join(TINY, "splade")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
from serving import check, finish, start_worker  # noqa: E402


def embed(*args, model=SPLADE):
    return subprocess.run([QUIVER, "embed", "--model", model, "--progress", "off", *args],
                          capture_output=True, text=True, timeout=300)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def matches(terms, dense, tol=1e-4):
    """terms: [{index, value}] in index order; dense: the reference over the vocabulary."""
    indices = [t["index"] for t in terms]
    got = {t["index"]: t["value"] for t in terms}
    want = {i: v for i, v in enumerate(dense) if v > 0}
    scale = max(1.0, max(dense))
    return (indices == sorted(set(indices)) and all(v > 0 for v in got.values())
            and all(abs(got.get(i, 0.0) - want.get(i, 0.0)) <= tol * scale
                    for i in set(got) | set(want)))


def main():
    work = tempfile.mkdtemp(prefix="quiver-embed-sparse-")
    refs = [json.loads(line) for line in open(os.path.join(SPLADE, "reference.jsonl"),
                                              encoding="utf-8")]
    src = os.path.join(work, "texts.jsonl")
    with open(src, "w", encoding="utf-8") as f:
        for i, r in enumerate(refs):
            f.write(json.dumps({"id": f"doc-{i}", "text": r["text"]}, ensure_ascii=False) + "\n")

    out = os.path.join(work, "terms.jsonl")
    r = embed("--input", src, "--output", out)
    check("a SPLADE model's job succeeds", r.returncode == 0, r.stderr[-500:])
    if r.returncode != 0:
        sys.exit(1)
    rows = [json.loads(line) for line in open(out, encoding="utf-8")]
    check("one line per record, with its id and index, in order",
          [(row["id"], row["index"]) for row in rows] == [(f"doc-{i}", i)
                                                          for i in range(len(refs))],
          str([(row.get("id"), row.get("index")) for row in rows])[:300])
    bad = [i for i, (row, ref) in enumerate(zip(rows, refs))
           if not matches(row["embedding"], ref["output"])]
    check(f"every row's positive terms equal sentence-transformers' ({len(refs)} texts, "
          "two past 300 tokens)", len(rows) == len(refs) and not bad, f"rows {bad}")

    shards = []
    for i in range(2):
        part = os.path.join(work, f"shard{i}.jsonl")
        r = embed("--input", src, "--output", part, "--shard", f"{i}/2")
        check(f"--shard {i}/2", r.returncode == 0, r.stderr[-300:])
        shards.append(read(part) if r.returncode == 0 else b"")
    check("--shard I/2 outputs concatenated are the whole output, byte for byte",
          b"".join(shards) == read(out))

    worker, port = start_worker(QUIVER, SPLADE, work)
    try:
        via = os.path.join(work, "via_worker.jsonl")
        r = embed("--input", src, "--output", via, "--workers", f"127.0.0.1:{port}")
        check("--workers with a SPLADE worker succeeds", r.returncode == 0, r.stderr[-500:])
        check("--workers: byte-identical to the local engine", read(via) == read(out))
    finally:
        worker.kill()
        worker.wait()

    for args, needle in (
            (["--output", os.path.join(work, "terms.npy")], "not .npy"),
            (["--dimensions", "8"], "--dimensions"),
            (["--normalize"], "--normalize"),
            (["--dtype", "int8"], "--dtype int8")):
        r = embed("--text", "a text", *args)
        check(f"{' '.join(args)} exits 2 naming {needle}",
              r.returncode == 2 and needle in r.stderr and "SPLADE" in r.stderr,
              f"{r.returncode} {r.stderr[-300:]}")
    r = embed("--text", "a text", model=os.path.join(TINY, "bert_cross_encoder"))
    check("a cross-encoder is refused as a scoring model (exit 2)",
          r.returncode == 2 and "scoring model" in r.stderr, f"{r.returncode} {r.stderr[-300:]}")

    finish("embed sparse", work)


if __name__ == "__main__":
    main()
