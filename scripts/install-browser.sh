#!/usr/bin/env bash
# install-browser.sh — the browser tier's driver: playwright-core from the npm registry,
# pinned, into /var/cache/bulkwrite/node (BW_NODE_HOME), driving Debian's chromium
# (scripts/install-deps.sh installs it; no browser is downloaded). Idempotent; prints the
# NODE_PATH to use on its last line.
set -euo pipefail
VERSION=1.56.1  # the newest that runs on Debian 12's node 18 (1.57 and later want node 20)
home=${BW_NODE_HOME:-/var/cache/bulkwrite/node}
command -v chromium >/dev/null || { echo "install-browser: chromium is missing (scripts/install-deps.sh)" >&2; exit 1; }
command -v npm >/dev/null || { echo "install-browser: npm is missing (scripts/install-deps.sh)" >&2; exit 1; }
have=$(node -p "require('$home/node_modules/playwright-core/package.json').version" 2>/dev/null || true)
if [ "$have" != "$VERSION" ]; then
    mkdir -p "$home"
    echo "install-browser: playwright-core $VERSION into $home" >&2
    npm install --no-audit --no-fund --prefix "$home" "playwright-core@$VERSION" >&2
fi
echo "$home/node_modules"
