#!/usr/bin/env bash
# `npm run test:unit`: the fast loop, no engine needed. The Rust unit tests (the orchestration
# among them, on the in-memory fake engine), the type check, and the node suites that need no
# engine (the broker, its attack classes, pi with the extension, the package's own files). It
# builds the addon first when there is none. Under a minute warm on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

if ! ls ./*.node >/dev/null 2>&1; then
  step "build the addon (no .node here yet)"
  npx napi build --platform --features tokio/test-util,failpoints
fi

# The triple `napi build --platform` builds for: the addon's dependencies serve the tests too.
step "rust: unit tests (cargo test)"
cargo test --features failpoints --target "$(rustc -vV | sed -n 's/^host: //p')"

step "types: tsc --noEmit --strict (npm run typecheck)"
npm run --silent typecheck

step "node:test suites that need no engine"
node --test --test-concurrency=4 --test-timeout=120000 \
  __test__/broker.test.mjs __test__/broker-attacks.test.mjs __test__/broker-tls.test.mjs \
  __test__/broker-pi.test.mjs __test__/pi.test.mjs __test__/package.test.mjs __test__/identity.test.mjs \
  __test__/bridge.test.mjs
