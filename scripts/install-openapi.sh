#!/usr/bin/env bash
# install-openapi.sh — the openapi tier's Python tools from PyPI, every version pinned in
# test/openapi/requirements.txt (openapi-spec-validator, schemathesis and what they pull
# in), into a venv under build/ (BW_OPENAPI_VENV, default build/venv-openapi). Idempotent:
# installs again only when the requirements changed. Prints the venv's python on its last
# line.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${BW_OPENAPI_VENV:-build/venv-openapi}
reqs=test/openapi/requirements.txt
stamp=$venv/.requirements
command -v python3 >/dev/null || { echo "install-openapi: python3 is missing (scripts/install-deps.sh)" >&2; exit 1; }
if ! cmp -s "$reqs" "$stamp" 2>/dev/null; then
    echo "install-openapi: $reqs into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$reqs" >&2
    "$venv/bin/pip" check >&2
    cp "$reqs" "$stamp"
fi
echo "$PWD/$venv/bin/python"
