"""The figures the acceptance points compare, measured in short turns instead of one after another.

This machine drifts: the same engine call takes 16 ms in one minute and 20 ms in the next, and
stays there for seconds. Two figures measured a minute apart differ by that drift, which is
larger than the differences being checked (1 ms between quiver serve and the engine). So the
systems take turns: in every round each system runs a short block of calls, the first of which
is dropped (it pays for the previous system's threads going to sleep and for cold caches), and
the rounds repeat. Each system's figure is taken over all its calls; the comparison is also given
as the median over rounds of the difference between the two block medians.

A process keeps its speed for its whole life, and two identical engine processes measured in
turns differ by up to 10% (at 512 tokens, 80 against 96 ms): where their memory landed. One
process per system compares two draws of that luck, so --processes N shares the rounds among N
process sets, each with a fresh engine and a fresh server or freshly loaded peers, and the
figures are taken over all their rounds.

    --compare serve   batch-1 latency at 128 tokens: the engine (quiver_engine_bench --stdin,
                      loaded once) against quiver serve over HTTP (JSON, tokenization and
                      loopback TCP included; started by each process set with --quiver, or one
                      running at --url), timed by quiver_http_bench --stdin (--http-bench, a C++
                      client timed in C++ as the engine is) and by the suites' Python client;
                      and the engine's throughput (100 x 128 tokens) against serve under
                      --clients concurrent clients.
    --compare peers   batch-1 latency at 128 and 512 tokens and throughput (batches of 100 texts
                      of 128 tokens): the engine against ONNX Runtime, sentence-transformers and
                      llama.cpp, loaded in this process as bench/peers.py loads them.
    --compare engines the same figures for two builds of the engine: --engine-bench against
                      --baseline-bench (the quiver_engine_bench of the commit before a change),
                      for checking that a change leaves the engine's speed where it was.

Run by bench/run_suites.sh; writes one JSON object (--out).
"""

import argparse
import copy
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from suites import Client, concurrent, latency_fields


class StdinTool:
    """A benchmark binary in --stdin mode (quiver_engine_bench: the engine loaded once;
    quiver_http_bench: one keep-alive HTTP connection), asked for blocks of calls and timing each
    call itself."""

    def __init__(self, argv):
        self.name = argv[0]
        self.proc = subprocess.Popen([*argv, "--stdin"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"{self.name} --stdin did not start")

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        if "error" in answer:
            raise SystemExit(f"{self.name}: {answer['error']}")
        return answer

    def latency(self, tokens, count):
        if tokens == "queries":  # the inputs' short queries (quiver_engine_bench --stdin)
            return self.ask(f"queries {count}")["ms"]
        return self.ask(f"latency {tokens} {count}")["ms"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class Engine(StdinTool):
    def __init__(self, binary, model, inputs, threads, quantize=""):
        super().__init__([binary, "--model", model, "--inputs", inputs, "--threads", str(threads),
                          *(["--quantize", quantize] if quantize else [])])

    def throughput(self, batches):
        return self.ask(f"throughput {batches}")["tokens_per_s"]


def timed_calls(fn, count):
    ms = []
    for _ in range(count):
        t = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t) * 1e3)
    return ms


def latency_turns(systems, rounds, block):
    """systems: name -> fn(count) returning `count` latencies in ms (block + 1 with the warm-up).
    The raw figures: every timed call, and each round's block medians."""
    calls = {name: [] for name in systems}
    per_round = []
    for _ in range(rounds):
        medians = {}
        for name, run in systems.items():
            ms = run(block + 1)[1:]  # the first call of a turn is a warm-up
            calls[name] += ms
            medians[name] = statistics.median(ms)
        per_round.append(medians)
    return {"rounds": rounds, "block": block, "calls_ms": calls, "round_medians_ms": per_round}


