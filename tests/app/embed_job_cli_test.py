#!/usr/bin/env python3
"""`quiver embed` as a re-indexing job, against real processes (standard library only):

  - killed (SIGKILL) at a random point and run again: the outputs (.npy + ids, and JSON lines)
    are byte-identical to an uninterrupted run's;
  - --shard I/N for N = 3 (and --shards N with JOB_COMPLETION_INDEX): the shards' rows and ids,
    concatenated in order, are the unsharded output's; JSON lines shards concatenate byte for byte;
  - --workers with 3 local `quiver worker`s: byte-identical to the local engine;
  - progress: a bar redrawn in place under a pseudo-terminal (`script`), log lines otherwise;
  - a checkpoint from another input is refused, naming --restart; bad flags exit 2.

    embed_job_cli_test.py QUIVER_BINARY MODEL_DIR CORPUS_DIR [RECORDS]

The input is corpus/queries.jsonl, docs_en.jsonl and docs_multi.jsonl in that order, cut to the
first RECORDS records (default 3200: every query and about 300 documents, so that a pass takes
seconds in CI); RECORDS=0 takes the whole corpus (5,766 records; docs/benchmarks.md reports that
run). QUIVER_EMBED_TEST_SEED fixes the kill point.
"""

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

QUIVER, MODEL, CORPUS = sys.argv[1:4]
RECORDS = int(sys.argv[4]) if len(sys.argv) > 4 else 3200
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
from serving import check, finish, start_worker  # noqa: E402


