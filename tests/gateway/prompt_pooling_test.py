"""Prompts left out of the pooling (sentence-transformers' Pooling include_prompt false, as INSTRUCTOR
and GRIT-style models save it), served end to end: the tiny fixtures bert_prompt_mean,
bert_prompt_weightedmean and bert_prompt_cls (prompts "query" (the default) and "passage"), asked
through TEI's /embed with prompt_name, compared with what sentence-transformers encoded for the same
texts (reference.jsonl); once through `quiver serve`, once through `quiver gateway` in front of a
`quiver worker` (the prompt lengths cross gRPC). An input the prompt fills is refused, naming why.

    prompt_pooling_test.py QUIVER SOURCE_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import serving  # noqa: E402
from serving import check, failures  # noqa: E402

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
TINY = os.path.join(SOURCE, "tests", "fixtures", "tiny")


post = serving.post_json


def unit(v):
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


def relative_error(got, want):
    """After L2 normalization of both: TEI's /embed normalizes by default, and two of the
    references are not normalized (their folders have no Normalize module)."""
    got, want = unit(got), unit(want)
    scale = max(abs(v) for v in want)
    return max(abs(a - b) for a, b in zip(got, want)) / scale


def check_model(port, name, via):
    rows = [json.loads(l) for l in open(os.path.join(TINY, name, "reference.jsonl"),
                                         encoding="utf-8")]
    worst = 0.0
    for i, row in enumerate(rows):
        # "document" is the empty prompt sentence-transformers saves beside the others.
        body = {"inputs": row["text"], "prompt_name": row["prompt_name"] or "document"}
        status, out = post(port, "/embed", body)
        if status != 200 or len(out) != 1 or len(out[0]) != len(row["output"]):
            check(f"{via} {name} row {i}", False, f"{status} {str(out)[:200]}")
            return
        worst = max(worst, relative_error(out[0], row["output"]))
    check(f"{via} {name}: {len(rows)} texts with and without prompts equal "
          f"sentence-transformers' (worst relative error {worst:.2g})", worst <= 1e-4)
    # No prompt_name: the default prompt ("query"), as sentence-transformers applies it.
    query = next(r for r in rows if r["prompt_name"] == "query")
    status, out = post(port, "/embed", {"inputs": query["text"]})
    check(f"{via} {name}: no prompt_name takes the default prompt",
          status == 200 and relative_error(out[0], query["output"]) <= 1e-4,
          f"{status} {str(out)[:200]}")
    # Jina's task names a prompt as prompt_name does.
    passage = next(r for r in rows if r["prompt_name"] == "passage")
    status, out = post(port, "/v1/embeddings", {"input": passage["text"], "task": "passage"})
    check(f"{via} {name}: /v1/embeddings with task passage takes that prompt",
          status == 200 and relative_error(out["data"][0]["embedding"], passage["output"]) <= 1e-4,
          f"{status} {str(out)[:200]}")


def gateway_and_worker(model):
    """A worker serving `model` and a gateway in front of it (chunks of 64 tokens, so that a
    request's texts are split over several): (gateway, worker, the gateway's port)."""
    wlog = tempfile.NamedTemporaryFile(prefix="quiver-prompt-worker-", delete=False).name
    worker = subprocess.Popen([QUIVER, "worker", "--model", model, "--listen", "127.0.0.1:0",
                               "--metrics-port", "-1", "--threads", "1"],
                              stderr=open(wlog, "w"), stdout=subprocess.DEVNULL)
    try:
        wport = int(serving.wait_for(r" port=(\d+) ", wlog, worker).group(1))
        glog = tempfile.NamedTemporaryFile(prefix="quiver-prompt-gateway-", delete=False).name
        gateway = subprocess.Popen([QUIVER, "gateway", "--model", model, "--host", "127.0.0.1",
                                    "--port", "0", "--workers", f"127.0.0.1:{wport}",
                                    "--max-chunk-tokens", "64"],
                                   stderr=open(glog, "w"), stdout=subprocess.DEVNULL)
        try:
            port = int(serving.wait_for(r" port=(\d+) ", glog, gateway).group(1))
            serving.wait_healthy(port, gateway, 1)
            return gateway, worker, port
        except BaseException:
            gateway.terminate()
            raise
    except BaseException:
        worker.terminate()
        raise


def check_concatenated(port, name, modes, via):
    """A model whose Pooling module concatenates `modes`: /info names them, its embeddings (each
    mode's row side by side, then normalized) equal sentence-transformers', late chunking is
    refused naming why, and /embed_all still gives the token rows."""
    rows = [json.loads(l) for l in open(os.path.join(TINY, name, "reference.jsonl"),
                                         encoding="utf-8")]
    info = serving.get_json(port, "/info")[1]
    check(f"{via} {name}: /info's pooling is {modes}",
          info.get("model_type", {}).get("embedding", {}).get("pooling") == modes, str(info)[:300])
    status, out = post(port, "/v1/embeddings", {"input": [r["text"] for r in rows]})
    ok = status == 200 and len(out["data"]) == len(rows)
    worst = max((relative_error(d["embedding"], r["output"]) for d, r in zip(out["data"], rows)),
                default=1.0) if ok else 1.0
    check(f"{via} {name}: {len(rows)} embeddings of {len(rows[0]['output'])} values equal "
          f"sentence-transformers' (worst relative error {worst:.2g})",
          ok and all(len(d["embedding"]) == len(r["output"]) for d, r in zip(out["data"], rows))
          and worst <= 1e-4, f"{status} {str(out)[:200]}")
    status, out = post(port, "/v1/contextualizedembeddings", {"input": [["a chunk", "another"]]})
    check(f"{via} {name}: late chunking is a 400 naming why",
          status == 400 and "late chunking" in json.dumps(out), f"{status} {str(out)[:300]}")
    status, out = post(port, "/embed_all", {"inputs": rows[0]["text"]})
    check(f"{via} {name}: /embed_all gives one row per token, hidden_size wide",
          status == 200 and len(out[0]) == len(rows[0]["ids"]) and len(out[0][0]) == 20,
          f"{status} {str(out)[:200]}")


def check_refusals(port, via):
    # Cut to 20 tokens, the 25-token query prompt leaves nothing of the text to pool.
    status, out = post(port, "/v1/embeddings", {"input": "a text", "truncate_prompt_tokens": 20})
    message = json.dumps(out)
    check(f"{via}: an input the prompt fills is a 400 naming include_prompt",
          status == 400 and "include_prompt" in message and "nothing is left to pool" in message,
          f"{status} {message[:300]}")
    # Cut from the left, a long input loses the prompt first: refused, naming the field.
    long_text = " ".join(["the manual page of a command and its options"] * 40)
    status, out = post(port, "/embed", {"inputs": long_text, "truncate": True,
                                        "truncation_direction": "Left"})
    message = json.dumps(out)
    check(f"{via}: a left cut through the prompt is a 400 naming truncation_direction",
          status == 400 and "truncation_direction" in message and "prompt" in message,
          f"{status} {message[:300]}")
    status, out = post(port, "/embed", {"inputs": long_text, "truncate": True})
    check(f"{via}: the same input cut from the right is answered",
          status == 200 and len(out) == 1, f"{status} {str(out)[:200]}")
    status, out = post(port, "/embed", {"inputs": "a text", "prompt_name": "nope"})
    check(f"{via}: an unknown prompt_name is a 4xx listing the prompts",
          400 <= status < 500 and "passage" in json.dumps(out), f"{status} {str(out)[:300]}")


def main():
    for name in ("bert_prompt_mean", "bert_prompt_weightedmean", "bert_prompt_cls"):
        proc, port, _ = serving.start(QUIVER, os.path.join(TINY, name), [], prefix="quiver-prompt-")
        try:
            check_model(port, name, "serve")
            if name == "bert_prompt_mean":
                check_refusals(port, "serve")
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    # --default-prompt-name passage, and --default-prompt with the passage prompt's text: a
    # request naming no prompt gets it, as sentence-transformers encoded the passage rows.
    model = os.path.join(TINY, "bert_prompt_mean")
    rows = [json.loads(l) for l in open(os.path.join(model, "reference.jsonl"), encoding="utf-8")]
    passages = [r for r in rows if r["prompt_name"] == "passage"]
    config = json.load(open(os.path.join(model, "config_sentence_transformers.json")))
    for flags in (["--default-prompt-name", "passage"],
                  ["--default-prompt", config["prompts"]["passage"]]):
        proc, port, _ = serving.start(QUIVER, model, flags, prefix="quiver-prompt-")
        try:
            status, out = post(port, "/embed", {"inputs": [r["text"] for r in passages]})
            check(f"serve {flags[0]}: a request naming no prompt gets it ({len(passages)} texts)",
                  status == 200 and len(out) == len(passages) and
                  all(relative_error(o, r["output"]) <= 1e-4 for o, r in zip(out, passages)),
                  f"{status} {str(out)[:200]}")
            query = next(r for r in rows if r["prompt_name"] == "query")
            status, out = post(port, "/embed", {"inputs": query["text"], "prompt_name": "query"})
            check(f"serve {flags[0]}: a request's own prompt_name still wins",
                  status == 200 and relative_error(out[0], query["output"]) <= 1e-4,
                  f"{status} {str(out)[:200]}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    bad = subprocess.run([QUIVER, "serve", "--model", model, "--port", "0",
                          "--default-prompt-name", "title"], capture_output=True, text=True,
                         timeout=120)
    check("serve: an unknown --default-prompt-name is refused at start, listing the prompts",
          bad.returncode == 2 and "--default-prompt-name 'title'" in bad.stderr and
          "passage" in bad.stderr, bad.stderr[-300:])

    # The same through a gateway and a worker: prompt lengths travel in the gRPC chunks.
    model = os.path.join(TINY, "bert_prompt_weightedmean")
    gateway, worker, gport = gateway_and_worker(model)
    try:
        check_model(gport, "bert_prompt_weightedmean", "gateway+worker")
        rows = [json.loads(l) for l in open(os.path.join(model, "reference.jsonl"),
                                             encoding="utf-8")]
        passages = [r for r in rows if r["prompt_name"] == "passage"]
        status, out = post(gport, "/embed", {"inputs": [r["text"] for r in passages],
                                             "prompt_name": "passage"})
        ok = status == 200 and len(out) == len(passages) and all(
            relative_error(o, r["output"]) <= 1e-4 for o, r in zip(out, passages))
        check(f"gateway+worker: {len(passages)} prompted texts in one request, over several "
              "chunks, each equal to the reference", ok, f"{status} {str(out)[:200]}")
        check_refusals(gport, "gateway+worker")
    finally:
        for p in (gateway, worker):
            if p is not None:
                p.terminate()
                p.wait(timeout=30)

    # Several pooling modes concatenated (sentence-transformers' Pooling with a list of modes, or
    # the older booleans): served, and through a gateway and a worker.
    proc, port, _ = serving.start(QUIVER, os.path.join(TINY, "bert_concat_pooling"), [],
                                  prefix="quiver-concat-")
    try:
        check_concatenated(port, "bert_concat_pooling", "mean+cls+max", "serve")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    gateway, worker, gport = gateway_and_worker(os.path.join(TINY, "bert_concat_pooling_legacy"))
    try:
        check_concatenated(gport, "bert_concat_pooling_legacy", "cls+max+mean", "gateway+worker")
    finally:
        for p in (gateway, worker):
            p.terminate()
            p.wait(timeout=30)

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
