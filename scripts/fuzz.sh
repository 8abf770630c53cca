#!/usr/bin/env bash
# Builds the tokenizer fuzzer with clang, ASan and UBSan, and runs it.
#
#   scripts/fuzz.sh [seconds]     default 600; log and any crash input under out/fuzz/
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_TO_RUN="${1:-600}"
BUILD="$ROOT/build-fuzz"
OUT="$ROOT/out/fuzz"
mkdir -p "$OUT/corpus"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DQUIVER_FUZZ=ON -DQUIVER_SANITIZE=address,undefined -DQUIVER_CUDA=OFF \
    -DQUIVER_BUILD_BENCH=OFF
fi
cmake --build "$BUILD" --target tokenizer_fuzz -j "$(nproc)"
# Seeds: a few corpus queries and documents, so the fuzzer starts from real text.
python3 - "$ROOT/corpus" "$OUT/corpus" <<'PY'
import json, sys, pathlib
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for name in ("queries.jsonl", "docs_multi.jsonl"):
    for i, line in enumerate(open(src / name, encoding="utf-8")):
        if i % 97 == 0:
            text = json.loads(line)["text"][:2000].encode()
            for control in (0, 13, 142):
                (dst / f"{name}-{i}-{control}").write_bytes(bytes([control]) + text)
PY
cd "$OUT"
"$BUILD/tests/tokenizer_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=8192 -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 "$OUT/corpus" 2>&1 | tee "$OUT/fuzz.log" | tail -20
