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
PO_SANDBOX_LINT_CROSS=separately bash scripts/lint.sh

# The cross-target work runs in the background from now on, next to the unit tests and the
# container suites (which mostly wait on containers), and is waited for at the end:
#  - the cross-target clippy of `npm run lint` (scripts/cross-lint.sh: darwin x2, windows-msvc;
#    CPU-bound, 5-6 minutes from cold here);
#  - the macOS addons (scripts/build-darwin.sh --pack: about 3.5 minutes a target from cold
#    here), packed into their platform packages and checked (Mach-O, CPU, napi entry point).
# Both need the host release build scripts the steps above made, and cargo's lock on
# target/release keeps them from racing a release build.
step "cross-target clippy and the macOS addons (scripts/cross-lint.sh, scripts/build-darwin.sh --pack), in the background"
cross_log=$(mktemp)
cross_pack=$(mktemp -d)
setsid bash -c 'bash scripts/cross-lint.sh && bash scripts/build-darwin.sh --pack "$1"' cross "$cross_pack" >"$cross_log" 2>&1 &
cross_pid=$!
cross_done() {
  local rc=0
  wait "$cross_pid" || rc=$?
  step "cross-target clippy and the macOS addons: output"
  cat "$cross_log"
  rm -rf "$cross_log" "$cross_pack"
  if [ "$rc" -ne 0 ]; then
    echo "the cross-target checks failed (exit $rc): see their output above; 'bash scripts/cross-lint.sh' and 'bash scripts/build-darwin.sh --pack <dir>' run them alone." >&2
    exit "$rc"
  fi
}
# A step failing before the end stops the check too (its own session: cargo and rustc with it).
trap 'rc=$?; kill -- "-$cross_pid" 2>/dev/null || true; rm -rf "$cross_log" "$cross_pack"; exit $rc' EXIT

step "rust: unit tests"
# Unit tests in the dev profile: compiling the dependencies unoptimised and the crate's test
# harness takes 2m33s from cold here, against 3m57s for an optimised harness on top of the
# release dependencies the addon build already made (measured on a clean clone, 2 cores).
cargo test

step "types: tsc --noEmit --strict (npm run typecheck)"
npm run --silent typecheck

step "node:test suites (Node $(node --version))"
node --test --test-timeout=300000 __test__/*.test.mjs

cross_done
