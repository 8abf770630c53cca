"""The figures the acceptance points compare, measured in short turns instead of one after another.

This machine drifts: the same engine call takes 16 ms in one minute and 20 ms in the next, and
stays there for seconds. Two figures measured a minute apart differ by that drift, which is
larger than the differences being checked (1 ms between quiver serve and the engine). So the
systems take turns: in every round each system runs a short block of calls, the first of which
is dropped (it pays for the previous system's threads going to sleep and for cold caches), and
the rounds repeat. Each system's figure is taken over all its calls; the comparison is also given
as the median over rounds of the difference between the two block medians.

    --compare serve   batch-1 latency at 128 tokens: the engine (quiver_engine_bench --stdin,
                      loaded once) against quiver serve over HTTP (--url; JSON, tokenization and
                      loopback TCP included), timed by quiver_http_bench --stdin (--http-bench, a
                      C++ client timed in C++ as the engine is) and by the suites' Python client;
                      and the engine's throughput (100 x 128 tokens) against serve under
                      --clients concurrent clients.
    --compare peers   batch-1 latency at 128 and 512 tokens and throughput (batches of 100 texts
                      of 128 tokens): the engine against ONNX Runtime, sentence-transformers and
                      llama.cpp, loaded in this process as bench/peers.py loads them.

Run by bench/run_suites.sh; writes one JSON object (--out).
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

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
        return self.ask(f"latency {tokens} {count}")["ms"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class Engine(StdinTool):
    def __init__(self, binary, model, inputs, threads):
        super().__init__([binary, "--model", model, "--inputs", inputs, "--threads", str(threads)])

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
    """systems: name -> fn(count) returning `count` latencies in ms (block + 1 with the warm-up)."""
    calls = {name: [] for name in systems}
    per_round = []
    for _ in range(rounds):
        medians = {}
        for name, run in systems.items():
            ms = run(block + 1)[1:]  # the first call of a turn is a warm-up
            calls[name] += ms
            medians[name] = statistics.median(ms)
        per_round.append(medians)
    return {"rounds": rounds, "block": block,
            "systems": {name: latency_fields(ms) for name, ms in calls.items()},
            "round_medians_ms": per_round}


def compare_serve(args, engine, inputs):
    texts = inputs["sets"]["128"]
    client = Client(args.url, args.served_model)
    state = {"next": 0}

    def serve_python(count):
        def one():
            client.embed([texts[state["next"] % len(texts)]])
            state["next"] += 1
        return timed_calls(one, count)

    # Serve is timed by two clients in the same rounds: quiver_http_bench (C++, timed in C++ as
    # the engine is: the difference is the serving cost) and the suites' Python client (what a
    # Python program sees; its own JSON and HTTP work is inside).
    http = StdinTool([args.http_bench, "--url", args.url, "--model", args.served_model,
                      "--inputs", args.inputs])
    try:
        result = latency_turns({"quiver engine": lambda n: engine.latency(128, n),
                                "quiver serve": lambda n: http.latency(128, n),
                                "quiver serve, Python client": serve_python},
                               args.rounds, args.block)
    finally:
        http.close()
    for name, key in (("quiver serve", ""), ("quiver serve, Python client", "python_client_")):
        diffs = [r[name] - r["quiver engine"] for r in result["round_medians_ms"]]
        result[f"{key}serve_minus_engine_p50_ms"] = (result["systems"][name]["p50_ms"] -
                                                     result["systems"]["quiver engine"]["p50_ms"])
        result[f"{key}median_round_difference_ms"] = statistics.median(diffs)
        print(f"{name} - engine at 128 tokens: p50 "
              f"{result[f'{key}serve_minus_engine_p50_ms']:+.2f} ms, median of round differences "
              f"{result[f'{key}median_round_difference_ms']:+.2f} ms", file=sys.stderr)

    # Throughput: the engine's throughput suite (100 x 128 tokens, four batches in flight) in
    # turns with the high-concurrency suite at --clients clients through serve.
    engine.throughput(1)
    rates = {"quiver engine": [], "quiver serve": []}
    for _ in range(args.throughput_rounds):
        rates["quiver engine"].append(engine.throughput(args.batches))
        r = concurrent(args.url, args.served_model, args.clients,
                       lambda c, i: c.embed([texts[i % len(texts)]]), 128, args.seconds)
        if r["errors"]:
            raise SystemExit(f"quiver serve answered {r['errors']} requests with errors")
        rates["quiver serve"].append(r["tokens_per_s"])
    medians = {name: statistics.median(r) for name, r in rates.items()}
    ratios = [s / e for e, s in zip(rates["quiver engine"], rates["quiver serve"])]
    concurrency = {
        "clients": args.clients, "tokens": 128, "rounds": args.throughput_rounds,
        "tokens_per_s_per_round": rates, "median_tokens_per_s": medians,
        "serve_over_engine": medians["quiver serve"] / medians["quiver engine"],
        "median_round_ratio": statistics.median(ratios),
    }
    print(f"serve at {args.clients} clients / engine throughput: "
          f"{concurrency['serve_over_engine']:.3f} (median of round ratios "
          f"{concurrency['median_round_ratio']:.3f})", file=sys.stderr)
    return {"latency_128": result, f"concurrency_{args.clients}": concurrency}


def compare_peers(args, engine, inputs):
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
        result = latency_turns(systems, args.rounds, args.block)
        peer_p50 = {n: s["p50_ms"] for n, s in result["systems"].items() if n != "quiver engine"}
        best = min(peer_p50, key=peer_p50.get)
        result["best_peer"] = best
        result["engine_minus_best_peer_p50_ms"] = (result["systems"]["quiver engine"]["p50_ms"] -
                                                   peer_p50[best])
        result["median_round_difference_ms"] = statistics.median(
            r["quiver engine"] - r[best] for r in result["round_medians_ms"])
        print(f"engine - {best} at {tokens} tokens: p50 "
              f"{result['engine_minus_best_peer_p50_ms']:+.2f} ms", file=sys.stderr)
        out[f"latency_{tokens}"] = result

    # Throughput: each turn is --batches batches of the 100 texts of 128 tokens (the engine keeps
    # four in flight, as in its throughput suite; the peers take one batch per call).
    texts = inputs["sets"]["128"]
    for embed in loaded.values():
        embed(texts)  # warm-up, and ONNX Runtime's tokenization cache
    engine.throughput(1)
    rates = {name: [] for name in ["quiver engine", *loaded]}
    for _ in range(args.throughput_rounds):
        rates["quiver engine"].append(engine.throughput(args.batches))
        for name, embed in loaded.items():
            t = time.perf_counter()
            for _ in range(args.batches):
                embed(texts)
            rates[name].append(args.batches * len(texts) * 128 / (time.perf_counter() - t))
    medians = {name: statistics.median(r) for name, r in rates.items()}
    best = max((n for n in medians if n != "quiver engine"), key=medians.get)
    ratios = [e / p for e, p in zip(rates["quiver engine"], rates[best])]
    out["throughput"] = {
        "batch": len(texts), "tokens": 128, "rounds": args.throughput_rounds,
        "batches_per_turn": args.batches, "tokens_per_s_per_round": rates,
        "median_tokens_per_s": medians, "best_peer": best,
        "engine_over_best_peer": medians["quiver engine"] / medians[best],
        "median_round_ratio": statistics.median(ratios),
    }
    print(f"throughput: engine / {best} = {out['throughput']['engine_over_best_peer']:.2f}x "
          f"(median of round ratios {out['throughput']['median_round_ratio']:.2f}x)",
          file=sys.stderr)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", choices=["serve", "peers"], required=True)
    parser.add_argument("--engine-bench", required=True, help="the quiver_engine_bench binary")
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
    parser.add_argument("--batches", type=int, default=2, help="batches per throughput turn")
    parser.add_argument("--clients", type=int, default=16,
                        help="concurrent clients through serve (--compare serve)")
    parser.add_argument("--seconds", type=float, default=3,
                        help="length of a serve throughput turn (--compare serve)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.inputs, encoding="utf-8") as f:
        inputs = json.load(f)
    engine = Engine(args.engine_bench, args.model, args.inputs, args.threads)
    try:
        if args.compare == "serve":
            if not (args.url and args.http_bench):
                raise SystemExit("--compare serve needs --url and --http-bench")
            result = compare_serve(args, engine, inputs)
        else:
            if not (args.onnx and args.gguf):
                raise SystemExit("--compare peers needs --onnx and --gguf")
            result = compare_peers(args, engine, inputs)
    finally:
        engine.close()
    result.update({"compare": args.compare, "threads": args.threads})
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
