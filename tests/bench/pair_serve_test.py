"""bench/pair_serve.py, which times two `quiver serve` configurations in turns: with the default
model it runs every kind of workload (the queries, a text set, concurrent clients) for each
configuration in every round, prints each one's median and ratio, writes every block's median,
and refuses fewer than two configurations or two of one name.

    pair_serve_test.py <quiver> <source dir> <quiver_http_bench>
"""

import json
import os
import subprocess
import sys
import tempfile

QUIVER, SOURCE, HTTP_BENCH = sys.argv[1], sys.argv[2], sys.argv[3]
SCRIPT = os.path.join(SOURCE, "bench", "pair_serve.py")
MODEL = os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def run(inputs, out, configs, timeout=300):
    command = [sys.executable, SCRIPT, "--quiver", QUIVER, "--http-bench", HTTP_BENCH,
               "--model", MODEL, "--inputs", inputs, "--threads", "1", "--rounds", "2",
               "--workloads", "queries,3,c2", "--block", "3", "--seconds", "0.5", "--out", out]
    for c in configs:
        command += ["--config", c]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        inputs = os.path.join(tmp, "inputs.json")
        with open(inputs, "w") as f:
            json.dump({"sets": {"3": ["alpha beta gamma", "one two three"],
                                "128": ["a longer text for the concurrent clients"]},
                       "queries": ["find files", "print lines"]}, f)
        out = os.path.join(tmp, "out.json")
        done = run(inputs, out, ["sleep=--spin-wait-us 0", "poll=--spin-wait-us 500"])
        check(done.returncode == 0, f"two configurations run (exit {done.returncode}): "
                                    f"{done.stderr[-500:]}")
        lines = done.stdout.splitlines()
        for workload in ("queries", "3", "c2"):
            rows = [line.split() for line in lines if line.split()[:1] == [workload]]
            check(len(rows) == 2 and rows[0][1] == "sleep:" and rows[1][1] == "poll:",
                  f"{workload}: one line per configuration: {rows}")
            check(len(rows) == 2 and "ratio" in rows[1], f"{workload}: the second has a ratio")
        if os.path.exists(out):
            with open(out) as f:
                medians = json.load(f)["block_medians_ms"]
            check(all(len(medians[w][c]) == 2 and all(v > 0 for v in medians[w][c])
                      for w in ("queries", "3", "c2") for c in ("sleep", "poll")),
                  "every block's median written, two rounds each")
        else:
            check(False, "the --out file is written")
        one = run(inputs, out, ["alone=--spin-wait-us 0"], timeout=60)
        check(one.returncode != 0 and "two or more" in one.stderr + one.stdout,
              f"one configuration is refused: {one.stderr[-300:]}")
        twice = run(inputs, out, ["a=--spin-wait-us 0", "a=--spin-wait-us 10"], timeout=60)
        check(twice.returncode != 0 and "distinct names" in twice.stderr + twice.stdout,
              f"two of one name are refused: {twice.stderr[-300:]}")
    if FAILURES:
        sys.exit(f"{len(FAILURES)} failed")
    print("pair_serve: all passed")


if __name__ == "__main__":
    main()
