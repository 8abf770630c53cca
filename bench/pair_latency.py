"""Batch-1 latency of several engine configurations side by side, in interleaved blocks.

Each configuration is a `quiver_engine_bench --stdin` process (bench/engine_bench.cc), a binary
with optional environment settings, all loaded at once; each round runs, per length, a block of
calls on every configuration in turn (the order rotated each round), the block's first call a
warm-up. Prints, per length, each configuration's median of block medians (ms) and the median of
its round ratios to the first configuration. For one change on a shared, drifting host: builds
before and after it, or one build under two settings (QUIVER_CPU_ISA, QUIVER_PREFETCH_MIN_ROWS).
For differences of a few percent, use --fresh (a new process per configuration and round).

    python3 bench/pair_latency.py --threads 2 --rounds 10 --lengths q,16,32,128 \\
        before=/tmp/bench_before after=build/quiver_engine_bench \\
        after_avx2=build/quiver_engine_bench:QUIVER_CPU_ISA=avx2

A configuration is NAME=BINARY[:VAR=VALUE,...]; a length is a token count the inputs hold
(bench/make_inputs.py), q, the inputs' short search queries (4-20 tokens), or tN: N batches of
the throughput suite's 100 x 128 tokens, four in flight, as ms per batch (--block unused).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys


def start(binary, env, args):
    proc = subprocess.Popen([binary, "--model", args.model, "--inputs", args.inputs,
                             "--threads", str(args.threads), "--stdin",
                             *(["--quantize", args.quantize] if args.quantize else [])],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **env})
    if proc.stdout.readline().strip() != "ready":
        sys.exit(f"{binary} --stdin did not start")
    return proc


def ask(proc, line):
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    if "error" in answer:
        sys.exit(answer["error"])
    if "tokens_per_s" in answer:  # throughput: ms per batch of 100 x 128 tokens
        return [None, 100 * 128 / answer["tokens_per_s"] * 1e3]
    return answer["ms"]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("configs", nargs="+", help="NAME=BINARY[:VAR=VALUE,...]")
    p.add_argument("--model", default="models/all-MiniLM-L6-v2")
    p.add_argument("--inputs", default=".cache/bench/inputs.json")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quantize", choices=["int8", "bf16"], help="every configuration so")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--block", type=int, default=40)
    p.add_argument("--lengths", default="q,16,32,128", help="token counts, q or tN, comma-separated")
    p.add_argument("--out", help="write every block median here (JSON)")
    p.add_argument("--fresh", action="store_true",
                   help="start every configuration's process anew each round (see below)")
    args = p.parse_args()

    # A process keeps what it drew at its start for its whole life (its memory's placement, the
    # vCPUs its threads settle on): with one process per configuration, two processes of the same
    # binary gave query ratios of 0.84 to 1.08 in runs of two rounds on the Xeon of
    # docs/benchmarks.md. --fresh draws again each round, as bench/pair_builds.sh does; its ratio
    # is then the median over rounds of independent draws.
    configs = {}
    for spec in args.configs:
        name, sep, rest = spec.partition("=")
        if not sep or not rest:
            sys.exit(f"{spec}: expected NAME=BINARY[:VAR=VALUE,...]")
        binary, _, settings = rest.partition(":")
        configs[name] = (binary, dict(kv.split("=", 1) for kv in settings.split(",") if kv))

    def start_all():
        return {name: start(binary, env, args) for name, (binary, env) in configs.items()}

    def stop_all(procs):
        for proc in procs.values():
            proc.stdin.close()
            proc.wait()

    lengths = [n for n in args.lengths.split(",") if n]

    def command(n, calls=args.block + 1):
        return (f"queries {calls}" if n == "q" else
                f"throughput {n[1:]}" if n.startswith("t") else
                f"latency {n} {calls}")

    procs = start_all()
    medians = {name: {n: [] for n in lengths} for name in procs}
    for r in range(args.rounds):
        if args.fresh and r > 0:
            stop_all(procs)
            procs = start_all()
        if args.fresh:  # a fresh process's first calls run cold (4.9 against 1.7 ms per query)
            for proc in procs.values():
                for n in lengths:
                    ask(proc, command(n, max(args.block, 30)))
        names = list(procs)
        names = names[r % len(names):] + names[:r % len(names)]
        for n in lengths:
            for name in names:
                medians[name][n].append(statistics.median(ask(procs[name], command(n))[1:]))
    base = next(iter(procs))
    for n in lengths:
        line = f"{n:>4}: " + "  ".join(f"{name} {statistics.median(medians[name][n]):.3f} ms"
                                       for name in procs)
        ratios = [f"{name} {statistics.median(a / b for a, b in zip(medians[name][n], medians[base][n])):.3f}"
                  for name in procs if name != base]
        print(line + ("   round ratios to " + base + ": " + " ".join(ratios) if ratios else ""))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"threads": args.threads, "rounds": args.rounds, "block": args.block,
                       "configs": args.configs, "fresh": args.fresh,
                       "block_medians_ms": medians}, f, indent=1)
    stop_all(procs)


if __name__ == "__main__":
    main()
