#!/usr/bin/env bash
# Install the Debian 12 packages bulkwrite needs to build and test.
# Idempotent: only missing packages are installed, and `apt-get update` runs
# only when something is missing, so a prepared machine costs ~nothing.
set -euo pipefail

usage() {
    echo "usage: $0            (as root on Debian 12; installs missing build/test packages)" >&2
    exit 2
}
[[ $# -eq 0 ]] || usage

die() { echo "install-deps: ERROR: $*" >&2; exit 1; }

PKGS=(
    build-essential pkg-config
    librdkafka-dev libmariadb-dev libconfig-dev
    libprotobuf-c-dev protobuf-c-compiler
    check libmicrohttpd-dev libgnutls28-dev libjansson-dev libyajl-dev libcurl4-openssl-dev libssl-dev
    zlib1g-dev          # gzip'd replies of the proxy's page endpoints (GET /v1/shards, /v1/fleet, /v1/jobs)
    mariadb-server mariadb-client
    prometheus prometheus-alertmanager
    clang libclang-rt-14-dev
    curl jq openssl
    protobuf-compiler   # protoc: test/tiers/doc-examples.sh runs the protobuf example of docs/api.md
    chromium            # the page's browser tier (test/tiers/browser.sh), headless
    python3-venv        # venvs of pinned PyPI packages (clients/python/scripts/venv.sh, scripts/install-openapi.sh)
    debhelper dpkg-dev fakeroot help2man lintian   # the Debian package: make deb, test/tiers/deb.sh
)

# A Java/Maven installed some other way (sdkman, tarball) is good enough.
command -v java >/dev/null 2>&1 || PKGS+=(default-jre-headless)
command -v mvn  >/dev/null 2>&1 || PKGS+=(maven)
# node and npm run the browser tier's driver (playwright-core, scripts/install-browser.sh)
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm  >/dev/null 2>&1 || PKGS+=(npm)

installed() {
    # `dpkg -s` also succeeds for removed-but-not-purged packages, so check Status.
    # Captured first: `dpkg -s | grep -q` can die of SIGPIPE under pipefail.
    local st
    st=$(dpkg -s "$1" 2>/dev/null) || return 1
    [[ $st == *$'\nStatus: install ok installed\n'* ]]
}

missing=()
for p in "${PKGS[@]}"; do
    installed "$p" || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-deps: all packages already installed"
    exit 0
fi

[[ $(id -u) -eq 0 ]] || die "need root to install: ${missing[*]}"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found (Debian 12 expected); missing: ${missing[*]}"

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/install-deps.XXXXXX.log)

# Keep package postinst scripts from starting system-wide mariadb/prometheus
# daemons on default ports: tests start their own throwaway servers on 127.0.0.1.
# Only done when no policy is in place already (Docker images ship one).
policy=/usr/sbin/policy-rc.d
made_policy=0
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
fi
cleanup() { [[ $made_policy -eq 1 ]] && rm -f "$policy"; return 0; }
trap cleanup EXIT

if ! apt-get update -qq >>"$log" 2>&1; then
    tail -n 20 "$log" >&2
    die "apt-get update failed (full log: $log)"
fi
if ! apt-get install -y -qq "${missing[@]}" >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "apt-get install failed for: ${missing[*]} (full log: $log)"
fi

# Double-check: apt can exit 0 yet leave a package unconfigured.
still=()
for p in "${missing[@]}"; do installed "$p" || still+=("$p"); done
[[ ${#still[@]} -eq 0 ]] || die "still not installed after apt-get: ${still[*]} (log: $log)"

rm -f "$log"
echo "install-deps: installed ${#missing[@]} package(s): ${missing[*]}"