def start_serve(args, extra=()):
    """A fresh `quiver serve` on a free port (--quiver), with `extra` flags after the usual ones;
    its process, URL and log file."""
    log = tempfile.NamedTemporaryFile(prefix="quiver-serve-", suffix=".log", delete=False)
    quantize = getattr(args, "quantize", "")
    proc = subprocess.Popen([args.quiver, "--log-level", "info", "serve", "--model", args.model,
                             "--host", "127.0.0.1", "--port", "0", "--threads", str(args.threads),
                             "--max-input-tokens", "512",
                             *(["--quantize", quantize] if quantize else []), *extra],
                            stderr=log, stdout=subprocess.DEVNULL)
    def text():
        with open(log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"quiver serve exited: {text()}")
        found = re.search(r" port=(\d+) ", text())
        if found:
            url = f"http://127.0.0.1:{found.group(1)}"
            try:
                with urllib.request.urlopen(url + "/ready", timeout=5) as answer:
                    if answer.status == 200:
                        return proc, url, log.name
            except OSError:
                pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("quiver serve did not become ready")


def measure_serve(args, engine, inputs):
    texts = inputs["sets"]["128"]
    server, url, log = start_serve(args) if args.quiver else (None, args.url, None)
    try:
        client = Client(url, args.served_model)
        state = {"next": 0}

        def serve_python(count):
            def one():
                client.embed([texts[state["next"] % len(texts)]])
                state["next"] += 1
            return timed_calls(one, count)

        # Serve is timed by two clients in the same rounds: quiver_http_bench (C++, timed in C++
        # as the engine is: the difference is the serving cost) and the suites' Python client
        # (what a Python program sees; its own JSON and HTTP work is inside).
        http = StdinTool([args.http_bench, "--url", url, "--model", args.served_model,
                          "--inputs", args.inputs])
        try:
            latency = latency_turns({"quiver engine": lambda n: engine.latency(128, n),
                                     "quiver serve": lambda n: http.latency(128, n),
                                     "quiver serve, Python client": serve_python},
                                    args.rounds, args.block)
        finally:
            http.close()

        # Throughput: the engine's throughput suite (100 x 128 tokens, four batches in flight) in
        # turns with the high-concurrency suite at --clients clients through serve.
        def clients(seconds):
            return concurrent(url, args.served_model, args.clients,
                              lambda c, i: c.embed([texts[i % len(texts)]]), 128, seconds)

        engine.throughput(args.batches)  # a whole turn each as warm-up
        clients(1)
        rates = {"quiver engine": [], "quiver serve": []}
        for _ in range(args.throughput_rounds):
            rates["quiver engine"].append(engine.throughput(args.batches))
            r = clients(args.seconds)
            if r["errors"]:
                raise SystemExit(f"quiver serve answered {r['errors']} requests with errors")
            rates["quiver serve"].append(r["tokens_per_s"])
    finally:
        if server is not None:
            server.terminate()
            server.wait()
            os.unlink(log)
    return {"latency_128": latency,
            f"concurrency_{args.clients}": {"clients": args.clients, "tokens": 128,
                                            "tokens_per_s_per_round": rates}}


def measure_peers(args, engine, inputs):
    import peers  # noqa: E402 - numpy and the peers' packages, only needed here

    loaded = {}
    for peer in args.peers.split(","):
        if peer == "onnxruntime":
            name, embed, _ = peers.onnxruntime_peer(args.model, args.onnx, args.threads)
        elif peer == "sentence-transformers":
            name, embed, _ = peers.sentence_transformers_peer(args.model, args.threads)
        elif peer == "llama.cpp":
            name, embed, _ = peers.llama_cpp_peer(args.gguf, args.threads, args.llama_ubatch)
        else:
            raise SystemExit(f"unknown peer {peer}")
        loaded[name] = embed
    out = {}
    for tokens in (128, 512):
        texts = inputs["sets"][str(tokens)]
        systems = {"quiver engine": lambda n, tokens=tokens: engine.latency(tokens, n)}
        for name, embed in loaded.items():
            state = {"next": 0}

            def run(count, embed=embed, state=state, texts=texts):
                def one():
                    embed([texts[state["next"] % len(texts)]])
                    state["next"] += 1
                return timed_calls(one, count)

            systems[name] = run
        out[f"latency_{tokens}"] = latency_turns(systems, args.rounds, args.block)

    # Throughput: each turn is --batches batches of the 100 texts of 128 tokens (the engine keeps
    # four in flight, as in its throughput suite; the peers take one batch per call).
    texts = inputs["sets"]["128"]
    # A whole turn each as warm-up (and ONNX Runtime's tokenization cache): a second call at a new
    # shape is still slower than the later ones for some peers, and a process set has few rounds.
    for embed in loaded.values():
        for _ in range(args.batches):
            embed(texts)
    engine.throughput(args.batches)
    rates = {name: [] for name in ["quiver engine", *loaded]}
    for _ in range(args.throughput_rounds):
        rates["quiver engine"].append(engine.throughput(args.batches))
        for name, embed in loaded.items():
            t = time.perf_counter()
            for _ in range(args.batches):
                embed(texts)
            rates[name].append(args.batches * len(texts) * 128 / (time.perf_counter() - t))
    out["throughput"] = {"batch": len(texts), "tokens": 128, "batches_per_turn": args.batches,
                         "tokens_per_s_per_round": rates}
    return out


