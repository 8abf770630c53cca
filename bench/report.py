"""Turns one bench/run_suites.sh run into the report under docs/benchmarks/.

Reads the run's JSON files (machine, engine, peers, quiver-http, llama-http) and writes
suites.json (everything, plus the ratios the acceptance criteria name), suites.md (tables) and
two plots: latency_vs_tokens.png and throughput_vs_concurrency.png. Every ratio is between
numbers from the same run.
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def latency_at(result, tokens):
    for row in result.get("latency", []):
        if row["tokens"] == tokens and "p50_ms" in row:
            return row
    return None


def fmt(x, digits=1):
    return "n/a" if x is None else f"{x:,.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", required=True, help="folder with the run's JSON files")
    parser.add_argument("--out", required=True, help="docs/benchmarks")
    args = parser.parse_args()
    machine = load(os.path.join(args.run, "machine.json"))
    engine = load(os.path.join(args.run, "engine.json"))
    peers = load(os.path.join(args.run, "peers.json"))
    http = [load(os.path.join(args.run, name)) for name in ("quiver-http.json", "llama-http.json")
            if os.path.exists(os.path.join(args.run, name))]
    quiver_http = http[0]
    in_process = [engine] + peers

    # The acceptance ratios, all from this run.
    best_peer = max(peers, key=lambda p: p["throughput"]["tokens_per_s"])
    checks = {
        "engine_tokens_per_s": engine["throughput"]["tokens_per_s"],
        "best_peer": best_peer["system"],
        "best_peer_tokens_per_s": best_peer["throughput"]["tokens_per_s"],
        "engine_over_best_peer": engine["throughput"]["tokens_per_s"]
        / best_peer["throughput"]["tokens_per_s"],
        "gemm_ceiling_gflops": engine["gemm_ceiling_gflops"],
        "engine_gflops": engine["throughput"]["gflops"],
        "engine_fraction_of_ceiling": engine["throughput"]["fraction_of_ceiling"],
    }
    for tokens in (128, 512):
        mine = latency_at(engine, tokens)
        theirs = [(p["system"], latency_at(p, tokens)) for p in peers if latency_at(p, tokens)]
        name, best = min(theirs, key=lambda t: t[1]["p50_ms"])
        checks[f"engine_p50_ms_{tokens}"] = mine["p50_ms"]
        checks[f"best_peer_p50_ms_{tokens}"] = best["p50_ms"]
        checks[f"best_peer_latency_{tokens}"] = name
        checks[f"engine_minus_best_peer_p50_ms_{tokens}"] = mine["p50_ms"] - best["p50_ms"]
    # The same comparisons measured in short turns (bench/paired.py), the figures the acceptance
    # points are held to: the median over rounds of the difference (or ratio) of the two systems'
    # figures in that round.
    def turns(name):
        path = os.path.join(args.run, name)
        return load(path) if os.path.exists(path) else {}

    peer_turns, serve_turns = turns("paired-peers.json"), turns("paired-serve.json")

    def sets(t):  # " in N process sets" where the rounds were shared among fresh processes
        n = t.get("process_sets", 1)
        return f" in {n} process sets" if n > 1 else ""

    checks["turns_peer_sets"], checks["turns_serve_sets"] = sets(peer_turns), sets(serve_turns)
    for tokens in (128, 512):
        t = peer_turns.get(f"latency_{tokens}")
        if t:
            checks[f"turns_engine_minus_best_peer_ms_{tokens}"] = t["median_round_difference_ms"]
            checks[f"turns_best_peer_latency_{tokens}"] = t["best_peer"]
            checks[f"turns_latency_{tokens}"] = {n: s["p50_ms"] for n, s in t["systems"].items()}
            checks[f"turns_rounds_{tokens}"] = t["rounds"]
    if "throughput" in peer_turns:
        t = peer_turns["throughput"]
        checks["turns_engine_over_best_peer"] = t["median_round_ratio"]
        checks["turns_best_peer"] = t["best_peer"]
        checks["turns_throughput"] = t["median_tokens_per_s"]
        checks["turns_throughput_rounds"] = t["rounds"]
    sixteen = [r for r in quiver_http.get("concurrency", []) if r["clients"] == 16]
    if sixteen:
        checks["serve_16_clients_tokens_per_s"] = sixteen[0]["tokens_per_s"]
        checks["serve_16_clients_over_engine"] = (
            sixteen[0]["tokens_per_s"] / engine["throughput"]["tokens_per_s"])
    serve_128 = latency_at(quiver_http, 128)
    if serve_128:
        checks["serve_p50_ms_128"] = serve_128["p50_ms"]
        checks["serve_minus_engine_p50_ms_128"] = (
            serve_128["p50_ms"] - latency_at(engine, 128)["p50_ms"])
    if "latency_128" in serve_turns:
        t = serve_turns["latency_128"]
        checks["turns_serve_minus_engine_ms_128"] = t["median_round_difference_ms"]
        checks["turns_serve_latency_128"] = {n: s["p50_ms"] for n, s in t["systems"].items()}
        checks["turns_serve_rounds"] = t["rounds"]
        if "python_client_median_round_difference_ms" in t:
            checks["turns_serve_python_client_minus_engine_ms_128"] = (
                t["python_client_median_round_difference_ms"])
    if "concurrency_16" in serve_turns:
        t = serve_turns["concurrency_16"]
        checks["turns_serve_16_over_engine"] = t["median_round_ratio"]
        checks["turns_serve_16_tokens_per_s"] = t["median_tokens_per_s"]
        checks["turns_serve_16_rounds"] = t["rounds"]

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "suites.json"), "w", encoding="utf-8") as f:
        json.dump({"machine": machine, "checks": checks, "in_process": in_process, "http": http},
                  f, indent=1)

    lines = [
        "# Benchmark suites: quiver and its peers, one run",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores; {machine['threads']} threads for "
        f"every system; all-MiniLM-L6-v2 in f32; commit {machine['commit']}, {machine['date']}. "
        "Made by `make bench` (bench/run_suites.sh); raw numbers in suites.json.",
        "",
        "## What the acceptance criteria compare",
        "",
        "Measured in short turns (bench/paired.py): in every round each system runs a short block"
        " (its first call dropped), and the figure is the median over rounds of the difference"
        " (or ratio) between the systems in that round. This machine's speed drifts by 10-25%"
        " within seconds, more than the differences compared, so figures taken minutes apart"
        " (the suite tables further down) do not decide them. Each process keeps its own speed"
        " for its whole life (two identical engine processes differ by up to 10%), so the rounds"
        " are shared among fresh process sets, each with a new engine and a new server or newly"
        " loaded peers, and every system warms up with a whole turn first.",
        "",
        "| measure | in turns | value |",
        "|---|---|---|",
    ]
    if "turns_engine_over_best_peer" in checks:
        tp = checks["turns_throughput"]
        lines.append(
            f"| engine throughput, 100 x 128 tokens, against the best peer "
            f"({checks['turns_best_peer']}) | {checks['turns_throughput_rounds']} rounds"
            f"{checks['turns_peer_sets']}: "
            f"{fmt(tp['quiver engine'], 0)} vs {fmt(tp[checks['turns_best_peer']], 0)} tokens/s "
            f"(medians) | **{checks['turns_engine_over_best_peer']:.2f}x** |")
    lines.append(
        f"| large-GEMM rate, 2048^3, same threads: the better of OpenBLAS "
        f"({fmt(engine['openblas_2048_gflops'])}) and quiver's packed GEMM "
        f"({fmt(engine['packed_gemm_2048_gflops'])}) GFLOP/s | no: the same process, one after "
        f"the other | engine {fmt(checks['engine_gflops'])} GFLOP/s of model FLOPs = "
        f"**{100 * checks['engine_fraction_of_ceiling']:.1f}%** of "
        f"{fmt(checks['gemm_ceiling_gflops'])} |")
    for tokens in (128, 512):
        key = f"turns_engine_minus_best_peer_ms_{tokens}"
        if key in checks:
            best = checks[f"turns_best_peer_latency_{tokens}"]
            p50 = checks[f"turns_latency_{tokens}"]
            lines.append(
                f"| batch-1 latency at {tokens} tokens, engine against the best peer ({best}) | "
                f"{checks[f'turns_rounds_{tokens}']} rounds{checks['turns_peer_sets']}; p50 over "
                f"all calls "
                f"{fmt(p50['quiver engine'], 2)} vs {fmt(p50[best], 2)} ms | "
                f"**{checks[key]:+.2f} ms** |")
    if "turns_serve_16_over_engine" in checks:
        tp = checks["turns_serve_16_tokens_per_s"]
        lines.append(
            f"| `quiver serve`, 16 clients x one 128-token text, against the engine's throughput"
            f" | {checks['turns_serve_16_rounds']} rounds{checks['turns_serve_sets']}: "
            f"{fmt(tp['quiver serve'], 0)} vs "
            f"{fmt(tp['quiver engine'], 0)} tokens/s (medians) | "
            f"**{100 * checks['turns_serve_16_over_engine']:.1f}%** |")
    if "turns_serve_minus_engine_ms_128" in checks:
        p50 = checks["turns_serve_latency_128"]
        lines.append(
            f"| `quiver serve` batch-1 latency at 128 tokens (HTTP, JSON, tokenization) against "
            f"the engine, both timed in C++ (quiver_http_bench, quiver_engine_bench) | "
            f"{checks['turns_serve_rounds']} rounds{checks['turns_serve_sets']}; p50 over all calls "
            f"{fmt(p50['quiver serve'], 2)} vs {fmt(p50['quiver engine'], 2)} ms | "
            f"**{checks['turns_serve_minus_engine_ms_128']:+.2f} ms** |")
    if "turns_serve_python_client_minus_engine_ms_128" in checks:
        p50 = checks["turns_serve_latency_128"]
        lines.append(
            f"| the same through the suites' Python client (its own JSON and HTTP work included),"
            f" in the same rounds | p50 over all calls "
            f"{fmt(p50['quiver serve, Python client'], 2)} vs {fmt(p50['quiver engine'], 2)} ms | "
            f"{checks['turns_serve_python_client_minus_engine_ms_128']:+.2f} ms |")
    lines += [
        "",
        "The same comparisons from the suite runs below, one system after the other:",
        "",
        "| measure | value |",
        "|---|---|",
        f"| engine throughput, 100 x 128 tokens | {fmt(checks['engine_tokens_per_s'], 0)} "
        "tokens/s |",
        f"| best peer ({checks['best_peer']}) | {fmt(checks['best_peer_tokens_per_s'], 0)} "
        f"tokens/s: engine / peer = {checks['engine_over_best_peer']:.2f}x |",
    ]
    for tokens in (128, 512):
        lines.append(
            f"| batch-1 p50 at {tokens} tokens | engine {fmt(checks[f'engine_p50_ms_{tokens}'], 2)}"
            f" ms, best peer ({checks[f'best_peer_latency_{tokens}']}) "
            f"{fmt(checks[f'best_peer_p50_ms_{tokens}'], 2)} ms: difference "
            f"{checks[f'engine_minus_best_peer_p50_ms_{tokens}']:+.2f} ms |")
    if "serve_16_clients_over_engine" in checks:
        lines.append(
            f"| `quiver serve`, 16 clients x 1 text of 128 tokens | "
            f"{fmt(checks['serve_16_clients_tokens_per_s'], 0)} tokens/s = "
            f"{100 * checks['serve_16_clients_over_engine']:.1f}% of the engine's |")
    if "serve_minus_engine_p50_ms_128" in checks:
        lines.append(
            f"| `quiver serve` batch-1 p50 at 128 tokens | "
            f"{fmt(checks['serve_p50_ms_128'], 2)} ms: "
            f"{checks['serve_minus_engine_p50_ms_128']:+.2f} ms from the engine's |")

    lines += ["", "## Low-latency embeddings (batch 1)", "",
              "| system | tokens | p50 ms | p90 ms | p99 ms |", "|---|---|---|---|---|"]
    for r in in_process + http:
        for row in r.get("latency", []):
            if "p50_ms" in row:
                lines.append(f"| {r['system']} | {row['tokens']} | {fmt(row['p50_ms'], 2)} | "
                             f"{fmt(row['p90_ms'], 2)} | {fmt(row['p99_ms'], 2)} |")
            else:
                lines.append(f"| {r['system']} | {row['tokens']} | not applicable: "
                             f"{row['not_applicable']} | | |")

    lines += ["", "## Low-latency scoring (one query, N documents of 512 tokens, cosine)", "",
              "| system | documents | p50 ms | p90 ms | p99 ms |", "|---|---|---|---|---|"]
    for r in in_process + http:
        for row in r.get("scoring", []):
            lines.append(f"| {r['system']} | {row['documents']} | {fmt(row['p50_ms'])} | "
                         f"{fmt(row['p90_ms'])} | {fmt(row['p99_ms'])} |")

    lines += ["", "## High-throughput embeddings (batches of 100 texts of 128 tokens)", "",
              "In-process systems run the batches one after another (the engine with four queued);"
              " over HTTP, four clients send them concurrently.", "",
              "| system | clients | requests/s | tokens/s | p50 ms | p99 ms |",
              "|---|---|---|---|---|---|"]
    for r in in_process + http:
        t = r.get("throughput")
        if t:
            lines.append(f"| {r['system']} | {t.get('clients', 1)} | "
                         f"{fmt(t['requests_per_s'], 3)} | {fmt(t['tokens_per_s'], 0)} | "
                         f"{fmt(t['p50_ms'], 0)} | {fmt(t['p99_ms'], 0)} |")

    lines += ["", "## High-concurrency embeddings (each client: one 128-token text at a time)",
              "", "| system | clients | requests/s | tokens/s | p50 ms | p90 ms | p99 ms | errors |",
              "|---|---|---|---|---|---|---|---|"]
    for r in http:
        for row in r.get("concurrency", []):
            lines.append(f"| {r['system']} | {row['clients']} | {fmt(row['requests_per_s'], 1)} | "
                         f"{fmt(row['tokens_per_s'], 0)} | {fmt(row['p50_ms'], 1)} | "
                         f"{fmt(row['p90_ms'], 1)} | {fmt(row['p99_ms'], 1)} | {row['errors']} |")
    lines += ["", "![latency against tokens](latency_vs_tokens.png)",
              "![throughput against concurrency](throughput_vs_concurrency.png)", ""]
    with open(os.path.join(args.out, "suites.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in in_process + http:
        rows = [row for row in r.get("latency", []) if "p50_ms" in row]
        if rows:
            ax.plot([row["tokens"] for row in rows], [row["p50_ms"] for row in rows], marker="o",
                    label=r["system"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens (batch 1)")
    ax.set_ylabel("p50 latency, ms")
    ax.set_title("Batch-1 latency against input length")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "latency_vs_tokens.png"), dpi=110)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in http:
        rows = r.get("concurrency", [])
        if rows:
            ax.plot([row["clients"] for row in rows], [row["tokens_per_s"] for row in rows],
                    marker="o", label=r["system"])
    ax.axhline(engine["throughput"]["tokens_per_s"], linestyle="--", color="gray",
               label="quiver engine, in-process")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent clients (one 128-token text per request)")
    ax.set_ylabel("tokens/s")
    ax.set_title("Throughput against concurrency (HTTP, loopback)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "throughput_vs_concurrency.png"), dpi=110)
    print("\n".join(lines[:20]))


if __name__ == "__main__":
    main()
