"""TEI's /embed_all against real `quiver serve` processes: per input, every token's last hidden
state. all-MiniLM-L6-v2 pools by the mean over every token (its special ones included) and then
normalizes, so the normalized mean of an input's /embed_all rows must be sentence-transformers'
embedding of it (tests/fixtures/minilm/embeddings.jsonl, made by tools/golden/) and its row count
the input's /tokenize count. The tiny bert_dense fixture has a Dense module after its pooling: its
/embed_all rows are the encoder's width (before the Dense module), its /embed the Dense width.
Limits and refusals: 'normalize' and 'dimensions' do not apply, an empty batch, an answer over
8,388,608 values (413), a scoring model (400 naming /rerank).

    embed_all_test.py QUIVER SOURCE_DIR
"""

import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import serving  # noqa: E402
from serving import check, failures  # noqa: E402

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
MINILM = os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")
TINY = os.path.join(SOURCE, "tests", "fixtures", "tiny")


def request(port, path, body):
    return serving.post_json(port, path, body, timeout=120)


def normalized_mean(rows):
    mean = [sum(r[j] for r in rows) / len(rows) for j in range(len(rows[0]))]
    norm = math.sqrt(sum(v * v for v in mean))
    return [v / norm for v in mean]


def minilm():
    with open(os.path.join(SOURCE, "tests", "fixtures", "minilm", "embeddings.jsonl"),
              encoding="utf-8") as f:
        refs = [json.loads(line) for line in f][:24]
    proc, port, _ = serving.start(QUIVER, MINILM, ["--threads", "2"], prefix="quiver-embed-all-")
    try:
        status, out = request(port, "/embed_all", {"inputs": [r["text"] for r in refs]})
        ok = status == 200 and isinstance(out, list) and len(out) == len(refs)
        check("one list of token rows per input", ok, f"{status} {str(out)[:200]}")
        if not ok:
            return
        check("each input's rows are its tokens (the special ones included)",
              all(len(rows) == len(r["ids"]) for rows, r in zip(out, refs)),
              str([(len(rows), len(r["ids"])) for rows, r in zip(out, refs)][:5]))
        check("every row has the model's 384 values",
              all(len(row) == 384 for rows in out for row in rows))
        worst = max(max(abs(a - b) for a, b in zip(normalized_mean(rows), r["embedding"]))
                    for rows, r in zip(out, refs))
        check("the normalized mean of the rows is sentence-transformers' embedding (1e-5)",
              worst <= 1e-5, f"max |difference| {worst}")
        status, one = request(port, "/embed_all", {"inputs": refs[0]["text"]})
        check("a single input answers a list of one", status == 200 and len(one) == 1 and
              max(abs(a - b) for a, b in zip(one[0][0], out[0][0])) <= 1e-6, f"{status}")
        status, toks = request(port, "/tokenize", {"inputs": refs[1]["text"]})
        check("rows match /tokenize's count", status == 200 and len(toks[0]) == len(out[1]),
              f"{status} {len(toks[0]) if status == 200 else toks}")

        for field, value in (("normalize", True), ("dimensions", 8)):
            status, err = request(port, "/embed_all", {"inputs": "x", field: value})
            check(f"'{field}' is refused naming it", status == 400 and field in err.get("error", ""),
                  f"{status} {err}")
        status, err = request(port, "/embed_all", {"inputs": "x", "normalize": None})
        check("a null 'normalize' is as not sent", status == 200, f"{status} {err}")
        status, err = request(port, "/embed_all", {"inputs": []})
        check("an empty batch is 400", status == 400 and err.get("error_type") == "Empty",
              f"{status} {err}")
        # 100 inputs cut to 256 tokens: 25,600 x 384 = 9,830,400 values, over the 8,388,608.
        status, err = request(port, "/embed_all",
                              {"inputs": ["word " * 400] * 100, "truncate": True})
        check("an answer over 8,388,608 values is 413 naming the limit",
              status == 413 and "8388608" in err.get("error", ""), f"{status} {err}")
        status, err = request(port, "/embed_all", {"inputs": ["word " * 400]})
        check("an input over the model's length without truncate is 413", status == 413,
              f"{status} {err}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def dense_model():
    folder = os.path.join(TINY, "bert_dense")
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        hidden = json.load(f)["hidden_size"]
    proc, port, _ = serving.start(QUIVER, folder, [], prefix="quiver-embed-all-dense-")
    try:
        status, rows = request(port, "/embed_all", {"inputs": ["a short text", "another one"]})
        status2, pooled = request(port, "/embed", {"inputs": ["a short text"]})
        check("a Dense model's rows are the encoder's width, before the Dense module",
              status == 200 and status2 == 200 and all(len(r) == hidden for x in rows for r in x)
              and len(pooled[0]) != hidden,
              f"{status} {status2} rows {len(rows[0][0]) if status == 200 else rows} "
              f"/embed {len(pooled[0]) if status2 == 200 else pooled} hidden {hidden}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def scoring_model():
    proc, port, _ = serving.start(QUIVER, os.path.join(TINY, "bert_cross_encoder"), [],
                                  prefix="quiver-embed-all-scorer-")
    try:
        status, err = request(port, "/embed_all", {"inputs": "x"})
        check("a scoring model refuses /embed_all naming /rerank",
              status == 400 and "/rerank" in err.get("error", ""), f"{status} {err}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main():
    minilm()
    dense_model()
    scoring_model()
    if failures:
        print(f"embed_all: {len(failures)} failed: {failures}")
        return 1
    print("embed_all: all cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
