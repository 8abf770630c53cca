#!/usr/bin/env bash
# Two builds of quiver_engine_bench in alternating fresh processes, ROUNDS times: each round runs
# both (2 s of the throughput suite, 100 x 128 tokens, 2 threads), A first in odd rounds and B
# first in even ones (the second process of a pair ran 1.5% slower on a Zen 5 whichever build it
# was), and prints A's and B's tokens/s and B / A, then the median ratio. For checking one change on a shared, drifting host:
# a round's two runs are seconds apart, and a fresh process per run draws its memory placement
# anew (bench/paired.py explains why both matter).
#
#   bench/pair_builds.sh BASELINE_BENCH CHANGED_BENCH ROUNDS [quiver_engine_bench flags...]
#   e.g. bench/pair_builds.sh /tmp/bench_before build/quiver_engine_bench 10 --quantize int8
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,9p "$0"; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
model=${MODEL:-models/all-MiniLM-L6-v2}
inputs=${INPUTS:-.cache/bench/inputs.json}
# One continuous throughput run in both builds: a build that measures the large-GEMM rate between
# rounds of it (--ceiling-rounds, since 2026-12-06) is asked not to, as older builds do not.
tokens_per_s() {
  local one_run=()
  if grep -qa -- --ceiling-rounds "$1"; then one_run=(--ceiling-rounds 0); fi
  "$1" --model "$model" --inputs "$inputs" --threads 2 --seconds 2 --suites throughput \
    --lengths 128 "${one_run[@]}" "${@:2}" 2>/dev/null | tail -1 |
    python3 -c "import json, sys; print(json.loads(sys.stdin.read())['throughput']['tokens_per_s'])"
}
ratios=()
for round in $(seq "$rounds"); do
  if (( round % 2 )); then
    ta=$(tokens_per_s "$a" "$@")
    tb=$(tokens_per_s "$b" "$@")
  else
    tb=$(tokens_per_s "$b" "$@")
    ta=$(tokens_per_s "$a" "$@")
  fi
  r=$(python3 -c "print(f'{$tb / $ta:.3f}')")
  ratios+=("$r")
  printf '%8.0f %8.0f %s\n' "$ta" "$tb" "$r"
done
python3 -c "import statistics, sys; print('median B/A', statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
