#!/usr/bin/env bash
# `npm run test:platforms`: the release workflow's checks for the targets this machine cannot run:
#  - clippy with warnings as errors for x86_64/aarch64-apple-darwin and x86_64-pc-windows-msvc
#    (scripts/cross-lint.sh; zig plays ring's C compiler, nothing is linked);
#  - the macOS addons built without Apple's SDK and packed into their platform packages, each
#    tarball checked: a 64-bit Mach-O dynamic library for the target's CPU that exports
#    napi_register_module_v1 (scripts/build-darwin.sh --pack).
# `.ci/run` runs it after `npm test`. CPU-bound: about 8 minutes from cold on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

step "cross-target clippy (scripts/cross-lint.sh)"
bash scripts/cross-lint.sh

step "the macOS addons, packed and checked (scripts/build-darwin.sh --pack)"
bash scripts/build-darwin.sh --pack "$out"
