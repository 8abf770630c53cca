#!/usr/bin/env bash
# Fails, naming each finding, where the library code (common, tokenizer, engine, scheduler,
# worker, gateway, telemetry, app; not tests or benchmarks) breaks a rule of .clang-tidy: the
# bug-prone and performance checks, Google's rules and naming (docs/style.md 10). Run by ctest as the
# test `tidy`, over the sources this build compiles (its compile_commands.json; CUDA host files
# only where the CUDA toolkit is found), all cores in parallel. Debian 12's clang-tidy 14 is the
# reference (scripts/setup.sh installs it): another major version has other checks and other
# false positives, so with one the check is skipped (exit 77, ctest's skip), saying so.
#
#   scripts/check-tidy.sh BUILD_DIR [FILE...]    (FILEs: only those; default: every one)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:?usage: check-tidy.sh BUILD_DIR [FILE...]}" && pwd)"
shift
cd "$root"
source "$root/scripts/clang-tool.sh"
require_clang_tool clang-tidy check-tidy
if [ ! -f "$build/compile_commands.json" ]; then
  echo "check-tidy: $build/compile_commands.json is missing (configure the build first)" >&2
  exit 1
fi
if (($#)); then
  files=("$@")
else
  # The library's sources that this build compiles, as paths relative to the repository.
  mapfile -t files < <(python3 - "$build/compile_commands.json" "$root" <<'PY'
import json, os, re, sys
root = os.path.realpath(sys.argv[2])
dirs = re.compile(r"^(common|tokenizer|engine|scheduler|worker|gateway|telemetry|app)/.*\.cc$")
# app/cpu_check.cc asks __builtin_cpu_supports("x86-64-v3"), which GCC 12 (the compiler) knows
# and clang 14's parser does not: a compile error there, not a finding.
seen = {"app/cpu_check.cc"}
for entry in json.load(open(sys.argv[1])):
    path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(path, root)
    if dirs.match(rel) and rel not in seen:
        seen.add(rel)
        print(rel)
PY
  )
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
jobs="$(nproc)"
# One clang-tidy per few files; each prints its findings (warnings are errors, .clang-tidy).
if ! printf '%s\n' "${files[@]}" |
  xargs -P "$jobs" -n 4 clang-tidy -p "$build" --quiet >"$log" 2>&1; then
  findings=$(grep -E '^[^ ].*: error: ' "$log" | sort -u)
  if [ -z "$findings" ]; then
    cat "$log" >&2  # clang-tidy itself failed (a compile error): its whole output
  else
    echo "check-tidy: $(grep -c . <<<"$findings") findings in ${#files[@]} files:" >&2
    sed "s|^$root/||" <<<"$findings" >&2
  fi
  echo "fix them, or, where a rule does not fit, say why beside a NOLINT(check)" >&2
  exit 1
fi
echo "check-tidy: ${#files[@]} files pass clang-tidy $(clang-tidy --version | grep -o '[0-9][0-9.]*' | head -1)"
