#!/bin/bash
# include-cycles.sh — fails when the sources' includes form a circle: a module (x.c and
# x.h) that includes, directly or through others, a module that includes it. tsort names
# the modules of each circle. Run by `make docs-check`.
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=(common config codec store control batcher proxy consumer)
declare -A ours # the headers of those folders
for d in "${dirs[@]}"; do
    for h in "$d"/*.h; do
        h=$(basename "$h")
        ours[${h%.h}]=1
    done
done
for d in "${dirs[@]}"; do
    for f in "$d"/*.[ch]; do
        m=$(basename "$f")
        m=${m%.*}
        echo "$m $m" # every module, with or without includes
        sed -n 's/^#include "\([^"]*\)\.h".*/\1/p' "$f" | while read -r h; do
            if [ "$h" != "$m" ] && [ -n "${ours[$h]:-}" ]; then echo "$m $h"; fi # not generated, not a system one
        done
    done
done | tsort >/dev/null
