#!/usr/bin/env bash
# The SRE page in a real browser: Debian's chromium, headless, driven by playwright-core
# (scripts/install-browser.sh) against the real stack with a clients file.
#
#   test/tiers/browser.sh embedded|kafka
#
# The stack is set up here (a paused shard with a job waiting, a server down, a finished
# job); the page is then checked by test/browser/page.mjs, and at 4,096 shards by
# test/browser/scale.mjs against a synthetic API it serves itself (a server down, a job
# stuck behind a paused shard, the proxy gone, a phone), one "ok - …" line per check
# ("measured: …" lines: bytes per poll, first draw, contrast). Both save a screenshot of
# each view under $WORK/screens (BW_KEEP=1 keeps them; BW_UI_SHOTS=DIR copies them there
# too, as docs/img has them). The last line is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/browser.sh embedded|kafka}
. test/lib.sh
NODE_MODULES=$(scripts/install-browser.sh) || exit 1

bw_stack_conf() {
    write_clients "$WORK/clients.conf" "$(client sre admin-token '"admin"')" "$(client dash read-token '"read"')" \
        "$(client feed feed-token '"submit", "read"' '"pin:create"')"
    "$BIN/bwctl" config-set "$1" proxy.auth.clients_file=clients.conf consumer.pause_ms=5000 || exit 1
}
bw_stack_start browser "$MODE"
for port in $C1 $C2; do start_consumer $port; done
printf 'admin-token\n' >"$WORK/admin.token"
printf 'feed-token\n' >"$WORK/feed.token"
BWCTL=("$BIN/bwctl" -c "$CONF" --url "http://127.0.0.1:$PROXY" --token-file "$WORK/admin.token")
assigned() { grep -q assigned "$WORK/consumer-$C1.log" && grep -q assigned "$WORK/consumer-$C2.log"; }
check "two consumers share the shards" wait_for 60 assigned

# a job that the page follows to its end: 2,000 creates on shard 1
check "a job of 2,000 creates on shard 1 is applied" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --token-file "$WORK/feed.token" feed:2000:1
# a pin created twice on shard 1, by two requests: MySQL refuses the second (1062), which
# the shard view lists among its dead letters
pin=$(( (1 << 46) | (1 << 36) | 777001 )) owner=$(( (1 << 46) | 42 ))
dup_body=$(printf '{"ops":[{"op":"create","object_type":"pin","id":%d,"shard_key":"%d","fields":{"owner_id":%d,"title":"twice"}}]}' \
    $pin $owner $owner)
post_dup() { curl -sf -o /dev/null -H 'Authorization: Bearer feed-token' -H 'Content-Type: application/json' --data-binary "$dup_body" "$URL"; }
dead_lettered() {
    curl -sf -H 'Authorization: Bearer admin-token' "http://127.0.0.1:$PROXY/v1/shards" |
        jq -e '.shards[1].consumer.dead_letters == 1 and .shards[1].consumer.recent_dead_letters[0].error_code == 1062
            and (.shards[1].consumer.recent_dead_letters[0].reason | startswith("Duplicate entry"))
            and .shards[1].consumer.statement_p99_ms > 0 and .shards[1].consumer.statement_p50_ms <= .shards[1].consumer.statement_p99_ms' >/dev/null
}
dup_refused() { post_dup && post_dup && wait_for 60 dead_lettered; }
check "a pin created twice on shard 1: the second is refused, and GET /v1/shards shows the dead letter and the statement latency" \
    dup_refused
check "shard 2 paused, with a reason" "${BWCTL[@]}" pause 2 --reason "browser test: disk swap"
# work for the paused shard: the jobs view says its job waits for the pause, who and why
check "creates for shard 2 accepted while it is paused" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --token-file "$WORK/feed.token" feed:300:2
# mysql-b (shards 4-7) down, with work waiting for shard 5: its consumer finds the server down
check "mysql-b stopped" scripts/mariadb.sh stop "$WORK/mysql-b"
check "creates for shard 5 accepted while its server is down" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --token-file "$WORK/feed.token" feed:500:5
shard5_down() {
    curl -sf -H 'Authorization: Bearer admin-token' "http://127.0.0.1:$PROXY/v1/shards" |
        jq -e '.shards[5].consumer.reasons | index("server_down") != null' >/dev/null
}
check "... and shard 5's consumer reports its server down" wait_for 90 shard5_down

# 40 one-op jobs held an hour ahead: the jobs view shows them as one delay queue
check "40 one-op jobs scheduled an hour ahead are held" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --token-file "$WORK/feed.token" --protobuf --per-request 1 \
    --not-before "$(($(date +%s%3N) + 3600000)):0" spread:40
mkdir -p "$WORK/screens"
# run_page SCRIPT [ARG...]: one of test/browser/*.mjs, its "ok - " lines counted here; it
# must print its last line ("page: done", "scale: done")
run_page() {
    local script=$1 out="$WORK/$(basename "$1" .mjs).out"
    shift
    NODE_PATH=$NODE_MODULES BW_UI_URL="http://127.0.0.1:$PROXY/ui/" BW_UI_SHOTS="$WORK/screens" \
        timeout 300 node "$script" "$@" >"$out" 2>&1
    cat "$out"
    passed=$((passed + $(grep -c '^ok - ' "$out")))
    failed=$((failed + $(grep -c '^not ok - ' "$out")))
    grep -q "^$(basename "$script" .mjs): done$" "$out" || { echo "not ok - $script did not run to its end"; failed=$((failed + 1)); }
}
run_page test/browser/page.mjs
# the page at 4,096 shards, against a synthetic API of that size served by the script itself
run_page test/browser/scale.mjs 4096
[ -n "${BW_UI_SHOTS:-}" ] && mkdir -p "$BW_UI_SHOTS" && cp "$WORK"/screens/*.png "$BW_UI_SHOTS"/

# the server back: shard 5 applies what waited, row by row; the page's rate change stands
check "mysql-b started again" scripts/mariadb.sh start "$WORK/mysql-b" $DB_B
once_then_gone() { # the twice-created pin is there once (its title the first's); then out of verify's way
    [ "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT COUNT(*) FROM db00001.pins WHERE id = $pin AND title = 'twice'")" = 1 ] &&
        mariadb -h127.0.0.1 -P$DB_A -uroot -e "DELETE FROM db00001.pins WHERE id = $pin"
}
check "the pin created twice is in shard 1 once" once_then_gone
check "shard 2 resumed" "${BWCTL[@]}" resume 2
check "every row of the three jobs is in its shard" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:2000:1 feed:500:5 feed:300:2
rate_stands() {
    curl -sf -H 'Authorization: Bearer admin-token' "http://127.0.0.1:$PROXY/v1/shards" |
        jq -e '.shards[3].operator_rate == 7 and .shards[3].history[0].reason == "browser test: slow down"' >/dev/null
}
check "the rate the page set stands, with its reason in the audit history" rate_stands
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
