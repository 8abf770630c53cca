"""Two `quiver serve` configurations side by side: batch-1 latency through HTTP, in turns.

Starts one `quiver serve` per configuration (the same binary and model, bench/paired.py's
start_serve with `--max-input-tokens 512`, each with its own extra flags), and one `quiver_http_bench` client per server (C++, keep-alive, Nagle off: a client's
own cost is small and the same for both). In each round every configuration answers a block of
calls per workload (the corpus's short search queries, or texts of N tokens), the order
alternating by round, and the median of each block is kept; the script prints each
configuration's median over rounds and the median of the per-round ratios to the first
configuration. A workload `cN` is N concurrent Python clients (bench/suites.py's) posting one
128-token text each, back to back, for --seconds: its figure is tokens/s, and its ratio too (above
1 is faster), where the others' are times (below 1 is faster). This host's speed drifts from
minute to minute, so only figures taken in the same round are compared.

  python3 bench/pair_serve.py --quiver build/quiver --http-bench build/quiver_http_bench \\
      --model models/all-MiniLM-L6-v2 --inputs .cache/bench/inputs.json --threads 1 \\
      --rounds 10 --workloads queries,128,c16 \\
      --config "sleep=--spin-wait-us 0" --config "spin=--spin-wait-us 2000"
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

from paired import start_serve
from suites import concurrent


class Server:
    """One `quiver serve` and its quiver_http_bench client."""

    def __init__(self, args, name, flags):
        self.name = name
        self.args = args
        self.server, self.url, self.log = start_serve(args, shlex.split(flags))
        self.client = subprocess.Popen(
            [args.http_bench, "--url", self.url, "--model", args.served_model,
             "--inputs", args.inputs, "--stdin"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.client.stdout.readline().strip() != "ready":
            sys.exit(f"{name}: quiver_http_bench did not start")

    def block(self, workload, count):
        if workload.startswith("c"):  # N clients: tokens/s
            texts = self.args.texts
            result = concurrent(self.url, self.args.served_model, int(workload[1:]),
                                lambda c, i: c.embed([texts[i % len(texts)]]), 128,
                                count if count > 0 else self.args.seconds)
            if result["errors"]:
                sys.exit(f"{self.name}: {result['errors']} errors, the first: "
                         f"{result['first_error']}")
            return result["tokens_per_s"]
        line = f"queries {count}" if workload == "queries" else f"latency {workload} {count}"
        self.client.stdin.write(line + "\n")
        self.client.stdin.flush()
        answer = json.loads(self.client.stdout.readline())
        if "ms" not in answer:
            sys.exit(f"{self.name}: {answer}")
        return statistics.median(answer["ms"])

    def close(self):
        self.client.stdin.close()
        self.client.wait()
        self.server.terminate()
        self.server.wait()
        os.unlink(self.log)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quiver", required=True)
    parser.add_argument("--http-bench", required=True, help="the quiver_http_bench binary")
    parser.add_argument("--model", required=True, help="the model folder")
    parser.add_argument("--served-model", default="all-MiniLM-L6-v2")
    parser.add_argument("--inputs", required=True, help="bench/make_inputs.py's file")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--workloads", default="queries,128",
                        help="comma-separated: 'queries' and/or token lengths of the inputs")
    parser.add_argument("--seconds", type=float, default=10,
                        help="each concurrent-clients block's length")
    parser.add_argument("--block", type=int, default=0,
                        help="calls per block (default: 60 for queries, 30 up to 128 tokens, "
                             "10 above)")
    parser.add_argument("--config", action="append", required=True,
                        help="NAME=FLAGS, the extra flags of one server; two or more")
    parser.add_argument("--out", help="also write every block's median here (JSON)")
    args = parser.parse_args()
    configs = [c.partition("=")[::2] for c in args.config]
    if len(configs) < 2 or len({name for name, _ in configs}) != len(configs):
        sys.exit("give two or more --config NAME=FLAGS with distinct names")
    workloads = args.workloads.split(",")
    with open(args.inputs) as f:
        args.texts = json.load(f)["sets"]["128"]

    def count(workload):
        if workload.startswith("c"):
            return 0  # --seconds
        if args.block > 0:
            return args.block
        return 60 if workload == "queries" else 30 if int(workload) <= 128 else 10

    servers = [Server(args, name, flags) for name, flags in configs]
    try:
        for server in servers:  # warm-up
            for workload in workloads:
                server.block(workload, 1 if workload.startswith("c") else 5)
        medians = {w: {s.name: [] for s in servers} for w in workloads}
        for r in range(args.rounds):
            order = servers if r % 2 == 0 else servers[::-1]
            for workload in workloads:
                for server in order:
                    medians[workload][server.name].append(server.block(workload, count(workload)))
    finally:
        for server in servers:
            server.close()

    base = servers[0].name
    print(f"quiver serve at {args.threads} thread(s), {args.rounds} rounds; batch-1 p50 ms or, for "
          f"cN, tokens/s (median over rounds), and the median of the per-round ratios to '{base}'")
    for workload in workloads:
        unit = "tokens/s" if workload.startswith("c") else "ms"
        for server in servers:
            m = medians[workload][server.name]
            line = f"  {workload:>8} {server.name:>12}: {statistics.median(m):10.3f} {unit}"
            if server.name != base:
                ratios = [a / b for a, b in zip(m, medians[workload][base])]
                line += (f"  ratio {statistics.median(ratios):.3f} "
                         f"(rounds {min(ratios):.3f}-{max(ratios):.3f})")
            print(line)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"threads": args.threads, "rounds": args.rounds,
                       "configs": dict(configs), "block_medians_ms": medians}, f, indent=1)


if __name__ == "__main__":
    main()
