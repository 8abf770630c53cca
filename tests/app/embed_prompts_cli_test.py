#!/usr/bin/env python3
"""`quiver embed` with sentence-transformers prompts, against real processes (standard library
only), on the tiny fixtures whose folders name prompts ("query", the default_prompt_name;
"passage"; "document", empty) and whose Pooling modules leave the prompt's tokens out
(include_prompt false; cls, mean and weightedmean pooling):

  - without a prompt flag each text gets the folder's default prompt, as sentence-transformers'
    encode does: equal to the reference rows encoded with "query";
  - --prompt-name passage, and --prompt with the passage prompt's text (byte-identical), equal
    to the "passage" rows; --prompt-name document (an empty prompt) to the rows with none;
  - through a `quiver worker` (--workers): byte-identical to the local engine;
  - an unknown --prompt-name exits 2 listing the folder's prompts; --prompt with --prompt-name
    is refused.

    embed_prompts_cli_test.py QUIVER_BINARY SOURCE_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

QUIVER, SOURCE = sys.argv[1:3]
TINY = os.path.join(SOURCE, "tests", "fixtures", "tiny")
FIXTURES = ("bert_prompt_cls", "bert_prompt_mean", "bert_prompt_weightedmean")
PASSAGE = "Represent the document: "  # the fixtures' "passage" prompt (tools/golden)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
from serving import check, finish, start_worker  # noqa: E402


def embed(model, *args):
    return subprocess.run([QUIVER, "embed", "--model", model, "--progress", "off", *args],
                          capture_output=True, text=True, timeout=300)


def worst_error(lines, refs):
    """The largest |difference| to the references, relative to the largest |reference| value."""
    worst = 0.0
    for line, ref in zip(lines, refs):
        got, want = json.loads(line)["embedding"], ref["output"]
        if len(got) != len(want):
            return float("inf")
        scale = max(1.0, max(abs(v) for v in want))
        worst = max(worst, max(abs(a - b) for a, b in zip(got, want)) / scale)
    return worst if len(lines) == len(refs) else float("inf")


def main():
    work = tempfile.mkdtemp(prefix="quiver-embed-prompts-")
    for name in FIXTURES:
        model = os.path.join(TINY, name)
        refs = [json.loads(line) for line in open(os.path.join(model, "reference.jsonl"),
                                                  encoding="utf-8")]
        by_prompt = {}
        for r in refs:
            by_prompt.setdefault(r["prompt_name"], []).append(r)
        outputs = {}
        for prompt_name, flags in (("query", []), ("query", ["--prompt-name", "query"]),
                                   ("passage", ["--prompt-name", "passage"]),
                                   ("passage", ["--prompt", PASSAGE]),
                                   (None, ["--prompt-name", "document"])):
            rows = by_prompt[prompt_name]
            src = os.path.join(work, f"{name}-{prompt_name}.jsonl")
            with open(src, "w", encoding="utf-8") as f:
                for r in rows:
                    f.write(json.dumps({"text": r["text"]}, ensure_ascii=False) + "\n")
            r = embed(model, "--input", src, *flags)
            what = " ".join(flags) or "no prompt flag"
            err = worst_error(r.stdout.splitlines(), rows) if r.returncode == 0 else None
            check(f"{name}, {what}: the {prompt_name or 'unprompted'} rows of "
                  "sentence-transformers within 1e-4", err is not None and err <= 1e-4,
                  f"error {err}; {r.stderr[-300:]}")
            outputs[what] = r.stdout
        check(f"{name}: --prompt with the passage text is --prompt-name passage, byte for byte",
              outputs["--prompt " + PASSAGE] == outputs["--prompt-name passage"])
        check(f"{name}: no flag is --prompt-name query (the default_prompt_name), byte for byte",
              outputs["no prompt flag"] == outputs["--prompt-name query"])

    model = os.path.join(TINY, "bert_prompt_mean")
    src = os.path.join(work, "bert_prompt_mean-passage.jsonl")
    local = embed(model, "--input", src, "--prompt-name", "passage")
    worker, port = start_worker(QUIVER, model, work)
    try:
        via = embed(model, "--input", src, "--prompt-name", "passage", "--workers",
                    f"127.0.0.1:{port}")
        check("--workers with a prompt the pooling leaves out: byte-identical to the local engine",
              via.returncode == 0 and local.returncode == 0 and via.stdout == local.stdout,
              via.stderr[-300:])
    finally:
        worker.kill()
        worker.wait()

    r = embed(model, "--text", "a text", "--prompt-name", "nope")
    check("an unknown --prompt-name exits 2 listing the folder's prompts",
          r.returncode == 2 and "--prompt-name 'nope'" in r.stderr
          and "document, passage, query" in r.stderr, f"{r.returncode} {r.stderr[-300:]}")
    r = embed(model, "--text", "a text", "--prompt-name", "query", "--prompt", "x: ")
    check("--prompt with --prompt-name is refused", r.returncode != 0 and "--prompt" in r.stderr,
          f"{r.returncode} {r.stderr[-300:]}")

    finish("embed prompts", work)


if __name__ == "__main__":
    main()
