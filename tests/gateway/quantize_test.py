"""`quiver serve --quantize int8` on the default model: the fidelity gate runs at start-up against
the f32 engine and says so in the log (its min cosine); the server becomes ready, and its answers
for the fixture texts stay within the gate's default bound (cosine 0.99) of sentence-transformers'
f32 embeddings. Asked for a bound int8 cannot reach (--min-int8-cosine 0.999999), the server stays
unready (/ready 503) and logs the numbers. --quantize on a GPU device is refused at start-up.
A model folder's quiver.json sets both (the flags win over it); a bad one is refused naming the
key. --quantize bf16: ready through the same gate (bound 0.999) where the CPU has AVX512_BF16,
refused naming it elsewhere. TEI's /info names the dtype served (int8, bfloat16).

    quantize_test.py QUIVER SOURCE_DIR
"""

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import serving  # noqa: E402
from serving import check, failures  # noqa: E402

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def main():
    rows = [json.loads(l) for l in open(os.path.join(SOURCE, "tests", "fixtures", "minilm",
                                                       "embeddings.jsonl"), encoding="utf-8")]
    proc, port, log = serving.start(QUIVER, MODEL, ["--quantize", "int8"], prefix="quiver-int8-")
    try:
        text = open(log).read()
        m = re.search(r"fidelity gate on cpu with int8 weights: .*min cosine ([0-9.]+)", text)
        check("the int8 gate ran at start-up and logged its min cosine", m is not None, text[-600:])
        # Its f32 reference ran and was unloaded before the int8 engine loaded (never both in
        # memory): its line comes before the server's line about the loaded model.
        ref = text.find("the CPU f32 reference ran")
        loaded = text.find("quiver serve: model=")
        check("the gate's f32 reference ran before the int8 engine loaded",
              0 <= ref < loaded, text[:600])
        worst = 1.0
        for i in range(0, 80, 20):
            status, out = serving.post_json(port, "/embed", {
                "inputs": [r["text"] for r in rows[i:i + 20]], "truncate": True}, timeout=120)
            if status != 200:
                worst = -1.0
                break
            worst = min([worst] + [cosine(o, r["embedding"]) for o, r in zip(out, rows[i:i + 20])])
        check(f"80 texts within the gate of sentence-transformers f32 (worst cosine {worst:.5f})",
              worst >= 0.99)
        status, info = serving.get_json(port, "/info")
        check("TEI's /info says model_dtype int8", status == 200
              and info.get("model_dtype") == "int8", str(info)[:300])
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    # With --pooling the gate's f32 reference pools the same way: CLS rows against CLS rows
    # (before, it compared them with the folder's mean rows and refused the load).
    proc, port, log = serving.start(QUIVER, MODEL, ["--quantize", "int8", "--pooling", "cls"],
                                    prefix="quiver-int8-cls-")
    try:
        m = re.search(r"fidelity gate on cpu with int8 weights: .*min cosine ([0-9.]+)",
                      open(log).read())
        check("--quantize int8 --pooling cls: the gate compares CLS rows and passes",
              m is not None and float(m.group(1)) >= 0.99, m.group(0) if m else "")
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    # bf16 weights: served through the same gate (bound 0.999) where the CPU has AVX512_BF16,
    # refused at start-up naming the instruction set where it does not.
    version = subprocess.run([QUIVER, "version"], capture_output=True, text=True).stdout
    if "bf16 weights by" in version:  # vdpbf16ps, or tdpbf16ps tiles
        proc, port, log = serving.start(QUIVER, MODEL, ["--quantize", "bf16"],
                                        prefix="quiver-bf16-")
        try:
            text = open(log).read()
            m = re.search(r"fidelity gate on cpu with bf16 weights: .*min cosine ([0-9.]+)", text)
            check("the bf16 gate ran at start-up and logged its min cosine", m is not None,
                  text[-600:])
            status, out = serving.post_json(port, "/embed", {
                "inputs": [r["text"] for r in rows[:40]], "truncate": True}, timeout=120)
            worst = min(cosine(o, r["embedding"]) for o, r in zip(out, rows[:40])) \
                if status == 200 else -1.0
            check(f"bf16: 40 texts within 0.999 of sentence-transformers f32 (worst {worst:.6f})",
                  worst >= 0.999)
            status, info = serving.get_json(port, "/info")
            check("TEI's /info says model_dtype bfloat16", status == 200
                  and info.get("model_dtype") == "bfloat16", str(info)[:300])
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    else:
        result = subprocess.run([QUIVER, "serve", "--model", MODEL, "--port", "0", "--quantize",
                                 "bf16"], capture_output=True, text=True, timeout=60)
        check("--quantize bf16 without AVX512_BF16 is refused at start-up, naming it",
              result.returncode != 0 and "AVX512_BF16" in result.stderr, result.stderr[-300:])

    log = tempfile.NamedTemporaryFile(prefix="quiver-int8-strict-", suffix=".log", delete=False).name
    proc = subprocess.Popen([QUIVER, "serve", "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                             "--quantize", "int8", "--min-int8-cosine", "0.999999"],
                            stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    try:
        port = int(serving.wait_for(r" port=(\d+) ", log, proc).group(1))
        serving.wait_for(r"not ready", log, proc, seconds=120)
        try:
            status = urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5).status
        except urllib.error.HTTPError as e:
            status = e.code
        text = open(log).read()
        check("a bound int8 cannot reach: /ready 503, the numbers logged",
              status == 503 and "OUTSIDE the bound" in text and "min cosine" in text,
              f"{status} {text[-600:]}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    # The model folder's own settings: a folder of links to the model's files plus quiver.json.
    folder = tempfile.mkdtemp(prefix="quiver-model-settings-")
    for name in os.listdir(MODEL):
        os.symlink(os.path.join(MODEL, name), os.path.join(folder, name))
    with open(os.path.join(folder, "quiver.json"), "w") as f:
        json.dump({"quantize": "int8", "min_int8_cosine": 0.999999}, f)
    log = tempfile.NamedTemporaryFile(prefix="quiver-int8-folder-", suffix=".log",
                                      delete=False).name
    proc = subprocess.Popen([QUIVER, "serve", "--model", folder, "--host", "127.0.0.1", "--port",
                             "0"], stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    try:
        serving.wait_for(r"not ready", log, proc, seconds=120)
        text = open(log).read()
        check("quiver.json's quantize and min_int8_cosine are applied (int8 weights, gate unmet)",
              "weights=int8" in text and "OUTSIDE the bound" in text, text[-600:])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    result = subprocess.run([QUIVER, "embed", "--model", folder, "--quantize", "none",
                             "--text", "a flag given on the command line wins"],
                            capture_output=True, text=True, timeout=120)
    check("--quantize none on the command line wins over quiver.json",
          result.returncode == 0 and "int8" not in result.stderr, result.stderr[-300:])
    with open(os.path.join(folder, "quiver.json"), "w") as f:
        json.dump({"quantise": "int8"}, f)
    result = subprocess.run([QUIVER, "serve", "--model", folder, "--port", "0"],
                            capture_output=True, text=True, timeout=60)
    check("an unknown key in quiver.json is refused at start-up, naming it",
          result.returncode == 2 and "quantise" in result.stderr and "quiver.json" in result.stderr,
          result.stderr[-300:])

    result = subprocess.run([QUIVER, "serve", "--model", MODEL, "--port", "0", "--device", "cuda",
                             "--quantize", "int8"], capture_output=True, text=True, timeout=60)
    check("--quantize int8 with --device cuda is refused at start-up, naming --quantize",
          result.returncode != 0 and "--quantize" in result.stderr, result.stderr[-300:])

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
