#!/usr/bin/env bash
# The tests' Python venv, in .tmp/casefold-venv: the case-insensitive folder's mfusepy
# (__test__/casefold-fs.py: FUSE on libfuse 3), and pypiserver with passlib (the registry test's
# private index), whose pip the registry test also runs inside a container. Set up with the
# engine by `npm test`, so no test reaches PyPI itself. Needs python3 with venv and PyPI (ensure-engine.sh installs
# python3-venv and fuse3 as root on Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.tmp/casefold-venv
version=3.1.0
pypiserver=2.4.2
passlib=1.7.4
if "$venv/bin/python" -c 'import mfusepy, pypiserver, passlib, pip' >/dev/null 2>&1; then
  echo "casefold-venv: mfusepy, pypiserver and passlib are in $venv"
  exit 0
fi
rm -rf "$venv"
mkdir -p .tmp
python3 -m venv "$venv" || { echo "casefold-venv: python3 -m venv failed: install python3-venv (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$venv/bin/pip" install --quiet --disable-pip-version-check "mfusepy==$version" "pypiserver==$pypiserver" "passlib==$passlib" || { echo "casefold-venv: pip could not install mfusepy==$version, pypiserver==$pypiserver and passlib==$passlib into $venv (PyPI?)" >&2; exit 1; }
echo "casefold-venv: mfusepy $version, pypiserver $pypiserver and passlib $passlib installed in $venv"
