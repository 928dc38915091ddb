#!/usr/bin/env bash
# Opt-in (not run by npm test or CI): builds the FULL sandbox image recipe (git, procps,
# ripgrep, Chromium libraries and fonts, corepack, CloakBrowser at /opt/cloak) on a Debian
# bookworm base with Node 24 assembled locally, for machines where no image registry (and so
# no node:24-bookworm-slim) can be reached. Prints every build step; exits non-zero with the
# failing step's output when the build fails.
#
# The hosts each part needs: the base (scripts/build-full-image-base.sh) a Debian mirror and the
# npm registry from this machine; the recipe's toolchain step, from inside the build container,
# the base's Debian mirror (apt-get), the npm registry (npm install cloakbrowser, over TLS the
# container trusts) and CloakBrowser's download hosts (cloakbrowser install: cloakbrowser.dev,
# github.com releases).
set -euo pipefail
cd "$(dirname "$0")/.."

base=${1:-po-sandbox-base:node24-bookworm-local}
if ! docker image inspect "$base" >/dev/null 2>&1; then
  bash scripts/build-full-image-base.sh "$base"
fi
if [ ! -f index.js ] || ! ls ./*.node >/dev/null 2>&1; then
  echo "build-full-image: the addon is not built; run 'npm run build' first." >&2
  exit 1
fi
node -e '
const { ensureSandboxImage } = require("./index.js")
const started = Date.now()
ensureSandboxImage({ baseImage: process.argv[1], imageVariant: "full" }, (e) => {
  if (e.type === "image") console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${e.phase}${e.message ? ": " + e.message : ""}`)
}).then((r) => {
  console.log(`build-full-image: ${r.tag} ${r.built ? "built" : "was already there"} in ${((Date.now() - started) / 1000).toFixed(1)} s`)
}, (err) => {
  console.error(`build-full-image: ${err.code}: ${err.message}`)
  if (/setup-full\.sh/.test(err.message)) {
    console.error("build-full-image: the toolchain step needs, from inside the build container, the Debian mirror of the base image, the npm registry (over TLS the container trusts) and the download hosts of CloakBrowser (cloakbrowser.dev, github.com); see the output above for which one failed.")
  }
  process.exit(1)
})' "$base"
