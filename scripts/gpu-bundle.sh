#!/usr/bin/env bash
# Prepares what scripts/gpu-check.sh needs on a GPU machine, which has the CUDA toolkit and
# driver but none of the Debian libraries quiver links, and no network:
#
#   build-gpu/quiver_gpu_check     the CUDA-only check (tests/gpu/), libstdc++ linked statically
#   build-gpu/engine_ops_test      the ops tests, whose CUDA instantiations run there; only with
#                                  QUIVER_GPU_EXTRA=1, when gpu-check.sh runs them (their 7 MB,
#                                  with the check now linking the whole engine, left the bundle
#                                  about 140 KiB over the size check below)
#   build-gpu/lib/                 every shared library those need that is neither glibc's nor
#                                  CUDA's (absl, fmt, spdlog, simdjson, gtest ...), from ldd
#   build-gpu/deps.tgz             the headers of those libraries, for the rebuild fallback
#   .cache/flashinfer-headers.tgz  FlashInfer + CUTLASS + CCCL headers, for the same fallback
#
#   scripts/gpu-bundle.sh [BUILD_DIR=build] [OUT=build-gpu]
#
# The device tool carries build-gpu/ and .cache/flashinfer-headers.tgz with the tree (64 MiB in
# all, the tracked files included); this script fails when they would not fit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUT="${2:-$ROOT/build-gpu}"
log() { printf '[gpu-bundle] %s\n' "$*" >&2; }

[[ -x "$BUILD/quiver_gpu_check" ]] || { log "no $BUILD/quiver_gpu_check: build it first"; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT/lib" "$OUT/deps/include"  # deps/ is packed into deps.tgz below
cp "$BUILD/quiver_gpu_check" "$OUT/"
if [[ "${QUIVER_GPU_EXTRA:-0}" == 1 && -x "$BUILD/tests/engine_ops_test" ]]; then
  cp "$BUILD/tests/engine_ops_test" "$OUT/"
fi
# Symbol tables out (the device code stays): about a megabyte of the 64 MiB that travel.
strip --strip-unneeded "$OUT"/quiver_gpu_check "$OUT"/engine_ops_test 2>/dev/null || true

# Libraries the image has itself (glibc, the compiler runtime, CUDA's) stay behind.
keep_behind='^(linux-vdso|ld-linux|libc\.|libm\.|libmvec\.|libdl\.|libpthread\.|librt\.|libgcc_s|libstdc\+\+|libcuda|libcublas|libcudart|libnv)'
for bin in "$OUT"/quiver_gpu_check "$OUT"/engine_ops_test; do
  [[ -e "$bin" ]] || continue
  while read -r name _ path _; do
    [[ -n "${path:-}" && -f "$path" ]] || continue
    if [[ ! "$name" =~ $keep_behind ]]; then cp -L "$path" "$OUT/lib/$name"; fi
  done < <(ldd "$bin" | grep '=>')
done

runpath="$(readelf -d "$OUT/quiver_gpu_check" | sed -n 's/.*\(RUNPATH\|RPATH\).*\[\(.*\)\]/\2/p')"
if [[ "$runpath" != *'$ORIGIN/lib'* ]]; then
  log "ERROR: quiver_gpu_check's RUNPATH is '$runpath', not \$ORIGIN/lib"
  exit 1
fi
if readelf -d "$OUT/quiver_gpu_check" | grep -q 'libstdc++'; then
  log "ERROR: quiver_gpu_check needs libstdc++.so (it must link it statically)"
  exit 1
fi

# Headers of the carried libraries, for a rebuild there (cmake -DQUIVER_GPU_ONLY=ON).
for dir in absl fmt spdlog; do cp -r "/usr/include/$dir" "$OUT/deps/include/"; done
cp /usr/include/simdjson.h "$OUT/deps/include/"
tar -C "$OUT" -czf "$OUT/deps.tgz" deps
rm -rf "$OUT/deps"

"$ROOT/scripts/fetch-flashinfer.sh" --tarball

tree_kb=$(( $(git -C "$ROOT" ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) / 1024 ))
carry_kb=$(( $(du -sk "$OUT" | cut -f1) + $(du -sk "$ROOT/.cache/flashinfer-headers.tgz" | cut -f1) ))
log "bundle: $(du -sh "$OUT" | cut -f1) in $OUT, $(du -sh "$ROOT/.cache/flashinfer-headers.tgz" | cut -f1) of headers;" \
    "with the $((tree_kb / 1024)) MiB of tracked files $(((tree_kb + carry_kb) / 1024)) MiB travel"
ls -1 "$OUT/lib" >&2
if (( tree_kb + carry_kb > 64 * 1024 - 256 )); then
  log "ERROR: over 64 MiB less a margin: the device tool carries 64 MiB with the tree. The check"
  log "reads none of the corpus: for the call, take corpus/docs_en.jsonl and docs_multi.jsonl out"
  log "of the index (git rm --cached, both named in .git/info/exclude), then add them back"
  log "(docs/benchmarks.md, \"GPU\")"
  exit 1
fi
