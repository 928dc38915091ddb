#!/bin/sh
# The full sandbox toolchain on top of node:24-bookworm-slim: git, procps, ripgrep, nftables (the
# namespace holder loads each workspace's network rules with nft), Chromium's
# runtime libraries and fonts, corepack, and the CloakBrowser headless browser at /opt/cloak.
# The Dockerfile sets CLOAKBROWSER_CACHE_DIR (and the rest of the image's run-time environment)
# before this runs, so the browser lands where every container looks for it.
set -eu
: "${CLOAKBROWSER_CACHE_DIR:?the Dockerfile sets CLOAKBROWSER_CACHE_DIR before this script}"
echo "setup-full: CloakBrowser goes to $CLOAKBROWSER_CACHE_DIR"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
  ca-certificates git procps ripgrep nftables \
  fonts-liberation fonts-dejavu-core fonts-noto-color-emoji \
  libasound2 libatk-bridge2.0-0 libatk1.0-0 libatspi2.0-0 libcairo2 libcups2 libdbus-1-3 \
  libdrm2 libexpat1 libgbm1 libglib2.0-0 libnspr4 libnss3 libpango-1.0-0 libx11-6 \
  libx11-xcb1 libxcb1 libxcomposite1 libxdamage1 libxext6 libxfixes3 libxkbcommon0 \
  libxrandr2 libxshmfence1
rm -rf /var/lib/apt/lists/*
corepack enable
mkdir -p /opt/cloak
npm install --prefix /opt/cloak --no-audit --no-fund --omit=dev cloakbrowser@0.5.10
# Fetch the browser build into $CLOAKBROWSER_CACHE_DIR so containers never download it at run
# time, and check it is where a container will look, without the network.
/opt/cloak/node_modules/.bin/cloakbrowser install
/opt/cloak/node_modules/.bin/cloakbrowser info --quick --json >/tmp/cloak-info.json
node -e '
const out = require("fs").readFileSync("/tmp/cloak-info.json", "utf8")
const { binary } = JSON.parse(out.slice(out.search(/^\{/m)))
const dir = process.env.CLOAKBROWSER_CACHE_DIR
if (!binary || !binary.installed || !String(binary.path).startsWith(dir + "/")) {
  console.error(`setup-full: CloakBrowser is not installed under ${dir}: ${JSON.stringify(binary)}`)
  process.exit(1)
}'
rm -f /tmp/cloak-info.json
chmod -R a+rX /opt/cloak
npm cache clean --force
