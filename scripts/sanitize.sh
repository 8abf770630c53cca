#!/usr/bin/env bash
# Builds quiver (CPU only) with a sanitizer and runs every test under it: the C++ tests and the
# Python tests, whose servers, workers and gateways are the sanitized binaries. Not part of
# `make test` (the build and the run take 20-40 minutes on 2 cores); results in docs/reliability.md.
#
#   scripts/sanitize.sh [address|thread] [ctest arguments...]     default: address
#     address   AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer), in build-asan/
#     thread    ThreadSanitizer, in build-tsan/
#
# Every sanitized process writes its reports under out/sanitize/KIND/ (ASAN_OPTIONS /
# UBSAN_OPTIONS / TSAN_OPTIONS log_path), so a report from a server that a Python test started and
# stopped is not lost in that test's captured stderr. The run fails when a test fails or when any
# report was written.
#
# Left out: the `format` and `tidy` tests (no sanitizer concerns), and the descriptor-exhaustion
# case of tests/reliability/faults_test.py (run with the others through QUIVER_FAULTS_CASES): with
# every file descriptor used, UBSan's vptr check cannot make the pipe it probes memory with and
# reports a valid boost::system::error_category as an invalid object.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIND="${1:-address}"
shift || true
case "$KIND" in
  address) BUILD="$ROOT/build-asan"; SANITIZE="address,undefined" ;;
  thread) BUILD="$ROOT/build-tsan"; SANITIZE="thread" ;;
  *) echo "sanitize.sh: unknown kind '$KIND' (address or thread)" >&2; exit 2 ;;
esac
OUT="$ROOT/out/sanitize/$KIND"
if [[ ! -d "$ROOT/models/all-MiniLM-L6-v2" ]]; then
  echo "sanitize.sh: models/all-MiniLM-L6-v2 is missing; run 'make test' (or scripts/setup.sh) once first" >&2
  exit 2
fi
rm -rf "$OUT"
mkdir -p "$OUT/reports"

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQUIVER_CUDA=OFF \
  -DQUIVER_SANITIZE="$SANITIZE" -DQUIVER_BUILD_BENCH=OFF > "$OUT/configure.log"
cmake --build "$BUILD" -j "$(nproc)"

export ASAN_OPTIONS="log_path=$OUT/reports/asan:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="log_path=$OUT/reports/ubsan:print_stacktrace=1"
# second_deadlock_stack: both stacks of a lock-order inversion.
export TSAN_OPTIONS="log_path=$OUT/reports/tsan:second_deadlock_stack=1:halt_on_error=0:suppressions=$ROOT/scripts/tsan.supp"

status=0
if [[ "$KIND" == address ]]; then
  (cd "$BUILD" && ctest -j "$(nproc)" --timeout 1800 --output-on-failure \
    -E '^(tidy|format|reliability_faults)$' "$@") > "$OUT/ctest.log" 2>&1 || status=1
  tail -n 15 "$OUT/ctest.log"
  QUIVER_FAULTS_CASES=client_gone_and_deadline,drain,hung_worker QUIVER_FAULTS_DRAIN_TIMEOUT=8 \
    python3 "$ROOT/tests/reliability/faults_test.py" "$BUILD/quiver" \
    "$ROOT/models/all-MiniLM-L6-v2" "$ROOT/corpus" > "$OUT/faults.log" 2>&1 || status=1
  tail -n 1 "$OUT/faults.log"
else
  # The C++ tests only (their names hold a '.'): under TSan a server starts 5-15 times slower
  # than the Python tests' start-up waits allow.
  (cd "$BUILD" && ctest -j "$(nproc)" --timeout 1800 --output-on-failure -R '[.]' "$@") \
    > "$OUT/ctest.log" 2>&1 || status=1
  tail -n 15 "$OUT/ctest.log"
fi

reports=$(find "$OUT/reports" -type f | sort)
if [[ -n "$reports" ]]; then
  status=1
  echo "sanitize.sh: $(echo "$reports" | wc -l) report(s) under $OUT/reports:"
  for f in $reports; do
    echo "== $f"
    head -n 40 "$f"
  done
fi
if [[ $status -eq 0 ]]; then
  echo "sanitize.sh: $KIND: every test passed, no reports"
else
  echo "sanitize.sh: $KIND: failures (logs under $OUT)"
fi
exit $status
