"""bench/peer_ratios.py: the goal ratios and host states of a bench/int8_peers.py run.

    peer_ratios_test.py

A small run made up here, its expected figures worked out by hand: the best peer of each
precision, the ratios of medians and per round, and which rounds count as quiet, with one probe
far above the others (a clock the CPUs did not hold) that must not make every block busy.
"""

import copy
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from peer_ratios import analyze, quiet_reference  # noqa: E402

OV_F32 = "OpenVINO f32"
OV_F32_HINT = "OpenVINO f32, throughput hint, 16 texts a request"
OV_INT8 = "OpenVINO + NNCF int8"
ORT_INT8 = "ONNX Runtime dynamic int8"
ST = "sentence-transformers f32"


def probe(slower, faster=170.0):
    return {"together_gflops": [faster, slower]}


def run():
    # Probes 0-20: ten at 170, nine at 160, one at 100 (index 3, busy), one at 212 (index 20, the
    # outlier). Sorted slower rates: 100, 160 x9, 170 x10, 212; the 90th percentile (index 19 of
    # 21) is 170, so blocks are quiet from 0.85 x 170 = 144.5; by the best probe they would be
    # quiet only from 180.2, i.e. never.
    probes = [probe(170.0) for _ in range(21)]
    for i in range(4, 13):
        probes[i] = probe(160.0)
    probes[3] = probe(100.0)
    probes[20] = probe(212.0, faster=215.0)
    return {
        "core_probes": probes,
        "quiet_fraction": 0.85,
        "throughput_tokens_per_s": {"quiver engine f32": 13000.0, "quiver engine int8": 50000.0,
                                    ST: 9000.0, OV_F32: 11000.0, OV_F32_HINT: 12000.0,
                                    OV_INT8: 40000.0, ORT_INT8: 45000.0},
        # Two rounds each; the probe before each turn. Round 1 of quiver f32 starts at probe 2,
        # which is followed by the busy probe 3.
        "throughput_per_round": {"quiver engine f32": [13200.0, 12800.0],
                                 "quiver engine int8": [50000.0, 50000.0],
                                 ST: [9000.0, 9000.0], OV_F32: [11000.0, 11000.0],
                                 OV_F32_HINT: [12000.0, 11000.0],
                                 OV_INT8: [40000.0, 40000.0], ORT_INT8: [45000.0, 45000.0]},
        "throughput_round_probes": {"quiver engine f32": [0, 2], "quiver engine int8": [4, 5],
                                    ST: [6, 7], OV_F32: [8, 9], OV_F32_HINT: [10, 11],
                                    OV_INT8: [12, 13], ORT_INT8: [14, 15]},
        # The throughput-hint configuration has no batch-1 figures (throughput only).
        "latency_p50_ms": {"quiver engine f32": {"128": 9.0}, ST: {"128": 20.0},
                           OV_F32: {"128": 12.0}},
        "latency_block_medians_ms": {"quiver engine f32": {"128": [9.0, 10.0]},
                                     ST: {"128": [20.0, 20.0]}, OV_F32: {"128": [12.0, 12.5]}},
        "latency_block_probes": {"quiver engine f32": {"128": [16, 17]},
                                 ST: {"128": [18, 18]}, OV_F32: {"128": [18, 19]}},
    }


def close(a, b):
    return abs(a - b) < 1e-9


def main():
    result = run()
    assert quiet_reference(result["core_probes"]) == 170.0
    assert quiet_reference([]) == 0.0
    analyze(result)
    assert result["quiet_reference_gflops"] == 170.0

    rate = result["throughput_against_best_peer"]
    f32 = rate["f32"]
    assert f32["best_peer"] == OV_F32_HINT, f32  # the best f32 peer, never quiver itself
    assert close(f32["ratio"], 13000.0 / 12000.0), f32
    assert all(close(a, b) for a, b in zip(f32["round_ratios"], [1.1, 12800.0 / 11000.0])), f32
    assert close(f32["median_round_ratio"], (1.1 + 12800.0 / 11000.0) / 2), f32
    # Round 0: quiver's turn (probes 0, 1) and the peer's (10, 11) quiet. Round 1: quiver's turn
    # runs from probe 2 to the busy probe 3.
    assert f32["by_host_state"]["quiet"] == {"rounds": 1, "median_ratio": 1.1}, f32
    assert f32["by_host_state"]["busy"]["rounds"] == 1, f32
    int8 = rate["int8"]
    # int8 is held to OpenVINO's int8 (the goal), not to a faster peer of another make.
    assert int8["best_peer"] == OV_INT8, int8
    assert close(int8["ratio"], 1.25), int8
    assert int8["by_host_state"]["quiet"]["rounds"] == 2, int8

    latency = result["f32_latency_against_best_peer"]["128"]
    assert latency["best_peer"] == OV_F32, latency
    assert close(latency["p50_ratio"], 0.75), latency
    assert close(latency["median_round_ratio"], (9.0 / 12.0 + 10.0 / 12.5) / 2), latency
    assert latency["by_host_state"]["quiet"]["rounds"] == 2, latency

    # The outlier alone as the reference would have called every round busy.
    everything_busy = copy.deepcopy(run())
    everything_busy["quiet_fraction"] = 0.85 * 212.0 / 170.0
    analyze(everything_busy)
    assert everything_busy["throughput_against_best_peer"]["f32"]["by_host_state"]["quiet"][
        "rounds"] == 0
    print("ok")


if __name__ == "__main__":
    main()
