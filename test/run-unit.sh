#!/usr/bin/env bash
# test/run-unit.sh BIN_DIR — runs BIN_DIR/unit-tests from the repository root.
#
# Starts a throwaway MariaDB (scripts/mariadb.sh) on a free loopback port for the live
# SQL round trip, exports BW_TEST_MYSQL_PORT, and always stops the server again.
# With BW_TEST_MYSQL_PORT already set, that server is used and nothing is started.
# Temp files (config variants) go to a private TMPDIR that is removed at the end.
# Extra arguments are ignored; CK_* variables (CK_FORK, CK_RUN_SUITE, CK_VERBOSITY, ...)
# pass through to check.
set -euo pipefail

[[ $# -ge 1 ]] || { echo "usage: $0 BIN_DIR" >&2; exit 2; }
bin_dir=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[[ -x $bin_dir/unit-tests ]] || { echo "run-unit: $bin_dir/unit-tests not built (make $1/unit-tests)" >&2; exit 2; }

work=
dir=
cleanup() {
    local rc=$?
    if [[ -n $dir ]]; then scripts/mariadb.sh stop "$dir" >/dev/null 2>&1 || true; fi
    if [[ -n $work ]]; then rm -rf "$work"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# short path: the server's unix socket lives in it (108-byte limit)
work=$(mktemp -d /tmp/bw-unit.XXXXXX)
mkdir "$work/tmp"
export TMPDIR=$work/tmp

if [[ -z ${BW_TEST_MYSQL_PORT:-} ]]; then
    dir=$work/mariadb
    started=0
    base=$((23306 + RANDOM % 500))
    for ((p = base; p < base + 50; p++)); do
        port_free "$p" || continue
        if scripts/mariadb.sh start "$dir" "$p" >"$work/start.log" 2>&1; then
            started=1
            break
        fi
        # lost a race for the port: try the next one; anything else is fatal
        if grep -q "already in use" "$work/start.log"; then continue; fi
        cat "$work/start.log" >&2
        echo "run-unit: could not start MariaDB" >&2
        exit 1
    done
    ((started)) || { cat "$work/start.log" >&2; echo "run-unit: no free port for MariaDB" >&2; exit 1; }
    export BW_TEST_MYSQL_PORT=$p
    echo "run-unit: MariaDB on 127.0.0.1:$p ($dir)"
fi

export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60}
# a sanitizer build runs each test several times slower (ThreadSanitizer 5-15x): the same
# sanity bounds, scaled (the TSan split tests took over 60 s on a loaded two-core machine)
case $bin_dir in
*san-thread*) export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4} ;;
*san-*) export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-2} ;;
esac
export BW_TEST_CONF=${BW_TEST_CONF:-$root/conf/bulkwrite.conf}
"$bin_dir/unit-tests"
