"""TEI's /predict against a real `quiver serve` of the tiny DistilBERT classifier fixture (three
labels from its id2label), compared with the logits transformers gave (reference.jsonl): softmax
scores by default, raw logits with raw_scores, one list for one input and a list of lists for a
batch, labels by name, highest first. Routes that do not fit a model kind are refused naming it.
The same for two decoder sequence classifiers (Llama's, three labels; Qwen3's, one label, which
also reranks).

    predict_test.py QUIVER SOURCE_DIR
"""

import json
import math
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import serving  # noqa: E402
from serving import check, failures  # noqa: E402

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
FIXTURE = os.path.join(SOURCE, "tests", "fixtures", "tiny", "distilbert_classifier")


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def softmax(v):
    top = max(v)
    e = [math.exp(x - top) for x in v]
    return [x / sum(e) for x in e]


def close(a, b, tol=1e-4):
    scale = max(1.0, max(abs(x) for x in b))
    return all(abs(x - y) <= tol * scale for x, y in zip(a, b))


def main():
    rows = [json.loads(l) for l in open(os.path.join(FIXTURE, "reference.jsonl"), encoding="utf-8")]
    names = ["negative", "neutral", "positive"]
    proc, port, _ = serving.start(QUIVER, FIXTURE, [], prefix="quiver-predict-")
    try:
        status, out = post(port, "/predict", {"inputs": rows[0]["text"]})
        want = softmax(rows[0]["output"])
        got = {d["label"]: d["score"] for d in out} if status == 200 else {}
        check("one text: softmax over the labels, by name, highest first",
              status == 200 and sorted(got) == sorted(names)
              and close([got[n] for n in names], want)
              and [d["score"] for d in out] == sorted((d["score"] for d in out), reverse=True),
              f"{status} {out}")
        status, out = post(port, "/predict", {"inputs": [[r["text"]] for r in rows[:5]],
                                              "raw_scores": True})
        ok = status == 200 and len(out) == 5
        for r, answer in zip(rows[:5], out if ok else []):
            got = {d["label"]: d["score"] for d in answer}
            ok = ok and close([got[n] for n in names], r["output"])
        check("a batch: a list per input, raw logits equal transformers'", ok, f"{status} {out}")
        status, out = post(port, "/predict", {"inputs": ["a question", "an answer"]})
        check("two strings are one pair (as TEI reads them)",
              status == 200 and isinstance(out, list) and isinstance(out[0], dict), f"{status} {out}")
        status, out = post(port, "/embed", {"inputs": "text"})
        check("/embed on a classifier: 400 naming the kind",
              status == 400 and "classifier" in json.dumps(out), f"{status} {out}")
        status, out = post(port, "/rerank", {"query": "q", "texts": ["a"]})
        check("/rerank on a three-label classifier: 400 naming it",
              status == 400 and "classifier" in json.dumps(out), f"{status} {out}")
        status, out = post(port, "/predict", {"inputs": []})
        check("an empty batch is 400", status == 400, f"{status} {out}")
        status, out = post(port, "/predict", {"inputs": [["a", "b", "c"]]})
        check("a sequence of three texts is 422 naming it", status == 422
              and "inputs[0]" in json.dumps(out), f"{status} {out}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # Decoder sequence classifiers: Llama's with three labels; Qwen3's with one (a Qwen3-Reranker
    # seq-cls conversion), whose tokenizer appends its pad token: transformers scores the token
    # before it, and so must the server.
    tiny = os.path.join(SOURCE, "tests", "fixtures", "tiny")
    for name, labels in (("llama_classifier", names), ("qwen3_seq_cls", ["LABEL_0"])):
        fixture = os.path.join(tiny, name)
        rows = [json.loads(l) for l in open(os.path.join(fixture, "reference.jsonl"),
                                            encoding="utf-8")]
        proc, port, _ = serving.start(QUIVER, fixture, [], prefix=f"quiver-predict-{name}-")
        try:
            status, out = post(port, "/predict", {"inputs": [[r["text"]] for r in rows[:4]],
                                                  "raw_scores": True})
            ok = status == 200 and len(out) == 4
            for r, answer in zip(rows[:4], out if ok else []):
                got = {d["label"]: d["score"] for d in answer}
                ok = ok and sorted(got) == sorted(labels) and close([got[n] for n in labels],
                                                                    r["output"])
            check(f"{name}: /predict's raw logits equal transformers'", ok, f"{status} {out}")
            status, out = post(port, "/rerank", {"query": "q", "texts": ["a", "b"]})
            if len(labels) == 1:
                check(f"{name}: one label reranks", status == 200 and len(out) == 2,
                      f"{status} {out}")
            else:
                check(f"{name}: /rerank on three labels is 400 naming the classifier",
                      status == 400 and "classifier" in json.dumps(out), f"{status} {out}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    proc, port, _ = serving.start(QUIVER, os.path.join(SOURCE, "models", "all-MiniLM-L6-v2"), [],
                                  prefix="quiver-predict-minilm-")
    try:
        status, out = post(port, "/predict", {"inputs": "text"})
        check("/predict on an embedding model: 400 naming the kind",
              status == 400 and "embedding model" in json.dumps(out), f"{status} {out}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if failures:
        sys.exit(f"{len(failures)} case(s) failed: {failures}")
    print("predict: all cases passed")


if __name__ == "__main__":
    main()
