#!/usr/bin/env bash
# Builds the macOS addons on Linux, without Apple's SDK, into their platform packages:
#   npm/darwin-x64/po-sandbox.darwin-x64.node     (x86_64-apple-darwin)
#   npm/darwin-arm64/po-sandbox.darwin-arm64.node (aarch64-apple-darwin)
# `napi build -x` links them with cargo-zigbuild: zig's own macOS libSystem stub, cargo-zigbuild's
# libiconv stub, node-api symbols left to node at load (`-undefined dynamic_lookup`). No Apple
# framework is linked: on macOS the broker trusts Mozilla's roots, not the keychain (Cargo.toml).
# Built here, not run here: nothing on this machine can load a Mach-O file.
#
#   PO_SANDBOX_CROSS_CACHE    the zig venv (shared with scripts/cross-lint.sh; default
#                             ${XDG_CACHE_HOME:-$HOME/.cache}/po-sandbox-cross)
#   PO_SANDBOX_DARWIN_TARGETS the targets to build (default: both, space-separated)
#   MACOSX_DEPLOYMENT_TARGET  the oldest macOS the files load on (default 11.0; without it zig
#                             0.17.1 stamps minos 15.0)
#   CARGO_TARGET_DIR          where cargo builds (default target/)
# rustc warns that `xcrun` is missing: it only looks for an SDK, which this build does without.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=${PO_SANDBOX_CROSS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/po-sandbox-cross}
targets=${PO_SANDBOX_DARWIN_TARGETS:-x86_64-apple-darwin aarch64-apple-darwin}
zigbuild_version=0.24.1

die() { echo "build-darwin: $*" >&2; exit 1; }

# shellcheck source=scripts/lib/zig-venv.sh
. scripts/lib/zig-venv.sh
ensure_zig

# cargo-zigbuild from PyPI, into the same venv (pinned: its linker-argument fixes change often).
if ! "$cache/venv/bin/cargo-zigbuild" --version 2>/dev/null | grep -qx "cargo-zigbuild $zigbuild_version"; then
  echo "build-darwin: installing cargo-zigbuild==$zigbuild_version into $cache/venv"
  "$cache/venv/bin/pip" install --quiet --disable-pip-version-check \
    "cargo-zigbuild==$zigbuild_version" "ziglang==$zig_version" \
    || die "pip could not install cargo-zigbuild==$zigbuild_version into $cache/venv (network?)"
fi

# napi finds `cargo zigbuild` on PATH; cargo-zigbuild finds zig as the venv's `python -m ziglang`.
export PATH="$cache/venv/bin:$PATH"
export CARGO_ZIGBUILD_PYTHON_PATH=$cache/venv/bin/python
export MACOSX_DEPLOYMENT_TARGET=${MACOSX_DEPLOYMENT_TARGET:-11.0}

napi=./node_modules/.bin/napi
[ -x "$napi" ] || die "$napi is missing: run 'npm ci' first"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for t in $targets; do
  case $t in
    x86_64-apple-darwin) platform=darwin-x64 ;;
    aarch64-apple-darwin) platform=darwin-arm64 ;;
    *) die "not a darwin target this package ships: $t" ;;
  esac
  ensure_target "$t"
  printf '\n== build-darwin: napi build --platform --release --target %s -x\n' "$t"
  # Into a scratch folder: index.js and index.d.ts stay the host build's.
  "$napi" build --platform --release --target "$t" -x --output-dir "$out" --no-js
  mv "$out/po-sandbox.$platform.node" "npm/$platform/"
  echo "build-darwin: npm/$platform/po-sandbox.$platform.node"
done
