# zig and rustup targets for the cross-target scripts (cross-lint.sh, build-darwin.sh); source it
# after defining `die` and setting `cache`. zig comes from PyPI's ziglang, in a venv of its own
# under $cache (Debian's pip refuses to install system-wide).
zig_version=0.17.1

ensure_zig() {
  local py=$cache/venv/bin/python
  if [ -x "$py" ] && "$py" -m ziglang version >/dev/null 2>&1; then
    return
  fi
  command -v python3 >/dev/null 2>&1 || die "python3 is missing: install it (Debian: apt-get install python3 python3-venv) to get zig for the cross-target checks"
  echo "installing zig (PyPI ziglang==$zig_version) into $cache/venv"
  rm -rf "$cache/venv"
  mkdir -p "$cache"
  python3 -m venv "$cache/venv" \
    || die "python3 -m venv failed: install python3-venv (Debian: apt-get install python3-venv)"
  "$cache/venv/bin/pip" install --quiet --disable-pip-version-check "ziglang==$zig_version" \
    || die "pip could not install ziglang==$zig_version into $cache/venv (network?)"
}

ensure_target() {
  rustup target list --installed 2>/dev/null | grep -qx "$1" && return
  command -v rustup >/dev/null 2>&1 || die "rustup is missing: the standard library for $1 comes from 'rustup target add $1'"
  rustup target add "$1" || die "rustup target add $1 failed"
}