def embed(*args, env=None, timeout=900):
    return subprocess.run([QUIVER, "embed", "--model", MODEL, "--progress", "off", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def npy_rows(path):
    """(header, data bytes) of a .npy file."""
    raw = open(path, "rb").read()
    n = 10 + raw[8] + 256 * raw[9]
    return raw[:n].decode("latin1"), raw[n:]


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def main():
    work = tempfile.mkdtemp(prefix="quiver-embed-job-")
    src = os.path.join(work, "corpus.jsonl")
    n = 0
    with open(src, "w", encoding="utf-8") as out:
        for name in ("queries.jsonl", "docs_en.jsonl", "docs_multi.jsonl"):
            for line in open(os.path.join(CORPUS, name), encoding="utf-8"):
                if RECORDS and n >= RECORDS:
                    break
                row = json.loads(line)
                out.write(json.dumps({"id": row["id"], "text": row["text"]}, ensure_ascii=False)
                          + "\n")
                n += 1
    print(f"input: {n} records from {CORPUS}")

    # The reference: one uninterrupted run.
    ref = os.path.join(work, "ref.npy")
    t = time.time()
    r = embed("--input", src, "--output", ref)
    ref_seconds = time.time() - t
    check("an uninterrupted run succeeds", r.returncode == 0, r.stderr[-500:])
    if r.returncode != 0:
        sys.exit(1)
    header, ref_rows = npy_rows(ref)
    ref_ids = read(ref[:-4] + ".ids.jsonl")
    check("the .npy has one row per record", f"'shape': ({n}, 384)" in header, header)
    check("the ids file has one id per record, in order",
          ref_ids.decode().splitlines()[:2] == [json.dumps(json.loads(l)["id"]) for l in
                                               open(src, encoding="utf-8")][:2]
          and len(ref_ids.decode().splitlines()) == n)
    check("no checkpoint is left after a finished run", not os.path.exists(ref + ".checkpoint"))
    print(f"reference: {ref_seconds:.1f} s")

    # Killed at a random point, then run again.
    seed = int(os.environ.get("QUIVER_EMBED_TEST_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    out = os.path.join(work, "killed.npy")
    kills = 0
    for attempt in range(4):
        proc = subprocess.Popen([QUIVER, "embed", "--model", MODEL, "--progress", "off",
                                 "--input", src, "--output", out, "--restart"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Once the first checkpoint is there, a random point up to 70% of an uninterrupted run.
        started = time.time()
        while proc.poll() is None and not os.path.exists(out + ".checkpoint") \
                and time.time() - started < ref_seconds:
            time.sleep(0.01)
        delay = rng.uniform(0.0, max(0.0, 0.7 * ref_seconds - (time.time() - started)))
        time.sleep(delay)
        delay = time.time() - started
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        cp = out + ".checkpoint"
        if proc.returncode == -signal.SIGKILL and os.path.exists(cp):
            done = json.loads(read(cp, "r"))["records_done"]
            print(f"killed after {delay:.1f} s (seed {seed}): checkpoint at {done} of {n} records,"
                  f" {os.path.getsize(out)} bytes on disk")
            kills += 1
            break
    check("the job was killed mid-way with a checkpoint written", kills == 1)
    r = embed("--input", src, "--output", out)
    check("the killed job, run again, finishes", r.returncode == 0, r.stderr[-500:])
    check("... saying it resumes", "resuming" in r.stderr, r.stderr[-500:])
    check("killed + resumed .npy is byte-identical to the uninterrupted run",
          read(out) == read(ref))
    check("... and so are its ids", read(out[:-4] + ".ids.jsonl") == ref_ids)

    # JSON lines output: killed and resumed (the first 1,000 records, a faster pass).
    small = os.path.join(work, "small.jsonl")
    with open(small, "w", encoding="utf-8") as f:
        f.writelines(open(src, encoding="utf-8").readlines()[:1000])
    ref_jl = os.path.join(work, "ref.out.jsonl")
    r = embed("--input", small, "--output", ref_jl, "--max-batch-tokens", "512")
    check("JSON lines output", r.returncode == 0, r.stderr[-300:])
    first = json.loads(read(ref_jl, "r").splitlines()[0])
    check("JSON lines rows carry id, index and embedding",
          first["id"] == json.loads(open(small).readline())["id"] and first["index"] == 0
          and len(first["embedding"]) == 384, str(first)[:200])
    out_jl = os.path.join(work, "killed.out.jsonl")
    resumed = False
    for attempt in range(6):
        # A checkpoint after every batch: the run is short, and it must be cut inside it.
        proc = subprocess.Popen([QUIVER, "embed", "--model", MODEL, "--progress", "off",
                                 "--input", small, "--output", out_jl, "--max-batch-tokens",
                                 "512", "--restart", "--checkpoint-interval", "0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None \
                and not os.path.exists(out_jl + ".checkpoint"):
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if os.path.exists(out_jl + ".checkpoint"):
            resumed = True
            break
    r = embed("--input", small, "--output", out_jl, "--max-batch-tokens", "512",
              "--checkpoint-interval", "0")
    check("JSON lines: killed mid-way with a checkpoint written", resumed)
    check("JSON lines: killed + resumed is byte-identical to the uninterrupted run",
          r.returncode == 0 and "resuming" in r.stderr and read(out_jl) == read(ref_jl),
          r.stderr[-300:])

    # Shards.
    rows, ids = b"", b""
    for i in range(3):
        part = os.path.join(work, "part-{shard}.npy")
        r = embed("--input", src, "--output", part, "--shard", f"{i}/3")
        check(f"--shard {i}/3", r.returncode == 0, r.stderr[-300:])
        rows += npy_rows(part.replace("{shard}", str(i)))[1]
        ids += read(os.path.join(work, f"part-{i}.ids.jsonl"))
    check("--shard I/3: the shards' rows concatenated are the unsharded rows", rows == ref_rows)
    check("--shard I/3: the shards' ids concatenated are the unsharded ids", ids == ref_ids)
    env = dict(os.environ, JOB_COMPLETION_INDEX="1")
    job = os.path.join(work, "job.npy")
    r = embed("--input", src, "--output", job, "--shards", "3", env=env)
    check("--shards 3 with JOB_COMPLETION_INDEX=1 is --shard 1/3",
          r.returncode == 0 and read(job) == read(os.path.join(work, "part-1.npy")),
          r.stderr[-300:])
    parts = b""
    for i in range(4):
        p = os.path.join(work, f"jl-{i}.jsonl")
        r = embed("--input", small, "--output", p, "--shard", f"{i}/4")
        parts += read(p)
    check("JSON lines shards concatenated are the unsharded output, byte for byte",
          parts == read(ref_jl))

    # Through 3 workers.
    ports = []
    workers = []
    try:
        for _ in range(3):
            proc, port = start_worker(QUIVER, MODEL, work, ["--max-batch-tokens", "2048"])
            workers.append(proc)
            ports.append(port)
        via = os.path.join(work, "workers.npy")
        r = embed("--input", src, "--output", via, "--workers",
                  ",".join(f"127.0.0.1:{p}" for p in ports))
        check("--workers (3 workers) succeeds", r.returncode == 0, r.stderr[-500:])
        check("--workers: byte-identical to the local engine",
              read(via) == read(ref) and read(via[:-4] + ".ids.jsonl") == ref_ids)
    finally:
        for proc in workers:
            proc.kill()
            proc.wait()

    # A worker that answers ModelInfo but never says SERVING (a fidelity gate it cannot meet):
    # the job waits for one to pass its health check up to --startup-timeout, then stops naming
    # why. It sent batches at once before, which failed "no healthy replica" and spent 31 s of
    # retries (1 + 2 + 4 + 8 + 16 s) before the job stopped.
    proc, port = start_worker(QUIVER, MODEL, work, ["--quantize", "int8",
                                                    "--min-int8-cosine", "0.999999"])
    try:
        t0 = time.time()
        r = embed("--input", small, "--output", os.path.join(work, "never.npy"), "--workers",
                  f"127.0.0.1:{port}", "--startup-timeout", "3")
        took = time.time() - t0
        check("--workers that never pass their health check: exit 1 at --startup-timeout, "
              "naming it", r.returncode == 1 and "none passed its health check" in r.stderr
              and "--startup-timeout 3 s" in r.stderr and took < 20,
              f"exit {r.returncode} after {took:.1f} s: {r.stderr[-400:]}")
    finally:
        proc.kill()
        proc.wait()

    # Progress under a pseudo-terminal, and as log lines without one.
    tty_out = os.path.join(work, "tty.txt")
    cmd = (f"{QUIVER} embed --model {MODEL} --input {small} --output {work}/tty.npy "
           f"--max-batch-tokens 256")
    r = subprocess.run(["script", "-qefc", cmd, tty_out], capture_output=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    shown = read(tty_out).decode("utf-8", "replace")
    bar = re.findall(r"\r\x1b\[K\[[#.]+\] [\d,]+/1,000 items \([\d.]+%\) \| [\d,]+ tokens/s \| "
                     r"ETA \S+", shown)
    check("under a terminal: a progress bar redrawn in place (items, tokens/s, ETA)",
          r.returncode == 0 and len(bar) >= 2 and "1,000/1,000 items (100.0%)" in shown,
          repr(shown[-400:]))
    r = subprocess.run([QUIVER, "embed", "--model", MODEL, "--input", small, "--output",
                        f"{work}/log.npy", "--progress-interval", "1", "--max-batch-tokens", "256"],
                       capture_output=True, text=True, timeout=300)
    check("without a terminal: progress as log lines",
          r.returncode == 0 and "\r" not in r.stderr and
          re.search(r"quiver embed: 1,000/1,000 items \(100\.0%\) \| [\d,]+ tokens/s \| ETA 0s "
                    r"\| done in", r.stderr) is not None, r.stderr[-400:])

    # A checkpoint that belongs to another job; bad flags.
    proc = subprocess.Popen([QUIVER, "embed", "--model", MODEL, "--progress", "off", "--input",
                             small, "--output", f"{work}/other.npy", "--max-batch-tokens", "256",
                             "--checkpoint-interval", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None \
            and not os.path.exists(f"{work}/other.npy.checkpoint"):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if os.path.exists(f"{work}/other.npy.checkpoint"):
        r = embed("--input", src, "--output", f"{work}/other.npy")
        check("a checkpoint from another input is refused (exit 2), naming --restart",
              r.returncode == 2 and "--restart" in r.stderr, r.stderr[-300:])
        r = embed("--input", small, "--output", f"{work}/other.npy", "--max-batch-tokens", "256",
                  "--restart")
        check("--restart starts over", r.returncode == 0 and npy_rows(f"{work}/other.npy")[1]
              == npy_rows(ref)[1][:1000 * 384 * 4], r.stderr[-300:])
    else:
        check("the job wrote a checkpoint before it finished", False)
    # --restart with a checkpoint from another job: removed at once, the new job runs.
    r = embed("--input", small, "--output", f"{work}/other.npy", "--max-batch-tokens", "256",
              "--restart")
    check("--restart leaves no checkpoint of the old job behind",
          r.returncode == 0 and not os.path.exists(f"{work}/other.npy.checkpoint"), r.stderr[-300:])
    for args, needle in ((["--shard", "3/3"], "--shard"), (["--shard", "x"], "--shard"),
                         (["--shards", "2"], "JOB_COMPLETION_INDEX")):
        env = {k: v for k, v in os.environ.items() if k != "JOB_COMPLETION_INDEX"}
        r = embed("--input", small, "--output", f"{work}/bad.npy", *args, env=env)
        check(f"{' '.join(args)} exits 2 naming {needle}",
              r.returncode == 2 and needle in r.stderr, r.stderr[-300:])
    bad = os.path.join(work, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"text": "fine"}\n{"id": 3, "txt": "typo"}\n')
    r = embed("--input", bad, "--output", f"{work}/bad.npy")
    check("a bad input line exits 2 naming the file and line",
          r.returncode == 2 and "bad.jsonl:2" in r.stderr, r.stderr[-300:])

    huge = os.path.join(work, "huge.txt")
    with open(huge, "w") as f:
        f.write("a short line\n" + "x" * (65 << 20))  # no newline: one line past the 64 MiB cap
    r = embed("--input", huge, "--output", f"{work}/huge.npy")
    check("a line past 64 MiB exits 2 naming the file and line, not read whole",
          r.returncode == 2 and "huge.txt:2" in r.stderr and "64 MiB" in r.stderr,
          r.stderr[-300:])
    os.remove(huge)

    finish("embed job", work)


if __name__ == "__main__":
    main()
