#!/usr/bin/env bash
# Times the model's products with quiver's packed GEMM, OpenBLAS, BLIS and oneDNN
# (bench/gemm_choice.cc), the measurement behind the engine's choice of GEMM (docs/benchmarks.md).
# Installs libblis-dev and libdnnl-dev from Debian if they are missing; the engine itself links
# only OpenBLAS (for the attention-free heads) and its own packed GEMM.
#
#   bench/gemm_choice.sh > docs/benchmarks/gemm_choice.jsonl
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/.cache/gemm_choice"
mkdir -p "$OUT"
missing=()
for pkg in libopenblas-dev libblis-dev libdnnl-dev; do
  dpkg -s "$pkg" > /dev/null 2>&1 || missing+=("$pkg")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get install -y -q "${missing[@]}" >&2
fi
SRC="$ROOT/bench/gemm_choice.cc"
FLAGS=(-O2 -std=c++20 -pthread)
g++ "${FLAGS[@]}" -DQUIVER_GEMM_OPENBLAS "$SRC" -o "$OUT/openblas" \
  $(pkg-config --cflags --libs openblas)
# Debian installs BLIS per threading model (blis-openmp, blis-pthread); any one will do.
BLIS_INC="$(dirname "$(ls /usr/include/*/blis-*/blis.h | head -1)")"
BLIS_LIB="/usr/lib/$(basename "$(dirname "$BLIS_INC")")/$(basename "$BLIS_INC")"
g++ "${FLAGS[@]}" -DQUIVER_GEMM_BLIS -I"$BLIS_INC" "$SRC" -o "$OUT/blis" -L"$BLIS_LIB" -lblis \
  -Wl,-rpath,"$BLIS_LIB" -fopenmp
g++ "${FLAGS[@]}" -DQUIVER_GEMM_DNNL "$SRC" -o "$OUT/dnnl" -ldnnl
g++ "${FLAGS[@]}" -O3 -march=x86-64-v3 -DQUIVER_GEMM_OWN -I"$ROOT" "$SRC" \
  "$ROOT/engine/kernels/cpu/gemm.cc" -o "$OUT/own"
"$OUT/own"
"$OUT/openblas"
"$OUT/blis"
OMP_NUM_THREADS=2 "$OUT/dnnl" own
OMP_NUM_THREADS=1 "$OUT/dnnl" blocks
