"""Resident memory of `quiver serve`: VmRSS and VmHWM (/proc/PID/status) once /ready answers 200
and again after a few requests of corpus texts to /v1/embeddings, per precision. Standard library
only; prints one JSON line per server.

    serve_memory.py --quiver build/quiver [--model models/all-MiniLM-L6-v2]
                    [--quantize none,int8] [--requests 3] [--texts 64] [--chars 700]

Texts: the first requests x texts documents of corpus/docs_en.jsonl, each cut to --chars
characters; the server runs with --auto-truncate (at most the model's input limit) and
--threads 2.
"""

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def memory_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        status = f.read()
    return {k: int(re.search(k + r":\s+(\d+)", status).group(1)) // 1024
            for k in ("VmRSS", "VmHWM")}


def start(quiver, model, quantize):
    log = tempfile.NamedTemporaryFile(prefix="quiver-memory-", suffix=".log", delete=False)
    proc = subprocess.Popen([quiver, "serve", "--model", model, "--host", "127.0.0.1", "--port",
                             "0", "--threads", "2", "--auto-truncate", "--quantize", quantize],
                            stderr=log, stdout=subprocess.DEVNULL)
    for _ in range(1200):
        m = re.search(r" port=(\d+) ", open(log.name).read())
        if m:
            try:
                url = f"http://127.0.0.1:{m.group(1)}/ready"
                if urllib.request.urlopen(url, timeout=5).status == 200:
                    return proc, int(m.group(1))
            except OSError:
                pass
        if proc.poll() is not None:
            raise SystemExit("quiver serve exited: " + open(log.name).read())
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("quiver serve was not ready in 120 s: " + open(log.name).read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quiver", required=True)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--quantize", default="none,int8")
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--chars", type=int, default=700)
    args = ap.parse_args()
    docs = []
    with open(os.path.join(ROOT, "corpus", "docs_en.jsonl"), encoding="utf-8") as f:
        for line in f:
            docs.append(" ".join(json.loads(line)["text"].split())[:args.chars])
            if len(docs) == args.requests * args.texts:
                break
    name = os.path.basename(os.path.normpath(args.model))
    for quantize in args.quantize.split(","):
        proc, port = start(args.quiver, args.model, quantize)
        try:
            ready = memory_mb(proc.pid)
            for i in range(args.requests):
                body = json.dumps({"model": name,
                                   "input": docs[i * args.texts:(i + 1) * args.texts]}).encode()
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", data=body,
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=300) as r:
                    r.read()
            print(json.dumps({"quiver": args.quiver, "quantize": quantize, "ready_mb": ready,
                              "after_requests_mb": memory_mb(proc.pid)}), flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
