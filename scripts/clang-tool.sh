# Sourced by scripts/check-format.sh and scripts/check-tidy.sh: `require_clang_tool TOOL WHO`
# returns when TOOL (clang-format, clang-tidy) is the reference version 14 (Debian 12's, which
# scripts/setup.sh installs); it fails when TOOL is missing, and exits 77 (ctest's skip), saying
# so, under another major version, whose layout or checks differ.
require_clang_tool() {
  local tool="$1" who="$2" major
  if ! command -v "$tool" >/dev/null; then
    echo "$who: $tool is not installed (scripts/setup.sh installs it)" >&2
    exit 1
  fi
  major=$("$tool" --version | grep -o 'version [0-9]*' | grep -o '[0-9]*$' || true)
  if [ "$major" != 14 ]; then
    echo "$who: skipped: $tool ${major:-of unknown version} is not the reference 14" \
      "(Debian 12's, which scripts/setup.sh installs)"
    exit 77
  fi
}
