"""The goal ratios of a bench/int8_peers.py run, from what it recorded (its JSON), and the host's
state during each timed block: kept apart from the harness (which needs the peers' packages) so
that a saved run can be analyzed again and the rules tested anywhere
(tests/bench/peer_ratios_test.py).
"""

import statistics
def quiet_reference(probes):
    """The rate a quiet host gives the slower of its CPUs: the 90th percentile over the run's
    probes of the slower CPU's rate. Not the best probe: now and then a probe catches both CPUs
    at a clock they do not hold (run 31 on the Xeon: 212 GFLOP/s once, 210 once, the rest at
    most 198 and mostly 160-185), which would call every block of the run busy."""
    slowest = sorted(min(p["together_gflops"]) for p in probes)
    if not slowest:
        return 0.0
    return slowest[min(len(slowest) - 1, int(0.9 * len(slowest)))]


def analyze(result):
    """The goal ratios, from what a run recorded (so that --reanalyze can compute them again from
    a saved result): quiver f32's batch-1 p50 against the best f32 peer's, each precision's
    throughput against the best peer of that precision, and both over quiet and busy rounds."""
    probes = result.get("core_probes") or []
    quiet_fraction = result.get("quiet_fraction", 0.85)
    # A turn's or block's state: the slower CPU's rate in the probes before and after it, over
    # the run's quiet reference.
    slowest = [min(p["together_gflops"]) for p in probes]
    reference = quiet_reference(probes)
    result["quiet_reference_gflops"] = reference

    def quiet(i):
        return i is not None and min(slowest[i], slowest[i + 1]) >= quiet_fraction * reference

    def split_by_state(ratios, probes_a, probes_b):
        """The medians of the ratios over quiet rounds (both quiet) and the others."""
        if not probes:
            return None
        out = {}
        for state, keep in (("quiet", True), ("busy", False)):
            picked = [x for x, a, b in zip(ratios, probes_a, probes_b)
                      if (quiet(a) and quiet(b)) == keep]
            out[state] = {"rounds": len(picked),
                          "median_ratio": statistics.median(picked) if picked else None}
        return out
    gated_names = list(result["throughput_tokens_per_s"])
    p50 = result["latency_p50_ms"]
    block_medians = result["latency_block_medians_ms"]
    block_probes = result.get("latency_block_probes", {})
    rates = result["throughput_per_round"]
    rate_probes = result.get("throughput_round_probes", {})
    # quiver f32 against the best f32 peer: the ratio of p50s over all calls, and the median over
    # rounds of the ratio of the two systems' block medians in that round.
    f32_peers = [n for n in gated_names
                 if not n.startswith("quiver") and "int8" not in n and "bf16" not in n]
    against_best = {}
    if "quiver engine f32" in p50 and f32_peers:
        for key in p50["quiver engine f32"]:
            best = min((n for n in f32_peers if n in p50), key=lambda n: p50[n][key])
            round_ratios = [q / b for q, b in zip(block_medians["quiver engine f32"][key],
                                                  block_medians[best][key])]
            against_best[key] = {
                "best_peer": best,
                "p50_ratio": p50["quiver engine f32"][key] / p50[best][key],
                "median_round_ratio": statistics.median(round_ratios),
                "by_host_state": split_by_state(
                    round_ratios, block_probes.get("quiver engine f32", {}).get(key, []),
                    block_probes.get(best, {}).get(key, []))}
        result["f32_latency_against_best_peer"] = against_best
    # Throughput against the best peer of the same precision (OpenVINO's int8 and bf16 for quiver's:
    # the goals), the ratio of medians and each round's ratio.
    against_rate = {}
    for precision, quiver in (("f32", "quiver engine f32"), ("int8", "quiver engine int8"),
                              ("bf16", "quiver engine bf16")):
        if quiver not in rates:
            continue
        if precision == "f32":
            candidates = f32_peers
        else:
            candidates = [n for n in gated_names if n.startswith("OpenVINO") and precision in n]
        if not candidates:
            continue
        best = max(candidates, key=lambda n: result["throughput_tokens_per_s"][n])
        round_ratios = [q / b for q, b in zip(rates[quiver], rates[best])]
        against_rate[precision] = {
            "best_peer": best,
            "ratio": result["throughput_tokens_per_s"][quiver]
            / result["throughput_tokens_per_s"][best],
            "round_ratios": round_ratios,
            "median_round_ratio": statistics.median(round_ratios) if round_ratios else None,
            "by_host_state": split_by_state(round_ratios, rate_probes.get(quiver, []),
                                            rate_probes.get(best, []))}
    result["throughput_against_best_peer"] = against_rate


def report(result):
    """Prints a run's figures and the goal ratios analyze() computed."""
    p50 = result["latency_p50_ms"]
    for n, rate in result["throughput_tokens_per_s"].items():
        latency = "  ".join(f"p50@{key} {ms:7.2f} ms" for key, ms in p50.get(n, {}).items())
        print(f"{n:60s} {rate:9.0f} tokens/s  {latency}")
    against_rate = result.get("throughput_against_best_peer", {})
    against_best = result.get("f32_latency_against_best_peer", {})
    for precision, r in against_rate.items():
        median = r.get("median_round_ratio")
        print(f"throughput {precision}: quiver / {r['best_peer']} {r['ratio']:.3f} (rounds "
              + ", ".join(f"{x:.3f}" for x in r["round_ratios"]) + ")"
              + ("" if median is None else f", median of round ratios {median:.3f}"))
    for key, r in against_best.items():
        print(f"batch-1 at {key} tokens: quiver f32 / {r['best_peer']} p50 {r['p50_ratio']:.3f}, "
              f"median of round ratios {r['median_round_ratio']:.3f}")

    def by_state(r):
        if not r.get("by_host_state"):
            return ""
        return "; ".join(f"{state} rounds ({v['rounds']}): " +
                         ("-" if v["median_ratio"] is None else f"{v['median_ratio']:.3f}")
                         for state, v in r["by_host_state"].items())
    if result.get("core_probes"):
        reference = result["quiet_reference_gflops"]
        print(f"host state: quiet reference {reference:.1f} GFLOP/s on the slower CPU (90th "
              f"percentile of the probes), quiet from "
              f"{result.get('quiet_fraction', 0.85) * reference:.1f}")
        for precision, r in against_rate.items():
            print(f"  throughput {precision}: {by_state(r)}")
        for key, r in against_best.items():
            print(f"  batch-1 at {key} tokens: {by_state(r)}")
