#!/usr/bin/env bash
# Makes sure the engines the tests need are here: a Docker engine that answers, and Podman
# installed with what rootless Podman needs (uidmap, slirp4netns, fuse-overlayfs: its tests start
# their own `podman system service`, also as a normal user). When something is missing and
# this runs as root on Debian, it installs Debian's docker.io / podman and starts dockerd;
# otherwise it fails and says what to do. It also makes sure `openssl` (the broker TLS test
# makes a test CA with it), the OpenSSH server (remote-engine.test.mjs runs one of its own), Debian's image registry
# (pull.test.mjs runs one of its own), FUSE 3 and python3-venv (clone.test.mjs's case-insensitive folder)
# are here. It never stops anything; when PO_SANDBOX_DOCKERD_PIDFILE is
# set and it starts dockerd, it writes that dockerd's pid there, so the caller can stop exactly it.
set -euo pipefail

log=${PO_SANDBOX_DOCKERD_LOG:-/tmp/po-sandbox-dockerd.log}

can_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -f /etc/debian_version ]
}

docker_answers() {
  command -v docker >/dev/null 2>&1 && timeout 15 docker version >/dev/null 2>&1
}

install_packages() {
  echo "ensure-engine: installing $* from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  # No package starts a service of its own here (openssh-server would start sshd on port 22):
  # a policy of our own while installing, when the machine has none.
  local policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy"
  fi
  apt-get update -qq
  apt-get install -y -qq "$@" >/dev/null
  if [ -n "$policy" ]; then rm -f "$policy"; fi
}

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# The remote-engine suite runs a private sshd of its own on a loopback port.
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
# pull.test.mjs runs an image registry of its own on a loopback port.
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
# Rootless Podman as a normal user (nonroot.test.mjs): sub-id mapping, user-mode networking and
# the FUSE overlay driver.
command -v newuidmap >/dev/null 2>&1 || missing+=(uidmap)
command -v slirp4netns >/dev/null 2>&1 || missing+=(slirp4netns)
command -v fuse-overlayfs >/dev/null 2>&1 || missing+=(fuse-overlayfs)
# The case-insensitive folder of clone.test.mjs: FUSE 3 and a Python venv (mfusepy from PyPI).
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)

if docker_answers; then
  echo "ensure-engine: Docker answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
  # The engine is there; Podman may still be missing.
  missing=("${missing[@]/docker.io/}")
fi
want=()
for p in "${missing[@]}"; do [ -n "$p" ] && want+=("$p"); done

if [ "${#want[@]}" -gt 0 ]; then
  if can_install; then
    install_packages "${want[@]}"
  else
    echo "ensure-engine: missing: ${want[*]}." >&2
    echo "  Install them (Debian/Ubuntu: sudo apt-get install -y ${want[*]}) and start Docker" >&2
    echo "  (sudo systemctl start docker, or sudo dockerd &), then run npm test again." >&2
    exit 1
  fi
fi

if ! docker_answers; then
  if [ -n "${DOCKER_HOST:-}" ]; then
    echo "ensure-engine: DOCKER_HOST=$DOCKER_HOST does not answer. Start that engine or unset DOCKER_HOST." >&2
    exit 1
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "ensure-engine: no Docker engine answers at /var/run/docker.sock." >&2
    echo "  Start it (sudo systemctl start docker, or sudo dockerd &) and run npm test again." >&2
    exit 1
  fi
  echo "ensure-engine: starting dockerd (log: $log)"
  # In a session of its own: a Ctrl-C in the terminal that ran `npm test`, or the end of the
  # process group that started it, does not take the engine down with it. (A script's
  # background command is no group leader, so setsid execs dockerd in place: $! is its pid.)
  setsid nohup dockerd >"$log" 2>&1 </dev/null &
  started=$!
  for _ in $(seq 1 120); do
    docker_answers && break
    kill -0 "$started" 2>/dev/null || break
    sleep 0.5
  done
  if ! docker_answers; then
    echo "ensure-engine: dockerd did not come up within 60 s. Its log ends with:" >&2
    tail -n 20 "$log" >&2 || true
    exit 1
  fi
  # The pid is recorded only when this dockerd is the one answering: when another dockerd was
  # starting at the same moment (its pid file won), ours has exited and that one is not ours to
  # stop.
  if [ "$(cat "/proc/$started/comm" 2>/dev/null)" = dockerd ]; then
    if [ -n "${PO_SANDBOX_DOCKERD_PIDFILE:-}" ]; then echo "$started" >"$PO_SANDBOX_DOCKERD_PIDFILE"; fi
  else
    echo "ensure-engine: another dockerd came up at the same time and answers; the one started here exited (its log: $log)"
  fi
  echo "ensure-engine: Docker answers ($(docker version --format '{{.Server.Version}}'))"
fi
command -v podman >/dev/null 2>&1 && echo "ensure-engine: Podman $(podman --version | awk '{print $3}') installed"
