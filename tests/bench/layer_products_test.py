"""bench/layer_products.cc: one JSON line per row count, every rate a positive number.

    layer_products_test.py QUIVER_LAYER_PRODUCTS_BENCH

docs/benchmarks.md reads its shapes' rates against "resident" (the same kernels with their
weights in cache) and "fma_peak" (the thread's FMA units): a line missing one, or a rate of zero,
would make those fractions meaningless. Flags it does not take are refused with exit status 2.
"""

import json
import subprocess
import sys


def main():
    bench = sys.argv[1]
    out = subprocess.run([bench, "--rounds", "1", "--rows", "14,29"], capture_output=True,
                         text=True, check=True, timeout=120)
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout
    for rows, line in zip((14, 29), lines):
        record = json.loads(line)
        assert record["rows"] == rows and record["rounds"] == 1, record
        assert record["path"], record
        for shape in ("qkv_gflops", "ffn_gflops"):
            assert record[shape]["repacked"] > 0 and record[shape]["streamed"] > 0, record
        assert record["resident_gflops"] > 0 and record["fma_peak_gflops"] > 0, record
    for bad in (["--rows", "0"], ["--rows", "x"], ["--rounds", "0"], ["--depth", "3"], ["--rows"]):
        r = subprocess.run([bench, *bad], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and r.stderr.strip(), (bad, r.returncode, r.stderr)
    print("layer_products bench: OK")


if __name__ == "__main__":
    main()
