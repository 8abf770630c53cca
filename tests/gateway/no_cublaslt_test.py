"""A CUDA build of quiver neither links nor maps cuBLASLt until a model runs on a GPU
(engine/kernels/cuda/cublaslt_library.h): the binary names no cuBLAS library among the ones the
loader must find (so it starts on a host without the CUDA libraries), and `quiver serve` on the
CPU, ready and after answering, has none mapped (opening it costs some 150 MB of resident memory).
Registered only for CUDA builds; its resident memory is printed, not checked.

    no_cublaslt_test.py QUIVER SOURCE_DIR
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import serving  # noqa: E402
from serving import check, failures  # noqa: E402

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")


def main():
    dynamic = subprocess.run(["readelf", "-d", QUIVER], capture_output=True, text=True,
                             check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    check("readelf lists the binary's libraries", len(needed) > 0, dynamic[:400])
    check("no cuBLAS library among them", not any("cublas" in n for n in needed), needed)

    proc, port, log = serving.start(QUIVER, MODEL, prefix="quiver-no-cublaslt-")
    try:
        def mapped():
            with open(f"/proc/{proc.pid}/maps") as f:
                return sorted({line.split()[-1] for line in f if "cublas" in line})

        def rss_mb():
            with open(f"/proc/{proc.pid}/status") as f:
                return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024

        check("nothing of cuBLAS mapped once ready", mapped() == [], mapped())
        ready_rss = rss_mb()
        status, out = serving.post_json(port, "/embed", {"inputs": ["a query to embed"]})
        check("the server answers on the CPU", status == 200 and len(out) == 1, out)
        check("nothing of cuBLAS mapped after answering", mapped() == [], mapped())
        print(f"resident memory: {ready_rss:.1f} MB ready, {rss_mb():.1f} MB after one request")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if failures:
        sys.exit(f"{len(failures)} failed: {failures}")


if __name__ == "__main__":
    main()