def measure_engines(args, engine, inputs):
    """The engine against a baseline build of it, in turns: latency at 128 and 512 tokens and
    throughput of batches of 100 texts of 128 tokens, each with a warm-up turn."""
    baseline = Engine(args.baseline_bench, args.model, args.inputs, args.threads, args.quantize)
    try:
        systems = {"quiver engine": engine, "baseline engine": baseline}
        out = {}
        for tokens in latency_sets(args):
            for tool in systems.values():
                tool.latency(tokens, args.block)
            out[f"latency_{tokens}"] = latency_turns(
                {name: (lambda n, tool=tool, tokens=tokens: tool.latency(tokens, n))
                 for name, tool in systems.items()}, args.rounds, args.block)
        for tool in systems.values():
            tool.throughput(args.batches)
        rates = {name: [] for name in systems}
        for _ in range(args.throughput_rounds):
            for name, tool in systems.items():
                rates[name].append(tool.throughput(args.batches))
        out["throughput"] = {"batch": 100, "tokens": 128, "batches_per_turn": args.batches,
                             "tokens_per_s_per_round": rates}
        return out
    finally:
        baseline.close()


def latency_sets(args):
    """The batch-1 sets --compare engines times: 128 and 512 tokens, and with --queries the
    inputs' short queries (both builds need quiver_engine_bench's `queries` command)."""
    return (128, 512, "queries") if args.queries else (128, 512)


def merge(parts):
    """One raw result from several process sets' raw results: their calls and rounds together."""
    merged = copy.deepcopy(parts[0])
    for part in parts[1:]:
        for key, figures in part.items():
            into = merged[key]
            if "calls_ms" in figures:
                into["rounds"] += figures["rounds"]
                into["round_medians_ms"] += figures["round_medians_ms"]
                for name, ms in figures["calls_ms"].items():
                    into["calls_ms"][name] += ms
            else:
                for name, rates in figures["tokens_per_s_per_round"].items():
                    into["tokens_per_s_per_round"][name] += rates
    return merged


def difference(figures, name, reference):
    """name - reference: the difference of p50 over all calls, and the median over rounds of the
    difference of the two block medians (the figure the acceptance points are held to)."""
    return (figures["systems"][name]["p50_ms"] - figures["systems"][reference]["p50_ms"],
            statistics.median(r[name] - r[reference] for r in figures["round_medians_ms"]))


def summarize_throughput(figures, numerator, denominator, key):
    rates = figures["tokens_per_s_per_round"]
    figures["rounds"] = len(rates[numerator])
    figures["median_tokens_per_s"] = {name: statistics.median(r) for name, r in rates.items()}
    medians = figures["median_tokens_per_s"]
    figures[key] = medians[numerator] / medians[denominator]
    figures["median_round_ratio"] = statistics.median(
        n / d for n, d in zip(rates[numerator], rates[denominator]))


