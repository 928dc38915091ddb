#!/usr/bin/env bash
# Packs the package as it would be published.
#
#   scripts/pack.sh [out-dir]
#     the main package (@agimon-ai/po-sandbox) and this platform's prebuilt package
#     (@agimon-ai/po-sandbox-<platform>, with the .node `npm run build` left in the root)
#   scripts/pack.sh --platform <platform> [out-dir]
#     only the platform package npm/<platform>, with the .node already in that folder (how
#     scripts/build-darwin.sh leaves the macOS files)
#
# Writes the tarballs to out-dir (default: ./dist-pack) and prints their paths, main package first.
#
# Install them together anywhere, without a registry:
#   npm install ./dist-pack/agimon-ai-po-sandbox-0.1.0.tgz ./dist-pack/agimon-ai-po-sandbox-linux-x64-gnu-0.1.0.tgz
# and pi can load the extension from the installed package's own manifest:
#   pi --extension node_modules/@agimon-ai/po-sandbox
#
# (A registry release instead runs `napi prepublish -t npm`, which also writes the platform
# packages into the main package's optionalDependencies.)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

die() { echo "pack: $*" >&2; exit 1; }

only=
if [ "${1:-}" = "--platform" ]; then
  [ -n "${2:-}" ] || die "--platform needs a platform folder name under npm/ (e.g. darwin-arm64)"
  only=$2
  shift 2
fi
out=${1:-$root/dist-pack}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Packs the platform package npm/$1 with the addon file $2 and the LICENSE, in a scratch copy
# (the folder in the tree stays as it is); prints the tarball's path.
pack_platform() {
  local platform=$1 node_file=$2 stage main
  [ -f "$root/npm/$platform/package.json" ] || die "no platform package npm/$platform"
  main=$(node -p "require('$root/npm/$platform/package.json').main")
  [ "$(basename "$node_file")" = "$main" ] || die "npm/$platform/package.json names $main as its addon, not $(basename "$node_file")"
  stage=$(mktemp -d)
  cp "$root/npm/$platform/package.json" "$stage/"
  [ -f "$root/npm/$platform/README.md" ] && cp "$root/npm/$platform/README.md" "$stage/"
  cp "$node_file" "$stage/"
  cp "$root/LICENSE" "$stage/"
  local tgz
  tgz=$(cd "$stage" && npm pack --silent --pack-destination "$out" | tail -n1)
  rm -rf "$stage"
  echo "$out/$tgz"
}

if [ -n "$only" ]; then
  file=$root/npm/$only/po-sandbox.$only.node
  [ -f "$file" ] || die "no $file: build it first (macOS: scripts/build-darwin.sh)"
  pack_platform "$only" "$file"
  exit 0
fi

shopt -s nullglob
built=("$root"/po-sandbox.*.node)
shopt -u nullglob
[ "${#built[@]}" -eq 1 ] || die "expected exactly one built addon (po-sandbox.<platform>.node) in $root, found ${#built[@]}: run 'npm run build' first"
platform=$(basename "${built[0]}")
platform=${platform#po-sandbox.}
platform=${platform%.node}

main=$(cd "$root" && npm pack --silent --pack-destination "$out" | tail -n1)
echo "$out/$main"
pack_platform "$platform" "${built[0]}"
