"""bench/core_probe.cc: one JSON line with a rate per CPU, alone and together, pinned.

    core_probe_test.py QUIVER_CORE_PROBE

bench/int8_peers.py reads "together_gflops" (the slower CPU's rate classes each timed block);
a probe that printed nothing usable, or ran its threads unpinned, would misclass every block.
"""

import json
import os
import subprocess
import sys


def main():
    probe = sys.argv[1]
    cpus = len(os.sched_getaffinity(0))
    out = subprocess.run([probe, "--threads", "2", "--ms", "20"], capture_output=True, text=True,
                         check=True, timeout=60)
    lines = out.stdout.splitlines()
    assert len(lines) == 1, out.stdout
    record = json.loads(lines[0])
    want = min(2, cpus)
    assert len(record["cpus"]) == want, record
    assert record["pinned"] is True, record
    for key in ("alone_gflops", "together_gflops"):
        assert len(record[key]) == want and all(r > 0 for r in record[key]), record
    # The share is the sum together over the sum alone: near 1 on a core to itself, near 1/2 when
    # the two threads take turns on one core's units; never far outside (0, 1] beyond noise.
    assert 0.2 < record["share"] < 2.0, record
    for bad in (["--threads", "0"], ["--ms", "x"], ["--what", "1"]):
        code = subprocess.run([probe, *bad], capture_output=True, timeout=60).returncode
        assert code == 2, (bad, code)
    print("core probe:", lines[0])


if __name__ == "__main__":
    main()
