"""TEI's /predict against a real `quiver serve` of the tiny DistilBERT classifier fixture (three
labels from its id2label), compared with the logits transformers gave (reference.jsonl): softmax
scores by default, raw logits with raw_scores, one list for one input and a list of lists for a
batch, labels by name, highest first. vLLM's /classify on the same models (probabilities, the top label,
token ids, its refusals). Routes that do not fit a model kind are refused naming it.
The same for two decoder sequence classifiers (Llama's, three labels; Qwen3's, one label, which
also reranks).

    predict_test.py QUIVER SOURCE_DIR
"""

import json
import math
import os
import shutil
import sys
import tempfile
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
    return len(a) == len(b) and all(abs(x - y) <= tol * scale for x, y in zip(a, b))


def classify(port, rows, names):
    """vLLM's /classify on the three-label classifier: probabilities, the top label, token ids."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/info", timeout=30) as r:
        info = json.loads(r.read())
    model, limit = info["model_id"], info["max_input_length"]
    status, out = post(port, "/classify", {"input": rows[0]["text"], "model": model})
    want = softmax(rows[0]["output"])
    top = names[max(range(3), key=lambda k: want[k])]
    ok = status == 200 and out.get("object") == "list" and out["id"].startswith("classify-") \
        and isinstance(out.get("created"), int) and out.get("model") == model
    d = out["data"][0] if ok and len(out["data"]) == 1 else {}
    check("/classify, one text: softmax probabilities, the top label, num_classes, index",
          ok and d.get("index") == 0 and d.get("label") == top and d.get("num_classes") == 3
          and close(d.get("probs", []), want), f"{status} {out}")
    _, pieces = post(port, "/tokenize", {"inputs": rows[0]["text"]})
    ids = [p["id"] for p in pieces[0]]
    card = serving.get_json(port, "/v1/models")[1]["data"][0]
    check("/v1/models: a three-label classifier classifies (Infinity's capabilities)",
          card["capabilities"] == ["classify"] and card["max_model_len"] == limit, str(card))
    check("/classify's usage counts the tokens (special ones included)",
          status == 200 and out["usage"]["prompt_tokens"] == len(ids)
          and out["usage"]["total_tokens"] == len(ids) and out["usage"]["completion_tokens"] == 0,
          f"{out.get('usage')} against {len(ids)} ids")
    status, out = post(port, "/v1/classify", {"input": [r["text"] for r in rows[:5]],
                                              "use_activation": False})
    ok = status == 200 and [d["index"] for d in out["data"]] == list(range(5))
    for r, d in zip(rows[:5], out["data"] if ok else []):
        top = max(range(3), key=lambda k: r["output"][k])
        ok = ok and close(d["probs"], r["output"]) and d["num_classes"] == 3 and d["label"] == names[top]
    check("/v1/classify, five texts, use_activation false: transformers' logits", ok,
          f"{status} {out}")
    status, out = post(port, "/classify", {"input": [ids, rows[0]["text"]], "activation": True})
    ok = status == 200 and len(out["data"]) == 2
    check("/classify of token ids equals the text's", ok and close(out["data"][0]["probs"], want)
          and close(out["data"][1]["probs"], want), f"{status} {out}")
    status, out = post(port, "/classify", {"input": rows[0]["text"] * 200})
    check("/classify of an input over the limit: 400 naming the limit and vLLM's way to truncate",
          status == 400 and out["error"]["param"] == "input" and str(limit) in json.dumps(out)
          and "truncate_prompt_tokens" in json.dumps(out), f"{status} {out}")
    status, out = post(port, "/classify", {"input": rows[0]["text"] * 200,
                                           "truncate_prompt_tokens": -1})
    check("/classify with truncate_prompt_tokens -1: cut to the model's limit",
          status == 200 and out["usage"]["prompt_tokens"] == limit, f"{status} {out} (limit {limit})")
    # Token ids over truncate_prompt_tokens: vLLM keeps their last k unless truncation_side says.
    k = len(ids) - 3
    status, out = post(port, "/classify", {"input": [ids, ids[-k:], ids[:k]], "truncate_prompt_tokens": k,
                                           "use_activation": False})
    got = [d["probs"] for d in out["data"]] if status == 200 else []
    check("/classify of token ids with truncate_prompt_tokens k: their last k ids, as vLLM keeps",
          len(got) == 3 and close(got[0], got[1]) and not close(got[0], got[2])
          and out["usage"]["prompt_tokens"] == 3 * k, f"{status} {out}")
    status, out = post(port, "/classify", {"input": [ids, ids[:k]], "truncate_prompt_tokens": k,
                                           "truncation_side": "right", "use_activation": False})
    got = [d["probs"] for d in out["data"]] if status == 200 else []
    check("/classify with truncation_side right: the first k ids", len(got) == 2 and close(got[0], got[1]),
          f"{status} {out}")
    for body, code, name, what in (
            ({"input": ""}, 400, "input", "an empty text"),
            ({"input": []}, 400, "input", "an empty list"),
            ({"messages": [{"role": "user", "content": "x"}]}, 400, "messages", "a chat request"),
            ({"input": "x", "priority": 1}, 422, "priority", "a priority"),
            ({"input": "x", "use_activation": "yes"}, 422, "use_activation", "a non-boolean"),
            ({"input": "x", "use_activation": True, "softmax": False}, 422, "softmax", "two names disagreeing"),
            ({"input": "x", "truncation_side": "middle"}, 422, "truncation_side", "a side"),
            ({"input": [[7, 2147483647]]}, 400, "vocabulary", "an id past the vocabulary"),
            ({"input": "x", "model": "other"}, 404, "other", "another model")):
        status, out = post(port, "/classify", body)
        check(f"/classify refuses {what}: {code} naming it", status == code
              and name in json.dumps(out) and "error" in out, f"{status} {out}")


def problem_types(rows, names):
    """The classifier's folder with config.json's problem_type set: vLLM's /classify answers a
    multi-label model with a sigmoid per label and a regression one with the logits; TEI's /predict
    keeps its softmax."""
    with tempfile.TemporaryDirectory(prefix="quiver-problem-type-") as tmp:
        for problem, want in (("multi_label_classification", lambda v: [1 / (1 + math.exp(-x)) for x in v]),
                              ("regression", lambda v: list(v))):
            folder = os.path.join(tmp, problem)
            shutil.copytree(FIXTURE, folder)
            config = json.load(open(os.path.join(folder, "config.json")))
            config["problem_type"] = problem
            json.dump(config, open(os.path.join(folder, "config.json"), "w"))
            proc, port, _ = serving.start(QUIVER, folder, [], prefix=f"quiver-{problem}-")
            try:
                status, out = post(port, "/classify", {"input": [r["text"] for r in rows[:3]]})
                ok = status == 200 and len(out["data"]) == 3
                for r, d in zip(rows[:3], out["data"] if ok else []):
                    top = max(range(3), key=lambda k: r["output"][k])
                    ok = ok and close(d["probs"], want(r["output"])) and d["label"] == names[top]
                check(f"/classify of a {problem} model: vLLM's activation for it", ok, f"{status} {out}")
                status, out = post(port, "/predict", {"inputs": rows[0]["text"]})
                got = {d["label"]: d["score"] for d in out} if status == 200 else {}
                check(f"/predict of a {problem} model: TEI's softmax still",
                      sorted(got) == sorted(names)
                      and close([got[n] for n in names], softmax(rows[0]["output"])), f"{status} {out}")
            finally:
                proc.terminate()
                proc.wait(timeout=30)


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
        classify(port, rows, names)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    problem_types(rows, names)
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
            status, out = post(port, "/classify", {"input": [r["text"] for r in rows[:4]]})
            ok = status == 200 and len(out.get("data", [])) == 4
            for r, d in zip(rows[:4], out["data"] if ok else []):
                want = ([1 / (1 + math.exp(-r["output"][0]))] if len(labels) == 1
                        else softmax(r["output"]))
                ok = ok and d["num_classes"] == len(labels) and close(d["probs"], want) \
                    and d["label"] == labels[max(range(len(want)), key=lambda k: want[k])]
            check(f"{name}: /classify's probabilities ({'sigmoid' if len(labels) == 1 else 'softmax'})"
                  " and labels from transformers' logits", ok, f"{status} {out}")
            status, out = post(port, "/rerank", {"query": "q", "texts": ["a", "b"]})
            if len(labels) == 1:
                check(f"{name}: one label reranks", status == 200 and len(out) == 2,
                      f"{status} {out}")
                # vLLM's use_activation false: the logits, on /score and /v1/rerank.
                status, scored = post(port, "/score", {"queries": "q", "documents": ["a", "b"]})
                status2, raw = post(port, "/score", {"queries": "q", "documents": ["a", "b"],
                                                     "use_activation": False})
                ok = status == status2 == 200
                for s, r in zip(scored.get("data", []) if ok else [], raw.get("data", [])):
                    ok = ok and abs(s["score"] - 1 / (1 + math.exp(-r["score"]))) < 1e-5
                check(f"{name}: /score with use_activation false gives the logits the default "
                      "passes through a sigmoid", ok, f"{scored} {raw}")
                status, rr = post(port, "/v1/rerank", {"query": "q", "documents": ["a", "b"],
                                                       "use_activation": False})
                got = sorted(r["relevance_score"] for r in rr.get("results", []))
                check(f"{name}: /v1/rerank with use_activation false: the same logits",
                      status == 200 and close(got, sorted(r["score"] for r in raw["data"])),
                      f"{rr}")
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
        status, out = post(port, "/classify", {"input": "text"})
        check("/classify on an embedding model: 400 naming the kind",
              status == 400 and "embedding model" in json.dumps(out), f"{status} {out}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if failures:
        sys.exit(f"{len(failures)} case(s) failed: {failures}")
    print("predict: all cases passed")


if __name__ == "__main__":
    main()
