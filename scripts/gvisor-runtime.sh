#!/usr/bin/env bash
# Registers gVisor (`runsc`) as a runtime of this machine's dockerd, for the run-flags test
# (`--runtime=runsc`), and takes it away again. Idempotent.
#
#   scripts/gvisor-runtime.sh register   installs Debian's runsc when missing (as root on
#                                        Debian; otherwise it fails and says what to do), adds
#                                        "runsc" to the "runtimes" of /etc/docker/daemon.json,
#                                        reloads dockerd with SIGHUP and waits until it lists it
#   scripts/gvisor-runtime.sh restore    puts daemon.json back as it was before `register` (or
#                                        removes it when there was none), reloads dockerd
#   scripts/gvisor-runtime.sh status     prints whether dockerd lists runsc
#
# dockerd is only ever reloaded (SIGHUP re-reads the runtimes; running containers are not
# touched), never restarted. The original daemon.json is kept in $PO_SANDBOX_GVISOR_STATE
# (default /var/tmp/po-sandbox-gvisor) until `restore`, so a run that died between the two is
# repaired by the next `restore` (and a second `register` keeps the first original).
# On this machine runsc needs "--network=host" (its own netstack cannot open the container's
# sockets here); the container still gets its own network namespace from dockerd.
set -euo pipefail

config=${PO_SANDBOX_DAEMON_JSON:-/etc/docker/daemon.json}
state=${PO_SANDBOX_GVISOR_STATE:-/var/tmp/po-sandbox-gvisor}
backup=$state/daemon.json.orig
absent=$state/daemon.json.absent

fail() {
  echo "gvisor-runtime: $*" >&2
  exit 1
}

dockerd_pid() {
  local pid
  pid=$(cat /var/run/docker.pid 2>/dev/null || true)
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    pid=$(pgrep -x dockerd | head -n1 || true)
  fi
  [ -n "$pid" ] || fail "no dockerd runs on this machine (start it with scripts/ensure-engine.sh)"
  echo "$pid"
}

listed() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null | jq -e 'has("runsc")' >/dev/null
}

# Reloads dockerd and waits (up to 20 s) until it does (`want`: runsc listed or not).
reload() {
  local want=$1 pid
  pid=$(dockerd_pid)
  kill -HUP "$pid"
  for _ in $(seq 1 100); do
    if [ "$want" = yes ] && listed; then return 0; fi
    if [ "$want" = no ] && ! listed; then return 0; fi
    sleep 0.2
  done
  fail "dockerd (pid $pid) did not $([ "$want" = yes ] && echo list || echo drop) the runsc runtime after SIGHUP; see its log"
}

ensure_runsc() {
  if command -v runsc >/dev/null 2>&1; then return 0; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -f /etc/debian_version ]; then
    echo "gvisor-runtime: installing Debian's runsc"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq runsc >/dev/null || { apt-get update -qq && apt-get install -y -qq runsc >/dev/null; }
    command -v runsc >/dev/null 2>&1 || fail "apt-get installed runsc but it is not on PATH"
    return 0
  fi
  fail "gVisor's runsc is not installed. Install it (Debian/Ubuntu: sudo apt-get install runsc; elsewhere see https://gvisor.dev/docs/user_guide/install/) and run this again"
}

register() {
  command -v jq >/dev/null 2>&1 || fail "jq is needed to edit $config (apt-get install jq)"
  [ -w "$(dirname "$config")" ] || fail "cannot write $(dirname "$config"): run this as root"
  ensure_runsc
  local runsc current
  runsc=$(command -v runsc)
  mkdir -p "$state"
  if [ ! -e "$backup" ] && [ ! -e "$absent" ]; then
    if [ -e "$config" ]; then cp -p "$config" "$backup"; else : >"$absent"; fi
  fi
  current='{}'
  if [ -e "$config" ]; then current=$(cat "$config"); fi
  echo "$current" | jq --arg path "$runsc" \
    '.runtimes = ((.runtimes // {}) + {runsc: {path: $path, runtimeArgs: ["--network=host"]}})' \
    >"$config.po-sandbox.tmp"
  mv "$config.po-sandbox.tmp" "$config"
  reload yes
  echo "gvisor-runtime: dockerd lists runsc ($runsc $(runsc --version 2>/dev/null | head -n1 | awk '{print $3}'))"
}

restore() {
  local original='{}'
  if [ -e "$backup" ]; then
    original=$(cat "$backup")
  elif [ ! -e "$absent" ]; then
    echo "gvisor-runtime: nothing to restore"
    return 0
  fi
  # dockerd keeps its runtimes when a reload finds no "runtimes" key (or no file at all), so
  # it first reloads the original with its runtimes spelled out ({} when it had none), then
  # the original itself goes back: the same runtimes, no second reload needed.
  echo "$original" | jq '.runtimes = (.runtimes // {})' >"$config.po-sandbox.tmp"
  mv "$config.po-sandbox.tmp" "$config"
  if jq -e '.runtimes.runsc' "$config" >/dev/null 2>&1; then reload yes; else reload no; fi
  if [ -e "$backup" ]; then cp -p "$backup" "$config"; else rm -f "$config"; fi
  rm -f "$backup" "$absent"
  rmdir "$state" 2>/dev/null || true
  echo "gvisor-runtime: $config restored, dockerd reloaded"
}

case "${1:-}" in
  register) register ;;
  restore) restore ;;
  status) if listed; then echo "runsc listed"; else echo "runsc not listed"; exit 1; fi ;;
  *) fail "usage: $0 register | restore | status" ;;
esac
