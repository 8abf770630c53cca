#!/usr/bin/env bash
# Regenerates tests/fixtures/ from the upstream implementations.
#
#   tools/golden/run.sh              creates .cache/golden-venv (torch etc., several GB) and runs
#   GOLDEN_VENV=/path tools/golden/run.sh   reuses an existing venv with the same pins
#   tools/golden/run.sh --tokenizers         only the tokenizer fixtures (tests/fixtures/tokenizers,
#                                            the WordPiece offsets included)
#
# Needs the default model (scripts/fetch-model.sh) and corpus/. CI never runs this.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${GOLDEN_VENV:-$ROOT/.cache/golden-venv}"
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q -r "$ROOT/tools/golden/requirements.txt"
"$ROOT/scripts/fetch-model.sh"
# One rayon thread: the Unigram trainer sums in parallel, and its result depends on the order.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONHASHSEED=0 \
  RAYON_RS_NUM_CPUS=1
if [[ "${1:-}" == "--tokenizers" ]]; then
  shift
  "$VENV/bin/python" "$ROOT/tools/golden/make_tokenizer_fixtures.py" "$@"
  exec "$VENV/bin/python" "$ROOT/tools/golden/make_offset_fixtures.py"
fi
exec "$VENV/bin/python" "$ROOT/tools/golden/make_fixtures.py" "$@"
