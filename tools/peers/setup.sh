#!/usr/bin/env bash
# Sets up the peers `make bench` runs side by side with quiver, all on the same model:
#   - a venv (.cache/peers-venv, or $PEERS_VENV) with sentence-transformers on PyTorch, ONNX Runtime,
#     llama-cpp-python (built from its sdist) and its OpenAI-compatible server, matplotlib;
#   - .cache/peers/<model>/model.onnx, exported by tools/peers/export_onnx.py;
#   - .cache/peers/<model>/model-f32.gguf, converted by llama.cpp's own convert_hf_to_gguf.py,
#     taken from the llama-cpp-python sdist that was installed.
# Idempotent: what exists is kept. CI never runs this.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${PEERS_VENV:-$ROOT/.cache/peers-venv}"
MODEL="${1:-$ROOT/models/all-MiniLM-L6-v2}"
NAME="$(basename "$MODEL")"
OUT="$ROOT/.cache/peers/$NAME"
LLAMA_VERSION="$(sed -n 's/^llama-cpp-python\[server\]==//p' "$ROOT/tools/peers/requirements.txt")"

"$ROOT/scripts/fetch-model.sh"
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
# llama.cpp compiles for this machine's CPU (GGML_NATIVE), as a user installing it here would get.
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$VENV/bin/pip" install -q -r "$ROOT/tools/peers/requirements.txt"
mkdir -p "$OUT"

if [[ ! -s "$OUT/model.onnx" ]]; then
  "$VENV/bin/python" "$ROOT/tools/peers/export_onnx.py" --model "$MODEL" --out "$OUT/model.onnx"
fi

if [[ ! -s "$OUT/model-f32.gguf" ]]; then
  SDIST="$ROOT/.cache/peers/sdist"
  if [[ ! -d "$SDIST/llama_cpp_python-$LLAMA_VERSION" ]]; then
    mkdir -p "$SDIST"
    "$VENV/bin/pip" download -q --no-deps --no-binary :all: -d "$SDIST" \
      "llama-cpp-python==$LLAMA_VERSION"
    tar -xzf "$SDIST/llama_cpp_python-$LLAMA_VERSION.tar.gz" -C "$SDIST"
  fi
  LLAMA_CPP="$SDIST/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp"
  PYTHONPATH="$LLAMA_CPP/gguf-py" "$VENV/bin/python" "$LLAMA_CPP/convert_hf_to_gguf.py" \
    --outtype f32 --outfile "$OUT/model-f32.gguf" "$MODEL"
fi
echo "peers ready: $VENV, $OUT"
