#!/usr/bin/env bash
# Builds the small local base image the test suites run on: Node.js 24 + a static busybox + git,
# tagged po-sandbox-test-base:node24-nft (or the tag given as the first argument).
#
# Why: the tests must not depend on a container registry (none may be reachable), so instead of
# `docker pull node:24` this assembles a root filesystem in a temp dir and `docker import`s it:
#   - /bin/busybox (Debian's busybox-static) plus its applet symlinks (sh, mkdir, chmod, wget, ...),
#     so `/bin/sh` works and Dockerfile RUN steps can run on top of the image;
#   - /usr/local/bin/node, copied from node_modules/node/bin/node (the npm package `node`, 24.x,
#     a devDependency: `npm install` in the project brings it);
#   - the shared libraries node needs (from `ldd`), copied under the paths ldd shows;
#   - Debian's git (/usr/bin/git, /usr/lib/git-core, its templates and their libraries), for the
#     guarded-path tests that commit, branch and fetch inside a container;
#   - Debian's Python 3.11 (interpreter, standard library, libraries), for pip inside a container;
#   - Debian's nft with its libraries (the network rules helper loads a holder's rules with it);
#   - /etc/passwd, /etc/group (root and node:1000), /etc/nsswitch.conf, /etc/hosts, /tmp (1777).
#
# Idempotent: the image carries the label po.test-base.digest=<sha256 of node binary + this
# script>; when an image with the tag already has the current digest nothing is done. Every image
# built here is labelled po.test=1. The tag is printed on the last line.
#
# Podman keeps its own image storage; to use the image there, copy it over:
#   docker save po-sandbox-test-base:node24-nft | podman load
# (on kernels where the hard RLIMIT_NOFILE is low, `podman run` then fails with "error setting
# rlimit type 7: operation not permitted" because Podman asks for nofile=1048576: pass limits no
# higher than the host's `ulimit -Hn`, e.g. --ulimit nofile=20000:20000 --ulimit nproc=4096:4096).
#
# Note: Debian's busybox-static 1.35 `wget -T <seconds>` segfaults (exit 139); use
# `timeout 5 wget -q -O- URL` instead of `wget -T 5` in health checks run on this image.
set -euo pipefail

tag=${1:-po-sandbox-test-base:node24-nft}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"
node_bin="$root/node_modules/node/bin/node"

die() { echo "build-test-base-image: $*" >&2; exit 1; }
log() { echo "build-test-base-image: $*" >&2; }

. "$here/lib/checks.sh"
require_docker
require_node24

# Test files that run in parallel may call this at once: one builds, the others then find it.
exec 9<"$self"
flock 9

digest=$(cat "$node_bin" "$self" | sha256sum | cut -d' ' -f1)
current=$(docker image inspect --format '{{ index .Config.Labels "po.test-base.digest" }}' "$tag" 2>/dev/null || true)
if [ "$current" = "$digest" ]; then
  log "$tag is up to date (node $node_version, digest ${digest:0:12})"
  echo "$tag"
  exit 0
fi

# A static busybox: Debian's busybox-static installs one at /bin/busybox.
is_static() {
  local out
  [ -x "$1" ] || return 1
  out=$(LC_ALL=C ldd "$1" 2>&1 || true) # ldd exits 1 on a static binary
  case "$out" in *'not a dynamic executable'* | *'statically linked'*) return 0 ;; esac
  return 1
}
busybox=/bin/busybox
if ! is_static "$busybox"; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing Debian's busybox-static (a static /bin/busybox is needed)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || die "'apt-get update' failed: a static busybox is needed (Debian package busybox-static)"
    apt-get install -y -qq busybox-static >/dev/null \
      || die "'apt-get install busybox-static' failed: install it by hand"
  fi
  is_static "$busybox" \
    || die "$busybox is missing or not statically linked: install Debian's busybox-static ('apt-get install busybox-static', as root)"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/po-test-base.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rootfs="$tmp/rootfs"
mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,root,home/node,proc,sys,dev,run,var/tmp}
install -d -m 1777 "$rootfs/tmp"
chmod 1777 "$rootfs/var/tmp"
chmod 700 "$rootfs/root"

# busybox and one symlink per applet, under the path busybox itself lists (bin/sh, usr/bin/wget...).
cp "$busybox" "$rootfs/bin/busybox"
chmod 755 "$rootfs/bin/busybox"
"$busybox" --list-full | while read -r applet; do
  [ -n "$applet" ] || continue
  [ -e "$rootfs/$applet" ] || [ -L "$rootfs/$applet" ] && continue
  mkdir -p "$rootfs/$(dirname "$applet")"
  ln -s /bin/busybox "$rootfs/$applet"
done
for a in sh mkdir chmod ls cat rm sleep id env echo test ps wget kill; do
  [ -L "$rootfs/bin/$a" ] || [ -L "$rootfs/usr/bin/$a" ] || [ -L "$rootfs/sbin/$a" ] \
    || die "busybox at $busybox has no '$a' applet"
