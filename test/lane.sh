#!/usr/bin/env bash
# lane.sh NAME MAKE TARGET... — one lane of `make check`: the targets one after another,
# every line prefixed with the lane's name, each target's time said when it ends (so a
# slow CI run shows where its minutes went). Stops at the first target that fails.
set -o pipefail
name=$1 make=$2
shift 2
for target in "$@"; do
    start=$(date +%s)
    if ! $make -j1 --no-print-directory "$target" 2>&1 | sed -u "s/^/[$name] /"; then
        echo "[$name] $target failed after $(($(date +%s) - start)) s"
        exit 1
    fi
    echo "[$name] $target took $(($(date +%s) - start)) s"
done
