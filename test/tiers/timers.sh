#!/usr/bin/env bash
# test/tiers/timers.sh embedded|kafka: the delay queue. Two proxies (A, B) take
# $N pairs of one-op jobs, each pair at its own not_before over a $WINDOW s window: a
# spread pin's create and, sent after it, a bump of the same pin's likes at the same
# millisecond (bw-workload --not-before; two clients, one per proxy). Mid-window proxy A
# is killed -9 and started again. From the shards' ledgers (bw-workload lateness): no
# job is missing, none applied before its not_before, none applied twice; the lateness
# (applied_at - not_before) is printed, held to a generous bound only. Row by row every
# pin exists with exactly one like: each bump applied once, after its create. The
# release is told in summary lines (not one per job), and the proxies' metrics count the
# held timers down to 0 and the batches released.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/timers.sh embedded|kafka}
. test/lib.sh
N=${BW_TIMERS_PAIRS:-2000} WINDOW=${BW_TIMERS_WINDOW:-20} LEAD=${BW_TIMERS_LEAD:-12}
[ "$MODE" = embedded ] && N=${BW_TIMERS_PAIRS:-400} # the embedded Kafka holds about a thousand (docs/jobs.md)

bw_stack_conf() { # every shard unlimited (no hot shard): lateness is the release's, not a rate's
    "$BIN/bwctl" config-set "$1" 'shards.rate_overrides=()' || exit 1
}
bw_stack_start timers "$MODE"
A=http://127.0.0.1:$PROXY
start_proxy_b() {
    "$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" -p 0 --port-file "$WORK/b.port" >>"$WORK/proxy-b.log" 2>&1 &
    pids+=($!)
}
start_proxy_b
check "a second proxy starts on a port of its own" wait_for 60 test -s "$WORK/b.port"
B=http://127.0.0.1:$(cat "$WORK/b.port")
check "... and answers" wait_for 60 curl -sf "$B/healthz"
start_consumer $C1
start_consumer $C2
check "two consumers join" wait_for 60 sh -c "curl -sf http://127.0.0.1:$C1/readyz && curl -sf http://127.0.0.1:$C2/readyz"

both_release() {
    curl -sf "$A/v1/fleet" | jq -e '[.members[] | select(.role == "proxy" and .alive) | .releases] | length == 2 and all' >/dev/null
}
check "both proxies release held jobs (GET /v1/fleet: releases)" wait_for 30 both_release

from=$(($(date +%s%3N) + LEAD * 1000))
for k in 0 1; do
    url=$A
    [ $k = 1 ] && url=$B
    "$BIN/bw-workload" -c "$CONF" submit --url "$url/v1/batches" --protobuf --per-request 1 \
        --not-before "$from:$((WINDOW * 1000))" --part $k/2 --jobs-out "$WORK/jobs-$k" \
        spread:$N bump:$N >"$WORK/submit-$k.log" 2>&1 &
    eval "submit_$k=\$!"
done
check "both clients have every job accepted" wait "$submit_0" "$submit_1"
sent_at=$(date +%s%3N)
echo "# $((2 * N)) jobs sent $(((sent_at - from) / -1000)) s before the first is due"
check "every job is held: no pin exists before its time" \
    eval '[ "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT COUNT(*) FROM db00000.pins")" = 0 ] || [ $sent_at -ge $from ]'

# mid-window, proxy A dies without a word and comes back 2 s later
sleep $(((from - $(date +%s%3N)) / 1000 + WINDOW / 2))
kill -9 "$PROXY_PID"
wait "$PROXY_PID" 2>/dev/null
sleep 2
"$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >>"$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
pids+=($PROXY_PID)
check "proxy A, killed -9 mid-window, answers again" wait_for 60 curl -sf "$A/healthz"

check "from the ledgers: every job applied once, none before its not_before" \
    "$BIN/bw-workload" -c "$CONF" lateness --wait $((WINDOW + 120)) "$WORK/jobs-0" "$WORK/jobs-1"
max_late=$("$BIN/bw-workload" -c "$CONF" lateness "$WORK/jobs-0" "$WORK/jobs-1" | tee /dev/stderr |
    sed -n 's/.*max \([0-9-]*\)$/\1/p')
check "the latest job came within a generous bound of its time (max ${max_late} ms)" \
    test "${max_late:-999999}" -le 60000
check "row by row: every pin made, and bumped once after its create" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 60 spread:$N bump:$N

# a lone timer, nothing else held: it goes out when due, not on a scan
lone_at=$(($(date +%s%3N) + 3000))
check "a lone timer 3 s ahead is held" "$BIN/bw-workload" -c "$CONF" submit --url "$B/v1/batches" --protobuf \
    --per-request 1 --not-before "$lone_at:0" --jobs-out "$WORK/lone.jobs" bump:1
check "... and applied once, not before its time" \
    sh -c "'$BIN/bw-workload' -c '$CONF' lateness --wait 30 '$WORK/lone.jobs' >'$WORK/lone.out'"
lone_late=$(sed -n 's/.*max \([0-9-]*\)$/\1/p' "$WORK/lone.out")
echo "# the lone timer: applied ${lone_late} ms after its time"
check "... within a generous bound of its time (${lone_late} ms)" test "${lone_late:-999999}" -le 5000

held_now() { bw_metric_sum bulkwrite_proxy_held_job_records "" "$A/metrics" "$B/metrics"; }
check "the proxies hold no timer now" eval '[ "$(held_now)" = 0 ]'
released=$(bw_metric_sum bulkwrite_proxy_held_batches_released_total "" "$A/metrics" "$B/metrics")
check "the proxies count the batches they released ($released)" test "$released" -gt 0
lines=$(cat "$WORK/proxy.log" "$WORK/proxy-b.log" | grep -c 'released')
check "the release is told in summary lines, not one per job ($lines lines for $((2 * N)) jobs)" \
    test "$lines" -le $((2 * N / 20))

if [ "$MODE" = embedded ]; then
    # the embedded Kafka keeps about 5 MiB of the jobs topic: held jobs past a quarter of it
    # are refused (503, saying why), and none of those taken is lost
    "$BIN/bw-workload" -c "$CONF" submit --url "$A/v1/batches" --protobuf --per-request 1 \
        --not-before "$(($(date +%s%3N) + 3600000)):0" --jobs-out "$WORK/full.jobs" spread:20000 >"$WORK/full.log" 2>&1
    check "held jobs past the embedded Kafka's room are refused with 503, saying why" \
        grep -q 'HTTP 503.*the embedded Kafka keeps 5 MiB of the jobs topic' "$WORK/full.log"
    taken=$(wc -l <"$WORK/full.jobs")
    held_a() { [ "$(bw_metric $PROXY bulkwrite_proxy_held_job_records)" = "$taken" ]; }
    check "... and every one taken before ($taken) is held" wait_for 10 held_a
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
