#!/usr/bin/env bash
# The Python venv of the tests' case-insensitive folder (__test__/casefold-fs.py: FUSE through
# mfusepy on libfuse 3), in .tmp/casefold-venv. Set up with the engine by `npm test`, so no
# test reaches PyPI itself. Needs python3 with venv and PyPI (ensure-engine.sh installs
# python3-venv and fuse3 as root on Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.tmp/casefold-venv
version=3.1.0
if "$venv/bin/python" -c 'import mfusepy' >/dev/null 2>&1; then
  echo "casefold-venv: mfusepy is in $venv"
  exit 0
fi
rm -rf "$venv"
mkdir -p .tmp
python3 -m venv "$venv" || { echo "casefold-venv: python3 -m venv failed: install python3-venv (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$venv/bin/pip" install --quiet --disable-pip-version-check "mfusepy==$version" || { echo "casefold-venv: pip could not install mfusepy==$version into $venv (PyPI?)" >&2; exit 1; }
echo "casefold-venv: mfusepy $version installed in $venv"
