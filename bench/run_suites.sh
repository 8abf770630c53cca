#!/usr/bin/env bash
# The four suites for quiver and its peers, side by side in one run, then the report
# (docs/benchmarks/suites.{json,md}, docs/benchmarks/*.png). `make bench` runs this.
#
#   bench/run_suites.sh [--threads 2] [--seconds 5] [--out docs/benchmarks]
#
# Same model (all-MiniLM-L6-v2, f32), texts, and thread count everywhere:
#   1. quiver_engine_bench: the engine directly, and the machine's large-GEMM rate;
#   2. bench/peers.py: ONNX Runtime, sentence-transformers, llama.cpp in-process;
#   3. bench/paired.py: the engine and the peers in short turns (the acceptance comparisons);
#   4. bench/suites.py over HTTP against `quiver serve`, then bench/paired.py for the engine and
#      serve in turns (serve timed by quiver_http_bench, a C++ client, and by the Python client);
#      then the suites against llama-cpp-python's OpenAI-compatible server (the peer server that
#      installs here);
#   5. bench/report.py.
# Needs tools/peers/setup.sh (venv, ONNX export, GGUF conversion) and a build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THREADS=2 SECONDS_PER=5 OUT="$ROOT/docs/benchmarks" BUILD="${BUILD_DIR:-$ROOT/build}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --seconds) SECONDS_PER="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
MODEL="$ROOT/models/all-MiniLM-L6-v2"
PEERS_VENV="${PEERS_VENV:-$ROOT/.cache/peers-venv}"
PEERS="$ROOT/.cache/peers/all-MiniLM-L6-v2"
RUN="$ROOT/.cache/bench/run"
INPUTS="$ROOT/.cache/bench/inputs.json"
PORT_QUIVER=18480 PORT_LLAMA=18481
mkdir -p "$RUN" "$OUT"
rm -f "$RUN"/*.json  # nothing from an earlier run reaches the report
PY="$PEERS_VENV/bin/python"

"$PY" "$ROOT/bench/make_inputs.py" --tokenizer "$MODEL/tokenizer.json" \
  --corpus "$ROOT/corpus" --out "$INPUTS"

echo "== machine" >&2
{ echo "{\"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\","
  echo " \"cores\": $(nproc), \"threads\": $THREADS, \"date\": \"$(date -u +%F)\","
  echo " \"commit\": \"$(git -C "$ROOT" rev-parse --short HEAD)\"}"; } > "$RUN/machine.json"

echo "== quiver engine" >&2
"$BUILD/quiver_engine_bench" --model "$MODEL" --inputs "$INPUTS" --threads "$THREADS" \
  --seconds "$SECONDS_PER" > "$RUN/engine.json" 2> "$RUN/engine.err" || { cat "$RUN/engine.err" >&2; exit 1; }
cat "$RUN/engine.err" >&2
# Where OpenBLAS fell back to kernels older than the host (quiver_engine_bench warns, naming the
# core type that fits), the large-GEMM ceiling is measured again with it forced.
CORE="$(sed -n 's/.*OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' "$RUN/engine.err")"
if [[ -n "$CORE" ]]; then
  echo "== quiver engine again, OpenBLAS forced to $CORE" >&2
  export OPENBLAS_CORETYPE="$CORE"
  "$BUILD/quiver_engine_bench" --model "$MODEL" --inputs "$INPUTS" --threads "$THREADS" \
    --seconds "$SECONDS_PER" > "$RUN/engine.json"
fi

echo "== peers in-process" >&2
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS="$THREADS" \
  "$PY" "$ROOT/bench/peers.py" --model "$MODEL" --onnx "$PEERS/model.onnx" \
  --gguf "$PEERS/model-f32.gguf" --inputs "$INPUTS" --threads "$THREADS" \
  --seconds "$SECONDS_PER" --out "$RUN/peers.json"

# The comparisons the acceptance points make, measured in short turns (bench/paired.py): the
# engine and the peers at batch 1 (128 and 512 tokens) and on throughput. This machine drifts by
# milliseconds within seconds, so figures compared with each other are taken close together; and
# each process keeps its own speed, so the rounds are shared among 4 fresh process sets.
echo "== engine and peers in turns" >&2
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS="$THREADS" \
  "$PY" "$ROOT/bench/paired.py" --compare peers --engine-bench "$BUILD/quiver_engine_bench" \
  --model "$MODEL" --inputs "$INPUTS" --threads "$THREADS" --onnx "$PEERS/model.onnx" \
  --gguf "$PEERS/model-f32.gguf" --rounds 20 --throughput-rounds 8 --processes 4 \
  --out "$RUN/paired-peers.json"

wait_ready() {  # url
  for _ in $(seq 120); do
    curl -sf "$1" > /dev/null && return 0
    sleep 0.5
  done
  echo "server at $1 never became ready" >&2
  return 1
}

echo "== quiver serve over HTTP" >&2
"$BUILD/quiver" --log-level warn serve --model "$MODEL" --port "$PORT_QUIVER" \
  --threads "$THREADS" --max-input-tokens 512 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
wait_ready "http://127.0.0.1:$PORT_QUIVER/ready"
"$PY" "$ROOT/bench/suites.py" --url "http://127.0.0.1:$PORT_QUIVER" --model all-MiniLM-L6-v2 \
  --name "quiver serve" --inputs "$INPUTS" --seconds "$SECONDS_PER" --out "$RUN/quiver-http.json"
kill "$SERVER"; wait "$SERVER" || true
# Engine and serve in turns, 4 process sets each with a server of its own: batch-1 latency at 128
# tokens (serve timed by the C++ client and by the Python one), and the engine's throughput
# against serve with 16 clients.
"$PY" "$ROOT/bench/paired.py" --compare serve --engine-bench "$BUILD/quiver_engine_bench" \
  --http-bench "$BUILD/quiver_http_bench" --model "$MODEL" --inputs "$INPUTS" --threads "$THREADS" \
  --served-model all-MiniLM-L6-v2 --rounds 40 --throughput-rounds 8 --clients 16 \
  --processes 4 --quiver "$BUILD/quiver" --out "$RUN/paired-serve.json"

echo "== llama-cpp-python server over HTTP" >&2
"$PY" -m llama_cpp.server --model "$PEERS/model-f32.gguf" --model_alias all-MiniLM-L6-v2 \
  --embedding true --n_threads "$THREADS" --n_threads_batch "$THREADS" --n_ctx 512 \
  --n_batch 512 --n_ubatch 512 --host 127.0.0.1 --port "$PORT_LLAMA" --verbose false \
  > "$RUN/llama-server.log" 2>&1 &
SERVER=$!
wait_ready "http://127.0.0.1:$PORT_LLAMA/v1/models"
"$PY" "$ROOT/bench/suites.py" --url "http://127.0.0.1:$PORT_LLAMA" --model all-MiniLM-L6-v2 \
  --name "llama-cpp-python server" --inputs "$INPUTS" --seconds "$SECONDS_PER" \
  --out "$RUN/llama-http.json"
kill "$SERVER"; wait "$SERVER" || true

"$PY" "$ROOT/bench/report.py" --run "$RUN" --out "$OUT"
