#!/usr/bin/env bash
# The one prepared command for a GPU machine (an H200 lent for a few minutes, no network):
#
#   scripts/gpu-check.sh [OUT_DIR=gpu-out]
#
# run from the repository root there, with build-gpu/ and .cache/flashinfer-headers.tgz carried
# from the build machine (scripts/gpu-bundle.sh makes both); with the device tool:
#   run(command="bash scripts/gpu-check.sh $OUT", carry=["build-gpu",
#       ".cache/flashinfer-headers.tgz"], timeout_s=540)
#
# Stage time limits (seconds): ceilings 30, kernels 40, gemms 60, attention 90, graphs 45,
# models 60, engine 120, the peer 60 (its import check: a cold torch import took over 15 s on the
# first H200 run) + 90, Hugging Face's bf16 scores 90 = 705 at the very most, each stage given 3
# more to exit after SIGTERM; the first H200 runs took about a minute in all (2026-12-04). The
# rebuild fallback adds its build. QUIVER_GPU_EXTRA=1 also runs the ops tests' CUDA
# instantiations, the graphs and engine stages again with QUIVER_GEMM_AUTOTUNE=8 (120 s each at
# most) and compute-sanitizer memcheck on the kernels stage (60 s).
#
# Writes at most 8 files into OUT_DIR (what the device tool brings back): log.txt (everything,
# the summary table last), ceilings.json, kernels.json, attention.json, graphs.json, models.json,
# engine.json (quiver_gpu_check's stages) and peer.json (bench/gpu_peer_sentence_transformers.py:
# sentence-transformers on the same GPU, run where python3 imports torch and sentence_transformers).
# The models and engine stages share generated model folders (about 1.3 GB) in QUIVER_GPU_WORK
# (default /tmp/quiver-gpu-work), where the engine stage also leaves the peer's input. A stage
# that fails does not stop the script; graphs and engine, which need correct kernels, are skipped
# when the kernels stage failed. Exit status: 0 when every check passed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
R="${1:-gpu-out}"
mkdir -p "$R"
exec > >(tee "$R/log.txt") 2>&1
failed=0
step() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv || true
nvcc --version 2>/dev/null | tail -2 || true

# cuBLASLt comes from the machine (517 MB: never carried): the toolkit's, or a Python wheel's.
lt=""
for d in /usr/local/cuda/lib64 /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib \
         /usr/lib/x86_64-linux-gnu; do
  if compgen -G "$d/libcublasLt.so.13*" >/dev/null; then lt="$d"; break; fi
done
if [[ -z "$lt" ]]; then
  lt="$(python3 -c 'import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), "lib"))' 2>/dev/null || true)"
  compgen -G "$lt/libcublasLt.so.13*" >/dev/null || lt=""
