#!/usr/bin/env python3
"""A soak at saturation through `quiver serve`: 16 clients with mixed request sizes (1 to 64
inputs of 20 to 2,000 characters from the corpus, over /v1/embeddings, /embed and /rerank), each
sending its next request as soon as the last is answered, for --minutes (30). Every answer is
checked (status 200, one row per input, finite values); the server's RSS is sampled every 5 s.
Reports errors, RSS growth after the first 5 minutes (RSS at the end against RSS at 5 minutes) and
the p50 / p99 latency of the first and the last 5 minutes, as JSON and Markdown under --out.

    scripts/soak.py --quiver build/quiver --model models/all-MiniLM-L6-v2 [--minutes 30]
        [--serve-arg=--quantize --serve-arg=int8]

Standard library only. Not part of `make test` (it takes half an hour); docs/reliability.md has
the last run.
"""

import argparse
import http.client
import json
import math
import os
import platform
import random
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "gateway"))
import serving  # noqa: E402


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])
    return 0


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(math.ceil(q * len(v))) - 1)]


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quiver", default="build/quiver")
    ap.add_argument("--model", default="models/all-MiniLM-L6-v2")
    ap.add_argument("--corpus", default="corpus")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--out", default="out/soak")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="one more argument for quiver serve (repeatable), e.g. "
                         "--serve-arg=--quantize --serve-arg=int8")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    texts = []
    for name in ("docs_multi.jsonl", "queries.jsonl"):
        with open(os.path.join(args.corpus, name), encoding="utf-8") as f:
            texts += [json.loads(l)["text"] for l in f]
    proc, port, log = serving.start(args.quiver, args.model,
                                    ["--max-inputs", "256", *args.serve_arg],
                                    prefix="quiver-soak-")
    start = time.time()
    end = start + args.minutes * 60
    lock = threading.Lock()
    records = []  # (t, seconds, ok)
    errors = []
    rss = []  # (t, kB)

    def client(k):
        rng = random.Random(args.seed * 100 + k)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.time() < end:
            n = rng.choice([1, 1, 1, 2, 4, 8, 16, 32, 64])
            batch = []
            for _ in range(n):
                t = texts[rng.randrange(len(texts))]
                cut = rng.choice([20, 80, 300, 1000, 2000])
                batch.append(t[:cut])
            kind = rng.random()
            if kind < 0.5:
                path, body = "/v1/embeddings", {"input": batch, "truncate": True}
            elif kind < 0.85:
                path, body = "/embed", {"inputs": batch, "truncate": True}
            else:
                path, body = "/rerank", {"query": batch[0][:200], "texts": batch, "truncate": True}
            data = json.dumps(body, ensure_ascii=False).encode()
            t0 = time.time()
            ok, why = False, ""
            try:
                conn.request("POST", path, data, {"Content-Type": "application/json"})
                r = conn.getresponse()
                payload = r.read()
                if r.status != 200:
                    why = f"{r.status} {payload[:200]!r}"
                else:
                    out = json.loads(payload)
                    rows = (out["data"] if path == "/v1/embeddings" else out)
                    if len(rows) != n:
                        why = f"{len(rows)} rows for {n} inputs"
                    elif path == "/v1/embeddings":
                        ok = all(math.isfinite(x) for d in rows for x in d["embedding"])
                    elif path == "/embed":
                        ok = all(math.isfinite(x) for row in rows for x in row)
                    else:
                        ok = all(math.isfinite(d["score"]) for d in rows)
                    if not ok and not why:
                        why = "non-finite values"
            except Exception as e:  # noqa: BLE001 - every failure is counted
                why = repr(e)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            took = time.time() - t0
            with lock:
                records.append((t0 - start, took, ok))
                if not ok:
                    errors.append(f"{t0 - start:.0f}s {path}: {why}")

    def sampler():
        while time.time() < end:
            rss.append((time.time() - start, rss_kb(proc.pid)))
            time.sleep(5)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    threads.append(threading.Thread(target=sampler))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rss.append((time.time() - start, rss_kb(proc.pid)))
    proc.terminate()
    proc.wait(timeout=60)

    window = 5 * 60 if args.minutes >= 15 else args.minutes * 60 / 3
    total = time.time() - start
    first = [s for t, s, ok in records if t < window]
    last = [s for t, s, ok in records if t >= total - window]
    rss_at_window = next((kb for t, kb in rss if t >= window), rss[-1][1])
    result = {
        "cpu": cpu_model(),
        "minutes": args.minutes,
        "clients": args.clients,
        "serve_args": args.serve_arg,
        "requests": len(records),
        "errors": len(errors),
        "first_errors": errors[:10],
        "rss_kb_start": rss[0][1],
        "rss_kb_at_window": rss_at_window,
        "rss_kb_end": rss[-1][1],
        "rss_kb_max": max(kb for _, kb in rss),
        "rss_growth_after_window": rss[-1][1] / rss_at_window - 1,
        "window_s": window,
        "first_window": {"requests": len(first), "p50_ms": percentile(first, 0.5) * 1e3,
                         "p99_ms": percentile(first, 0.99) * 1e3},
        "last_window": {"requests": len(last), "p50_ms": percentile(last, 0.5) * 1e3,
                        "p99_ms": percentile(last, 0.99) * 1e3},
        "rss_samples": rss,
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
    }
    result["p99_change"] = result["last_window"]["p99_ms"] / result["first_window"]["p99_ms"] - 1
    result["passed"] = (result["errors"] == 0 and result["rss_growth_after_window"] < 0.10 and
                        abs(result["p99_change"]) <= 0.20)
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump(result, f, indent=1)
    summary = (
        f"soak: {args.minutes:g} min, {args.clients} clients, {len(records)} requests, "
        f"{len(errors)} errors; RSS {rss[0][1] / 1024:.0f} MB at start, "
        f"{rss_at_window / 1024:.0f} MB at {window / 60:.1f} min, {rss[-1][1] / 1024:.0f} MB at the end "
        f"(growth {result['rss_growth_after_window'] * 100:+.1f}%, max {result['rss_kb_max'] / 1024:.0f} MB); "
        f"p50/p99 first {window / 60:.1f} min {result['first_window']['p50_ms']:.0f}/"
        f"{result['first_window']['p99_ms']:.0f} ms, last {result['last_window']['p50_ms']:.0f}/"
        f"{result['last_window']['p99_ms']:.0f} ms (p99 {result['p99_change'] * 100:+.1f}%); "
        f"{'PASSED' if result['passed'] else 'FAILED'} ({result['cpu']}, commit {result['commit']})")
    print(summary)
    with open(os.path.join(args.out, "soak.md"), "w") as f:
        f.write(summary + "\n")
    sys.exit(0 if result["passed"] else 1)


if __name__ == "__main__":
    main()
