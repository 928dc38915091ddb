#!/bin/sh
# The folders on which the home, runtime-cache and git volumes are first mounted. A new named
# volume copies the folder's mode, so world-writable + sticky keeps every volume writable for
# whatever --user the container runs as.
set -eu
for dir in /po-home /po-runtime /po-git; do
  mkdir -p "$dir"
  chmod 1777 "$dir"
done
