#!/usr/bin/env bash
# Fails, naming the files, where a C++ or CUDA source of the repository differs from what
# clang-format makes of it under .clang-format (STYLE: the layout is the formatter's, not a
# reviewer's); `make format` rewrites them. Run by ctest as the test `format`. Debian 12's
# clang-format 14 is the reference (scripts/setup.sh installs it): another major version lays out
# some constructs differently, so with one the check is skipped (exit 77, ctest's skip), saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/clang-tool.sh  # the working directory is the repository now
require_clang_tool clang-format check-format
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')
else  # an export without .git
  mapfile -t files < <(find . -path ./build -prune -o -path ./.cache -prune -o \
    \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||')
fi
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue  # deleted in the working tree
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not as clang-format lays them out:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "run \`make format\` (or clang-format -i FILE) and commit the result" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files as clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1) lays them out"
