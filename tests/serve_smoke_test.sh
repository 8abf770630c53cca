#!/usr/bin/env bash
# `quiver serve` starts with the default model, logs its configuration, and exits 0 on SIGTERM;
# a bad model folder exits non-zero with a message naming it; a stop signal during start-up (the
# gateway waiting for workers that never answer, for up to 60 s) ends it at once, with status 0.
set -euo pipefail
QUIVER="$1"
MODEL="$2"
log="$(mktemp)"
trap 'rm -f "$log"; [[ -n "${pid:-}" ]] && kill -9 "$pid" 2>/dev/null || true' EXIT

fail() { echo "FAIL: $*"; echo "--- log:"; cat "$log"; exit 1; }

"$QUIVER" serve --model "$MODEL" --port 0 --host 127.0.0.1 2>"$log" &
pid=$!
for _ in $(seq 1 300); do
  grep -q "quiver serve: model=" "$log" && break
  kill -0 "$pid" 2>/dev/null || fail "quiver serve exited before logging its configuration"
  sleep 0.1
done
grep -q "quiver serve: model=all-MiniLM-L6-v2 path=$MODEL architecture=BertModel hidden=384" "$log" ||
  fail "configuration line missing"
grep -q " port=[1-9][0-9]* " "$log" || fail "port not in the configuration line"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -eq 0 ]] || fail "exit status $rc after SIGTERM, expected 0"
grep -q "SIGTERM\|Terminated" "$log" || fail "no stop line"

rc=0
"$QUIVER" serve --model /nonexistent/model 2>"$log" || rc=$?
[[ $rc -ne 0 ]] || fail "a missing model folder must not start"
grep -q "/nonexistent/model' does not exist" "$log" || fail "error does not name the folder"
"$QUIVER" gateway --workers 127.0.0.1:1 --model "$MODEL" --port 0 --host 127.0.0.1 2>"$log" &
pid=$!
sleep 1
kill -0 "$pid" 2>/dev/null || fail "quiver gateway exited before its start-up timeout"
kill -INT "$pid"
for _ in $(seq 1 50); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "quiver gateway still starting 5 s after SIGINT"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -eq 0 ]] || fail "exit status $rc after SIGINT during start-up, expected 0"
grep -q "quiver gateway: Interrupt received during start-up, stopping" "$log" ||
  fail "no start-up stop line"
echo "serve smoke test: 3 passed"
