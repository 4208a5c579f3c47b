#!/usr/bin/env bash
# clients/python/scripts/venv.sh NAME REQUIREMENTS [--editable]: a virtualenv at
# build/python/NAME (from the repository's root) with the pinned packages of REQUIREMENTS
# from PyPI, and the client itself when --editable; prints the venv's path. Idempotent and
# safe to run from two lanes at once (a lock; a stamp of the requirements' hash), so a
# fresh machine and CI get the same set as a developer.
set -euo pipefail
cd "$(dirname "$0")/../../.."
name=${1:?usage: venv.sh NAME REQUIREMENTS [--editable]} req=${2:?} editable=${3:-}
venv=build/python/$name
mkdir -p build/python
exec 9>"build/python/$name.lock"
flock 9
stamp=$( (cat "$req"; echo "$editable"; sha256sum clients/python/pyproject.toml) | sha256sum | cut -c1-16)
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "python: $venv from $req" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-input -r "$req" >&2
    if [ "$editable" = --editable ]; then
        "$venv/bin/pip" install -q --disable-pip-version-check --no-input --no-deps --no-build-isolation -e clients/python >&2
    fi
    echo "$stamp" >"$venv/.stamp"
fi
echo "$venv"