fi
if [[ -z "$lt" ]]; then
  lt="$(dirname "$(find / -name 'libcublasLt.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)" 2>/dev/null || true)"
fi
echo "libcublasLt.so.13 from: ${lt:-NOT FOUND}"
python_ld="${LD_LIBRARY_PATH:-}"  # the peer (python3) runs with the image's own libraries
export LD_LIBRARY_PATH="$ROOT/build-gpu/lib${lt:+:$lt}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

B="$ROOT/build-gpu/quiver_gpu_check"
step "probe"
"$B" --probe
probe=$?
if (( probe != 0 && probe != 2 )); then
  # The carried binary does not start here (a loader or ABI problem): rebuild the CUDA-only
  # target on this machine from the carried headers (the toolkit and CMake are in the image).
  step "rebuild fallback (the carried binary exited $probe)"
  T="$(mktemp -d)"
  mkdir -p "$T/fi"
  if tar -xzf .cache/flashinfer-headers.tgz -C "$T/fi" && tar -xzf build-gpu/deps.tgz -C build-gpu &&
     cmake -S . -B "$T/b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUIVER_GPU_ONLY=ON \
       -DQUIVER_FLASHINFER_DIR="$T/fi" -DQUIVER_GPU_DEPS_DIR="$ROOT/build-gpu" &&
     ninja -C "$T/b" quiver_gpu_check; then
    B="$T/b/quiver_gpu_check"
    "$B" --probe
    probe=$?
  else
    echo "rebuild failed"
  fi
fi
if (( probe != 0 )); then
  echo "no usable device or binary (probe exit $probe): nothing else can run"
  exit 1
fi

W="${QUIVER_GPU_WORK:-/tmp/quiver-gpu-work}"
rm -f "$W/peer_input.json"  # only this run's engine stage may feed the peer
stage() {  # stage NAME SECONDS [extra args]
  local name="$1" secs="$2"
  shift 2
  step "stage $name (limit ${secs}s)"
  timeout --kill-after=3 "$secs" "$B" --stage="$name" --json "$R/$name.json" "$@"
  local rc=$?
  echo "stage $name: exit $rc"
  (( rc != 0 )) && failed=1
  return $rc
}

stage ceilings 30
stage kernels 40
kernels_ok=$?
stage attention 90 --ceilings "$R/ceilings.json"
if (( kernels_ok == 0 )); then
  stage graphs 45
else
  step "stage graphs skipped: the kernels stage failed"
  failed=1
fi
stage models 60 --work "$W"
if (( kernels_ok == 0 )); then
  stage engine 120 --work "$W" --ceilings "$R/ceilings.json"
else
  step "stage engine skipped: the kernels stage failed"
  failed=1
fi

step "peer: sentence-transformers on this GPU (limit 60+90s)"
if [[ ! -f "$W/peer_input.json" ]]; then
  echo "peer skipped: the engine stage wrote no $W/peer_input.json"
elif ! LD_LIBRARY_PATH="$python_ld" timeout 60 \
       python3 -c "import torch, sentence_transformers"; then
  echo "peer skipped: python3 cannot import torch and sentence_transformers here"
else
  LD_LIBRARY_PATH="$python_ld" PYTHONUNBUFFERED=1 timeout --kill-after=3 90 \
    python3 bench/gpu_peer_sentence_transformers.py --input "$W/peer_input.json" \
    --json "$R/peer.json"
  rc=$?
  echo "peer: exit $rc"
  (( rc != 0 )) && failed=1
fi

# Hugging Face's own bf16 scores on the score fixtures (tools/golden/hf_bf16_scores.py): the
# yardstick the models stage reads from tests/fixtures/tiny/hf_bf16_scores.json, printed here so
# that a run can refresh it (the log comes back; OUT_DIR's 8 files are taken).
step "Hugging Face bf16 scores on the score fixtures (limit 90s)"
LD_LIBRARY_PATH="$python_ld" PYTHONUNBUFFERED=1 timeout --kill-after=3 90 \
  python3 tools/golden/hf_bf16_scores.py --out /tmp/quiver-hf-bf16-scores.json &&
  echo "HF_BF16_SCORES_JSON $(tr -d '\n' < /tmp/quiver-hf-bf16-scores.json)" ||
  echo "the Hugging Face bf16 scores did not run here"

if [[ "${QUIVER_GPU_EXTRA:-0}" == 1 ]]; then
  # Their files stay out of OUT_DIR (the device tool brings back 8); the log has their output.
  if [[ -x build-gpu/engine_ops_test ]]; then
    step "ops tests, CUDA instantiations"
    timeout --kill-after=5 60 build-gpu/engine_ops_test --gtest_filter='*cuda*' \
      --gtest_output="xml:/tmp/quiver-ops-test.xml" || failed=1
  fi
  # cuBLASLt's heuristic first (the default) against the fastest of its first 8 timed on the
  # call's operands (blaslt.h): the graphs and engine stages again with QUIVER_GEMM_AUTOTUNE=8,
  # their reports in the log only.
  if (( kernels_ok == 0 )); then
    for name in graphs engine; do
      step "stage $name with QUIVER_GEMM_AUTOTUNE=8 (limit 120s)"
      QUIVER_GEMM_AUTOTUNE=8 timeout --kill-after=3 120 "$B" --stage="$name" \
        --json "/tmp/quiver-$name-autotune.json" --work "$W" --ceilings "$R/ceilings.json" || failed=1
    done
  fi
  if command -v compute-sanitizer >/dev/null 2>&1; then
    step "compute-sanitizer memcheck, kernels stage, quick sizes"
    timeout --kill-after=5 60 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$B" --stage=kernels --quick --json /tmp/memcheck-kernels.json || failed=1
  fi
fi

step "summary"
"$B" --summary "$R"
exit $failed
