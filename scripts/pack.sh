#!/usr/bin/env bash
# Packs the package as it would be published, for this platform: the main package
# (@agimon-ai/po-sandbox) and its prebuilt platform package (@agimon-ai/po-sandbox-<triple>, with
# the .node built by `npm run build`). Writes both tarballs to OUT_DIR (default: ./dist-pack) and
# prints their paths, main package first.
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
out=${1:-$root/dist-pack}

die() { echo "pack: $*" >&2; exit 1; }

shopt -s nullglob
built=("$root"/po-sandbox.*.node)
shopt -u nullglob
[ "${#built[@]}" -eq 1 ] || die "expected exactly one built addon (po-sandbox.<triple>.node) in $root, found ${#built[@]}: run 'npm run build' first"
node_file=$(basename "${built[0]}")
triple=${node_file#po-sandbox.}
triple=${triple%.node}
[ -f "$root/npm/$triple/package.json" ] || die "no platform package npm/$triple for $node_file"

mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

cp "$root/npm/$triple/package.json" "$stage/"
[ -f "$root/npm/$triple/README.md" ] && cp "$root/npm/$triple/README.md" "$stage/"
cp "${built[0]}" "$stage/"
cp "$root/LICENSE" "$stage/"

main=$(cd "$root" && npm pack --silent --pack-destination "$out" | tail -n1)
platform=$(cd "$stage" && npm pack --silent --pack-destination "$out" | tail -n1)
echo "$out/$main"
echo "$out/$platform"