def summarize(compare, raw, clients):
    """The figures compared, from the raw ones (every call's latency replaced by its summary)."""
    for figures in raw.values():
        if "calls_ms" in figures:
            figures["systems"] = {name: latency_fields(ms)
                                  for name, ms in figures.pop("calls_ms").items()}
    if compare == "serve":
        latency = raw["latency_128"]
        for name, prefix in (("quiver serve", ""), ("quiver serve, Python client", "python_client_")):
            p50, rounds = difference(latency, name, "quiver engine")
            latency[f"{prefix}serve_minus_engine_p50_ms"] = p50
            latency[f"{prefix}median_round_difference_ms"] = rounds
            print(f"{name} - engine at 128 tokens: p50 {p50:+.2f} ms, median of round "
                  f"differences {rounds:+.2f} ms", file=sys.stderr)
        concurrency = raw[f"concurrency_{clients}"]
        summarize_throughput(concurrency, "quiver serve", "quiver engine", "serve_over_engine")
        print(f"serve at {clients} clients / engine throughput: "
              f"{concurrency['serve_over_engine']:.3f} (median of round ratios "
              f"{concurrency['median_round_ratio']:.3f})", file=sys.stderr)
        return raw
    if compare == "engines":
        for tokens in (t for t in (128, 512, "queries") if f"latency_{t}" in raw):
            latency = raw[f"latency_{tokens}"]
            p50, rounds = difference(latency, "quiver engine", "baseline engine")
            base = latency["systems"]["baseline engine"]["p50_ms"]
            latency["engine_minus_baseline_p50_ms"] = p50
            latency["median_round_difference_ms"] = rounds
            latency["engine_over_baseline_p50"] = latency["systems"]["quiver engine"]["p50_ms"] / base
            where = "the short queries" if tokens == "queries" else f"{tokens} tokens"
            print(f"engine - baseline at {where}: p50 {p50:+.2f} ms of {base:.2f} "
                  f"({100 * p50 / base:+.1f}%), median of round differences {rounds:+.2f} ms",
                  file=sys.stderr)
        throughput = raw["throughput"]
        summarize_throughput(throughput, "quiver engine", "baseline engine",
                             "engine_over_baseline")
        print(f"throughput: engine / baseline = {throughput['engine_over_baseline']:.3f} "
              f"(median of round ratios {throughput['median_round_ratio']:.3f})", file=sys.stderr)
        return raw
    for tokens in (128, 512):
        latency = raw[f"latency_{tokens}"]
        peer_p50 = {n: s["p50_ms"] for n, s in latency["systems"].items() if n != "quiver engine"}
        best = min(peer_p50, key=peer_p50.get)
        latency["best_peer"] = best
        p50, rounds = difference(latency, "quiver engine", best)
        latency["engine_minus_best_peer_p50_ms"] = p50
        latency["median_round_difference_ms"] = rounds
        print(f"engine - {best} at {tokens} tokens: p50 {p50:+.2f} ms, median of round "
              f"differences {rounds:+.2f} ms", file=sys.stderr)
    throughput = raw["throughput"]
    rates = throughput["tokens_per_s_per_round"]
    best = max((n for n in rates if n != "quiver engine"), key=lambda n: statistics.median(rates[n]))
    throughput["best_peer"] = best
    summarize_throughput(throughput, "quiver engine", best, "engine_over_best_peer")
    print(f"throughput: engine / {best} = {throughput['engine_over_best_peer']:.2f}x "
          f"(median of round ratios {throughput['median_round_ratio']:.2f}x)", file=sys.stderr)
    return raw


