#!/usr/bin/env bash
# `npm test`: builds the addon, makes sure an engine answers, then runs every suite.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 24 ]; then
  echo "npm test needs Node.js 24 or newer on PATH (found $(node --version)); 'npm install' brings it as the 'node' devDependency." >&2
  exit 1
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "npm test needs a Rust toolchain (cargo, rustfmt, clippy) on PATH to build the addon: install it with rustup (https://rustup.rs), then run npm test again." >&2
  exit 1
fi

step "build the addon (napi build --platform --release)"
npx napi build --platform --release
if [ -n "${CI:-}" ] && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  if ! git diff --exit-code -- index.js index.d.ts; then
    echo "index.js / index.d.ts are stale: run 'npm run build' and commit them." >&2
    exit 1
  fi
fi

step "engine and the local test base image"
bash scripts/ensure-engine.sh
bash scripts/build-test-base-image.sh

step "lint: node --check, bash -n, cargo fmt --check, cargo clippy -D warnings (npm run lint)"
bash scripts/lint.sh

step "rust: unit tests"
# Unit tests in the dev profile: compiling the dependencies unoptimised and the crate's test
# harness takes 2m33s from cold here, against 3m57s for an optimised harness on top of the
# release dependencies the addon build already made (measured on a clean clone, 2 cores).
cargo test

step "types: tsc --noEmit --strict (npm run typecheck)"
npm run --silent typecheck

step "node:test suites (Node $(node --version))"
node --test --test-timeout=300000 __test__/*.test.mjs
