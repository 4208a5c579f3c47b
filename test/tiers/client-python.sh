#!/usr/bin/env bash
# test/tiers/client-python.sh embedded|kafka: the Python client (clients/python) against
# the stack (its generated code and unit tests: make client-python-unit). Its venv is made
# from PyPI with pinned versions (clients/python/scripts/venv.sh); then the live tests
# (clients/python/tests/live) run against the proxy's Connect endpoint: a 120-part job whose sender is killed -9 after part 30 and run
# again (every op applied once, every row compared), a job cancelled on a paused shard
# (none of its rows written, a later part refused), failures read page by page, and a
# job on a paused shard with a small backlog bound waited out through its 429s, and
# tokens and roles (a read-only client cannot send, another client's job is not found).
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/client-python.sh embedded|kafka}
. test/lib.sh

VENV=$(clients/python/scripts/venv.sh client clients/python/requirements.txt --editable) || exit 1
PY=$PWD/$VENV/bin/python

BACKLOG_MAX=20
# No rate limit (the hot shard would only make jobs slow); a small backlog, so that a
# paused shard answers 429 soon; clients with tokens: the tests send as py-feed (submit,
# read), control shards as py-sre (admin), and try py-dash (read only).
bw_stack_conf() {
    write_clients "$WORK/clients.conf" "$(client py-sre py-sre-token '"admin"')" \
        "$(client py-feed py-feed-token '"submit", "read"' '"*:*"')" "$(client py-dash py-dash-token '"read"')"
    "$BIN/bwctl" config-set "$1" 'shards.rate_overrides=()' proxy.backlog_max_messages=$BACKLOG_MAX \
        proxy.auth.clients_file=clients.conf proxy.auth.job_id_secret=client-python-test-secret || exit 1
}
bw_stack_start client-python "$MODE"
start_consumer $C1
start_consumer $C2
check "two consumers are ready" wait_for 60 sh -c "curl -sf http://127.0.0.1:$C1/readyz && curl -sf http://127.0.0.1:$C2/readyz"

live() {
    BW_PROXY_URL=http://127.0.0.1:$PROXY BW_DB_A=$DB_A BW_DB_B=$DB_B BW_BACKLOG_MAX_MESSAGES=$BACKLOG_MAX \
        BW_TOKEN=py-feed-token BW_ADMIN_TOKEN=py-sre-token BW_READ_TOKEN=py-dash-token \
        "$PY" -m pytest -v -s -p no:cacheprovider clients/python/tests/live
}
check "the live tests pass against the Connect endpoint" live
grep -E '^# |(PASSED|FAILED|SKIPPED)$' "$WORK/check.out"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
