"""TEI's /embed_sparse against a real `quiver serve` of the tiny SPLADE fixture (BertForMaskedLM saved
by sentence-transformers' SparseEncoder), compared with the term weights sentence-transformers gave
(reference.jsonl, dense over the vocabulary): every nonzero term as {"index", "value"} in index
order, one list per input; two inputs longer than the engine's 256-token SPLADE chunk. Routes that do
not fit a model kind are refused naming it, both ways.

    embed_sparse_test.py QUIVER SOURCE_DIR
"""

import json
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import serving  # noqa: E402
from serving import check, failures  # noqa: E402

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
FIXTURE = os.path.join(SOURCE, "tests", "fixtures", "tiny", "splade")


def request(port, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"},
                                 method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def matches(answer, dense, tol=1e-4):
    """answer: [{index, value}] in index order; dense: the reference over the vocabulary."""
    scale = max(1.0, max(dense))
    want = {i: v for i, v in enumerate(dense) if v > 0}
    got = {d["index"]: d["value"] for d in answer}
    indices = [d["index"] for d in answer]
    return (indices == sorted(indices) and set(got) <= set(range(len(dense)))
            and all(abs(got.get(i, 0.0) - want.get(i, 0.0)) <= tol * scale
                    for i in set(got) | set(want)))


def main():
    rows = [json.loads(l) for l in open(os.path.join(FIXTURE, "reference.jsonl"), encoding="utf-8")]
    proc, port, _ = serving.start(QUIVER, FIXTURE, [], prefix="quiver-sparse-")
    try:
        status, out = request(port, "/embed_sparse", {"inputs": rows[0]["text"]})
        check("one text: its terms equal sentence-transformers'",
              status == 200 and len(out) == 1 and matches(out[0], rows[0]["output"]),
              f"{status} {str(out)[:300]}")
        status, out = request(port, "/embed_sparse", {"inputs": [r["text"] for r in rows],
                                                      "truncate": True})
        ok = status == 200 and len(out) == len(rows)
        for r, answer in zip(rows, out if ok else []):
            ok = ok and matches(answer, r["output"])
        check("a batch of 12 (two cut at 300 tokens): a list per input, equal to the reference", ok,
              f"{status} {str(out)[:300]}")
        status, out = request(port, "/", {"inputs": rows[1]["text"]})
        check("POST / on a SPLADE model answers as /embed_sparse",
              status == 200 and matches(out[0], rows[1]["output"]), f"{status} {str(out)[:300]}")
        status, out = request(port, "/info")
        check("/info: embedding model with splade pooling",
              status == 200 and out.get("model_type") == {"embedding": {"pooling": "splade"}},
              f"{status} {out}")
        for path, body in (("/embed", {"inputs": "text"}),
                           ("/v1/embeddings", {"input": "text"}),
                           ("/rerank", {"query": "q", "texts": ["a"]}),
                           ("/predict", {"inputs": "text"})):
            status, out = request(port, path, body)
            check(f"{path} on a SPLADE model: 400 naming the kind",
                  status == 400 and ("SPLADE" in json.dumps(out) or "embedding model" in json.dumps(out)),
                  f"{status} {out}")
        status, out = request(port, "/embed_sparse", {"inputs": []})
        check("an empty batch is 4xx", 400 <= status < 500, f"{status} {out}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    proc, port, _ = serving.start(QUIVER, os.path.join(SOURCE, "models", "all-MiniLM-L6-v2"), [],
                                  prefix="quiver-sparse-minilm-")
    try:
        status, out = request(port, "/embed_sparse", {"inputs": "text"})
        check("/embed_sparse on a dense embedding model: 400 naming the kind",
              status == 400 and "dense embedding model" in json.dumps(out), f"{status} {out}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if failures:
        sys.exit(f"{len(failures)} case(s) failed: {failures}")
    print("embed_sparse: all cases passed")


if __name__ == "__main__":
    main()
