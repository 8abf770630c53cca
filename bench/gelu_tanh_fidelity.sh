#!/usr/bin/env bash
# How far BERT's exact (erf) GELU may be replaced by the tanh approximation, which is all
# cuBLASLt's GELU_BIAS epilogue offers: the same model folder with config.json's hidden_act set
# to gelu_pytorch_tanh, embedded by the CPU engine (f32) on the same texts, cosine per row.
#
#   bench/gelu_tanh_fidelity.sh [MODEL=models/all-MiniLM-L6-v2] [BUILD=build]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${1:-$ROOT/models/all-MiniLM-L6-v2}"
BUILD="${2:-$ROOT/build}"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
cp -r "$MODEL" "$T/tanh"
python3 - "$T/tanh/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c.get("hidden_act", "gelu") == "gelu", c.get("hidden_act")
c["hidden_act"] = "gelu_pytorch_tanh"
json.dump(c, open(sys.argv[1], "w"))
PY
head -400 "$ROOT/corpus/docs_en.jsonl" >"$T/docs.jsonl"
for set in docs queries; do
  input="$T/docs.jsonl"
  [[ $set == queries ]] && input="$ROOT/corpus/queries.jsonl"
  "$BUILD/quiver" embed --model "$MODEL" --input "$input" --output "$T/erf_$set.npy"
  "$BUILD/quiver" embed --model "$T/tanh" --input "$input" --output "$T/tanh_$set.npy"
done
"$ROOT/.venv/bin/python" - "$T" <<'PY'
import sys
import numpy as np
for s in ("docs", "queries"):
    a, b = np.load(f"{sys.argv[1]}/erf_{s}.npy"), np.load(f"{sys.argv[1]}/tanh_{s}.npy")
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    print(f"{s}: {a.shape[0]} rows, cosine erf vs tanh GELU: min {cos.min():.7f}, "
          f"median {np.median(cos):.7f}")
PY