def measure(args, inputs):
    """The raw figures of one process set: a fresh engine (and, with --quiver, a fresh server)."""
    engine = Engine(args.engine_bench, args.model, args.inputs, args.threads, args.quantize)
    try:
        if args.compare == "serve":
            return measure_serve(args, engine, inputs)
        if args.compare == "engines":
            return measure_engines(args, engine, inputs)
        return measure_peers(args, engine, inputs)
    finally:
        engine.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", choices=["serve", "peers", "engines"], required=True)
    parser.add_argument("--engine-bench", required=True, help="the quiver_engine_bench binary")
    parser.add_argument("--baseline-bench",
                        help="the quiver_engine_bench of the build compared with (--compare engines)")
    parser.add_argument("--model", required=True, help="the model folder")
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20, help="latency rounds")
    parser.add_argument("--block", type=int, default=10, help="timed calls per latency turn")
    parser.add_argument("--url", help="quiver serve (--compare serve)")
    parser.add_argument("--http-bench", help="the quiver_http_bench binary (--compare serve)")
    parser.add_argument("--served-model", default="all-MiniLM-L6-v2")
    parser.add_argument("--onnx")
    parser.add_argument("--gguf")
    parser.add_argument("--llama-ubatch", type=int, default=512)
    parser.add_argument("--peers", default="onnxruntime,sentence-transformers,llama.cpp")
    parser.add_argument("--throughput-rounds", type=int, default=4)
    parser.add_argument("--queries", action="store_true",
                        help="--compare engines: batch-1 over the inputs' short queries too")
    parser.add_argument("--batches", type=int, default=2, help="batches per throughput turn")
    parser.add_argument("--clients", type=int, default=16,
                        help="concurrent clients through serve (--compare serve)")
    parser.add_argument("--seconds", type=float, default=3,
                        help="length of a serve throughput turn (--compare serve)")
    parser.add_argument("--quantize", default="",
                        help="int8 or bf16: the engine and the server both (--compare serve, engines)")
    parser.add_argument("--quiver", help="the quiver binary: each process set starts its own "
                        "`quiver serve` (--compare serve, instead of --url)")
    parser.add_argument("--processes", type=int, default=1,
                        help="process sets the rounds are shared among (each a fresh engine, "
                        "and a fresh server or freshly loaded peers)")
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)  # one set, unsummarized
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.compare == "serve" and not ((args.url or args.quiver) and args.http_bench):
        raise SystemExit("--compare serve needs --http-bench and --url or --quiver")
    if args.compare == "serve" and args.processes > 1 and not args.quiver:
        raise SystemExit("--processes > 1 needs --quiver (a fresh server per process set)")
    if args.compare == "peers" and not (args.onnx and args.gguf):
        raise SystemExit("--compare peers needs --onnx and --gguf")
    if args.compare == "engines" and not args.baseline_bench:
        raise SystemExit("--compare engines needs --baseline-bench")
    if args.processes < 1 or args.rounds < args.processes:
        raise SystemExit("--processes must be at least 1 and at most --rounds")
    with open(args.inputs, encoding="utf-8") as f:
        inputs = json.load(f)
    if args.processes == 1:
        raw = measure(args, inputs)
    else:
        # Each set in its own process: this machine gives two identical engine processes
        # latencies up to 10% apart for their whole lives (where their memory landed), so one
        # process of each system would compare two draws of that luck; the sets share it out.
        parts = []
        with tempfile.TemporaryDirectory() as folder:
            for i in range(args.processes):
                out = os.path.join(folder, f"set{i}.json")
                argv = [a for a in sys.argv[1:]]
                argv = replace_flag(argv, "--processes", "1")
                argv = replace_flag(argv, "--out", out)
                argv = replace_flag(argv, "--rounds", str(share(args.rounds, args.processes, i)))
                argv = replace_flag(argv, "--throughput-rounds",
                                    str(max(1, share(args.throughput_rounds, args.processes, i))))
                print(f"process set {i + 1} of {args.processes}", file=sys.stderr)
                subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--raw"],
                               check=True)
                with open(out, encoding="utf-8") as f:
                    parts.append(json.load(f))
        raw = merge(parts)
    if args.raw:
        result = raw
    else:
        result = summarize(args.compare, raw, args.clients)
        result.update({"compare": args.compare, "threads": args.threads,
                       "process_sets": args.processes})
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)


def share(total, parts, i):
    """Set i's share of `total` rounds over `parts` sets."""
    return total // parts + (1 if i < total % parts else 0)


def replace_flag(argv, flag, value):
    """argv with `flag value` set to `value` (added when absent)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == flag:
            i += 2
            continue
        if argv[i].startswith(flag + "="):
            i += 1
            continue
        out.append(argv[i])
        i += 1
    return [*out, flag, value]


if __name__ == "__main__":
    main()