done

# node and the libraries it loads, each real file copied under the path ldd shows.
cp "$node_bin" "$rootfs/usr/local/bin/node"
chmod 755 "$rootfs/usr/local/bin/node"
libs=$(LC_ALL=C ldd "$node_bin" | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}')
[ -n "$libs" ] || die "ldd found no libraries for $node_bin"
for lib in $libs; do
  [ -e "$lib" ] || die "library $lib (needed by node) is missing on this machine"
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done

# Debian's git, its helpers and templates, and every library they load.
if [ ! -x /usr/bin/git ] || [ ! -d /usr/lib/git-core ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing Debian's git (the test image carries it)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || die "'apt-get update' failed: Debian's git is needed"
    apt-get install -y -qq git >/dev/null || die "'apt-get install git' failed: install it by hand"
  fi
  [ -x /usr/bin/git ] && [ -d /usr/lib/git-core ] \
    || die "Debian's git (/usr/bin/git, /usr/lib/git-core) is missing: 'apt-get install git', as root"
fi
mkdir -p "$rootfs/usr/lib" "$rootfs/usr/share"
cp /usr/bin/git "$rootfs/usr/bin/git"
cp -a /usr/lib/git-core "$rootfs/usr/lib/git-core"
[ -d /usr/share/git-core ] && cp -a /usr/share/git-core "$rootfs/usr/share/git-core"
for f in /usr/bin/git $(find /usr/lib/git-core -type f -perm -u+x); do
  # Scripts among the helpers are not dynamic executables: ldd fails on them.
  { LC_ALL=C ldd "$f" 2>/dev/null || true; } | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}'
done | sort -u | while read -r lib; do
  [ -e "$rootfs$lib" ] && continue
  [ -e "$lib" ] || die "library $lib (needed by git) is missing on this machine"
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done

# Debian's Python 3 (the interpreter, its standard library without tests and caches, and the
# libraries its modules load), for the registry test's pip inside a container.
py=/usr/bin/python3.11
if [ ! -x "$py" ] || [ ! -d /usr/lib/python3.11 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing Debian's python3.11 (the test image carries it)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || die "'apt-get update' failed: Debian's python3.11 is needed"
    apt-get install -y -qq python3.11 >/dev/null || die "'apt-get install python3.11' failed: install it by hand"
  fi
  [ -x "$py" ] && [ -d /usr/lib/python3.11 ] \
    || die "Debian's python3.11 (/usr/bin/python3.11, /usr/lib/python3.11) is missing: 'apt-get install python3.11', as root"
fi
cp "$py" "$rootfs/usr/bin/python3.11"
ln -sf python3.11 "$rootfs/usr/bin/python3"
tar -C /usr/lib --exclude=test --exclude=__pycache__ --exclude=idlelib --exclude=tkinter \
  --exclude=lib2to3 --exclude=turtledemo -cf - python3.11 | tar -C "$rootfs/usr/lib" -xf -
for f in "$py" /usr/lib/python3.11/lib-dynload/*.so; do
  { LC_ALL=C ldd "$f" 2>/dev/null || true; } | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}'
done | sort -u | while read -r lib; do
  [ -e "$rootfs$lib" ] && continue
  [ -e "$lib" ] || die "library $lib (needed by python3.11) is missing on this machine"
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done

# Debian's nft (the rules helper loads a namespace holder's rules with it) and its libraries; it
# replaces a busybox applet of that name, if any.
if ! command -v nft >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing Debian's nftables (the test image carries nft)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || die "'apt-get update' failed: Debian's nftables is needed"
    apt-get install -y -qq nftables >/dev/null || die "'apt-get install nftables' failed: install it by hand"
  fi
fi
nft=/usr/sbin/nft
[ -x "$nft" ] || die "$nft is missing: 'apt-get install nftables', as root"
rm -f "$rootfs$nft"
cp "$nft" "$rootfs$nft"
LC_ALL=C ldd "$nft" | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}' | while read -r lib; do
  [ -e "$rootfs$lib" ] && continue
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done

cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
node:x:1000:1000:node:/home/node:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
node:x:1000:
nogroup:x:65534:
EOF
echo 'hosts: files dns' >"$rootfs/etc/nsswitch.conf"
: >"$rootfs/etc/hosts"
: >"$rootfs/etc/resolv.conf"
chown 1000:1000 "$rootfs/home/node"

old_id=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
log "importing $tag (node $node_version)"
tar -C "$rootfs" --numeric-owner -cf - . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/sh"]' \
  --change "LABEL po.test=1 po.test-base.digest=$digest po.test-base.node=$node_version" \
  --message "po-sandbox test base (node $node_version)" \
  - "$tag" >/dev/null
# The previous build is now untagged: drop it unless something still uses it (then it stays).
if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect --format '{{.Id}}' "$tag")" ]; then
  docker image rm "$old_id" >/dev/null 2>&1 || true
fi
log "built $tag"
echo "$tag"
