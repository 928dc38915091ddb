# Checks shared by the image scripts; source it after defining `die` and setting `root` and
# `node_bin`. Each check stops the script with what to do.

# A docker CLI and an engine that answers it.
require_docker() {
  command -v docker >/dev/null 2>&1 \
    || die "the 'docker' CLI is missing: install Debian's docker.io (or run scripts/ensure-engine.sh)"
  timeout 30 docker version >/dev/null 2>&1 \
    || die "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}): start one, e.g. 'bash scripts/ensure-engine.sh' or 'nohup dockerd >/tmp/dockerd.log 2>&1 &'"
}

# Node.js 24 from the `node` devDependency; sets `node_version`.
require_node24() {
  [ -x "$node_bin" ] \
    || die "$node_bin is missing: run 'npm install' in $root (the 'node' devDependency provides Node.js 24)"
  node_version=$("$node_bin" --version 2>/dev/null) || die "$node_bin does not run on this machine"
  case "$node_version" in
    v24.*) ;;
    *) die "$node_bin is Node.js $node_version, expected 24.x: run 'npm install' in $root" ;;
  esac
}
