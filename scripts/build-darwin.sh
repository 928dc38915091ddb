#!/usr/bin/env bash
# Builds the macOS addons on Linux, without Apple's SDK, into their platform packages:
#   npm/darwin-x64/po-sandbox.darwin-x64.node     (x86_64-apple-darwin)
#   npm/darwin-arm64/po-sandbox.darwin-arm64.node (aarch64-apple-darwin)
# `napi build -x` links them with cargo-zigbuild: zig's own macOS libSystem stub, cargo-zigbuild's
# libiconv stub, node-api symbols left to node at load (`-undefined dynamic_lookup`). No Apple
# framework is linked: on macOS the broker trusts Mozilla's roots, not the keychain (Cargo.toml).
# Built here, not run here: nothing on this machine can load a Mach-O file.
#
#   scripts/build-darwin.sh [--pack out-dir]
#
# With --pack (what `npm test` runs) each platform package is then packed as it would be published
# (scripts/pack.sh --platform) into out-dir, and the tarball is checked: package.json, LICENSE
# and the .node inside, and that .node a 64-bit Mach-O dynamic library for the target's CPU that
# exports napi_register_module_v1.
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

pack_out=
if [ "${1:-}" = "--pack" ]; then
  [ -n "${2:-}" ] || die "--pack needs an output folder for the tarballs"
  mkdir -p "$2"
  pack_out=$(cd "$2" && pwd)
elif [ -n "${1:-}" ]; then
  die "unknown argument $1 (usage: scripts/build-darwin.sh [--pack out-dir])"
fi

# The packed tarball $1 holds package/{package.json,LICENSE,$2} and $2 is a 64-bit Mach-O
# (magic feedfacf) of CPU type $3 (little-endian hex, as od prints it), file type MH_DYLIB (6).
check_tarball() {
  local tgz=$1 file=$2 cpu=$3 dir header
  dir=$(mktemp -d)
  tar -xzf "$tgz" -C "$dir" || die "$tgz is not a gzip tarball"
  for f in package.json LICENSE "$file"; do
    [ -f "$dir/package/$f" ] || die "$tgz lacks package/$f"
  done
  header=$(od -An -tx1 -N16 "$dir/package/$file" | tr -d ' \n')
  [ "${header:0:8}" = cffaedfe ] || die "$file in $tgz is not a 64-bit Mach-O file (header $header)"
  [ "${header:8:8}" = "$cpu" ] || die "$file in $tgz is for CPU type ${header:8:8}, not $cpu"
  [ "${header:24:8}" = 06000000 ] || die "$file in $tgz is not a dynamic library (file type ${header:24:8})"
  grep -qa _napi_register_module_v1 "$dir/package/$file" || die "$file in $tgz does not export napi_register_module_v1"
  rm -rf "$dir"
  echo "build-darwin: $tgz: $file, Mach-O dylib for CPU $cpu, exports napi_register_module_v1"
}

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
    x86_64-apple-darwin) platform=darwin-x64 cpu=07000001 ;;
    aarch64-apple-darwin) platform=darwin-arm64 cpu=0c000001 ;;
    *) die "not a darwin target this package ships: $t" ;;
  esac
  ensure_target "$t"
  printf '\n== build-darwin: napi build --platform --release --target %s -x\n' "$t"
  # Into a scratch folder: index.js and index.d.ts stay the host build's.
  "$napi" build --platform --release --target "$t" -x --output-dir "$out" --no-js
  mv "$out/po-sandbox.$platform.node" "npm/$platform/"
  echo "build-darwin: npm/$platform/po-sandbox.$platform.node"
  if [ -n "$pack_out" ]; then
    tgz=$(bash scripts/pack.sh --platform "$platform" "$pack_out")
    check_tarball "$tgz" "po-sandbox.$platform.node" "$cpu"
  fi
done
