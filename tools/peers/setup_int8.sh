#!/usr/bin/env bash
# Sets up the int8 peers bench/int8_peers.py measures quiver's --quantize int8 against: a venv
# (.cache/int8-peers-venv, or $INT8_PEERS_VENV) from tools/peers/requirements-int8.txt, and the
# ONNX export of the model (.cache/peers/<model>/model.onnx, by tools/peers/export_onnx.py, shared
# with tools/peers/setup.sh). OpenVINO's and NNCF's models are made by the benchmark itself, from
# the same ONNX file; and the texts it measures (.cache/bench/inputs.json, by bench/make_inputs.py,
# shared with bench/run_suites.sh). Idempotent. CI never runs this.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${INT8_PEERS_VENV:-$ROOT/.cache/int8-peers-venv}"
MODEL="${1:-$ROOT/models/all-MiniLM-L6-v2}"
OUT="$ROOT/.cache/peers/$(basename "$MODEL")"
"$ROOT/scripts/fetch-model.sh"
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q -r "$ROOT/tools/peers/requirements-int8.txt"
mkdir -p "$OUT"
if [[ ! -s "$OUT/model.onnx" ]]; then
  "$VENV/bin/python" "$ROOT/tools/peers/export_onnx.py" --model "$MODEL" --out "$OUT/model.onnx"
fi
INPUTS="$ROOT/.cache/bench/inputs.json"
# Made again when it predates the query lengths (16 and 32 tokens) of bench/make_inputs.py.
if [[ ! -s "$INPUTS" ]] || ! grep -q '"16": \[' "$INPUTS"; then
  mkdir -p "$(dirname "$INPUTS")"
  "$VENV/bin/python" "$ROOT/bench/make_inputs.py" --tokenizer "$MODEL/tokenizer.json" \
    --corpus "$ROOT/corpus" --out "$INPUTS"
fi
echo "$VENV"
