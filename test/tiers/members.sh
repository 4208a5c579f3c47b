#!/usr/bin/env bash
# test/tiers/members.sh kafka: quiet deploys. Three consumers of one group on a real broker,
# each a static member (consumer.instance_id "auto": group.instance.id HOST:PORT), shards
# at a gentle rate so that a stall shows:
#   - a consumer stopped and started again within session.timeout.ms (10 s) gets its
#     own partitions back, and the group does not rebalance: the other two log no
#     revocation or assignment, and their shards keep applying meanwhile;
#   - a second consumer given the same instance id fences the first, which stops (exit 1)
#     naming the id; the group stays whole;
#     (the longest gap between applied batches of every shard during the restart, from
#     the ledger's bw_job_parts.applied_at, is printed: the others' under 2 s);
#   - a consumer killed -9 and not restarted: after the session timeout the others take
#     its shards; one of them, throttled there (the throttle's custom signal on its
#     server held between its recovery level and its threshold), resumes on its new
#     consumer at the rate it had, not at its cap, as its last status record said;
#   - every row exact at the end.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/members.sh kafka}
. test/lib.sh
C3=$((28083 + off)) OPS=${BW_MEMBERS_OPS:-64000}

CAP=20
# every shard at 100 rows/s: the load lasts the whole test, and a stall shows. The
# throttle's one signal is a global variable the test sets per server (harmless: the
# depth of stored procedure recursion, which nothing here uses)
bw_stack_conf() {
    "$BIN/bwctl" config-set "$1" shards.default_rate=$CAP.0 shards.default_row_rate=100.0 'shards.rate_overrides=( )' \
        consumer.instance_id=auto throttle.mode=on throttle.interval_ms=500 throttle.quiet_ms=1000 \
        'throttle.custom_query="SELECT @@GLOBAL.max_sp_recursion_depth"' throttle.custom_threshold=100.0 || exit 1
}
bw_stack_start members "$MODE"
start_consumer $C1; P1=$LAST_PID
start_consumer $C2; P2=$LAST_PID
start_consumer $C3; P3=$LAST_PID
all_ready() { curl -sf "http://127.0.0.1:$C1/readyz" && curl -sf "http://127.0.0.1:$C2/readyz" && curl -sf "http://127.0.0.1:$C3/readyz"; }
check "three consumers joined the group" wait_for 120 all_ready
static_members() {
    local c
    for c in $C1 $C2 $C3; do grep -q "as static member \"$(hostname):$c\"" "$WORK/consumer-$c.log" || return 1; done
}
check "each is a static member named HOST:PORT" static_members
# the group settles: each consumer's last log line about its share is an assignment
settled() {
    local c n=0
    for c in $C1 $C2 $C3; do
        n=$((n + $(grep 'assigned [0-9]* partitions' "$WORK/consumer-$c.log" | tail -1 | grep -o 'assigned [0-9]*' | cut -d' ' -f2)))
    done
    [ "$n" = 8 ]
}
check "the group's eight partitions are shared by the three" wait_for 60 settled
assigned_line() { grep -c 'assigned [0-9]* partitions\|revoking [0-9]* partitions' "$WORK/consumer-$1.log"; }

# A steady load on every shard for the rest of the test.
"$BIN/bw-workload" -c "$CONF" submit --url "$URL" --per-request 50 --retry-for 300 --request-id members \
    spread:$OPS >"$WORK/submit.log" 2>&1 &
SUBMIT=$!
sleep 3

# ---- a quick restart is no rebalance -----------------------------------------------------------
before1=$(assigned_line $C1) before2=$(assigned_line $C2)
shards_of() { # the shards the consumer holds (its lag gauges), sorted
    curl -sf "http://127.0.0.1:$1/metrics" |
        awk '$1 ~ /^bulkwrite_consumer_lag_messages\{shard="/ { sub(/.*shard="/, "", $1); sub(/".*/, "", $1); print $1 }' |
        sort -n | tr '\n' ' '
}
mine=$(shards_of $C3)
echo "# consumer $C3 holds shards: $mine"
[ -n "$mine" ] || { echo "not ok - consumer $C3 holds no shard"; failed=$((failed + 1)); }
applied_total() { curl -sf "http://127.0.0.1:$1/metrics" |
    awk '$1 ~ /^bulkwrite_consumer_batches_applied_total/ { n += $2 } END { print n + 0 }'; }
a1=$(applied_total $C1) a2=$(applied_total $C2)
t0=$(date +%s.%N)
kill "$P3"; wait "$P3" 2>/dev/null
start_consumer $C3; P3=$LAST_PID
check "the restarted consumer is ready again" wait_for 60 curl -sf "http://127.0.0.1:$C3/readyz"
sleep 12 # past session.timeout.ms: a rebalance, had there been one, is over
t1=$(date +%s.%N)
db_port() { if [ "$1" -lt 4 ]; then echo $DB_A; else echo $DB_B; fi; }
longest_gap() { # longest_gap SHARD FROM TO: seconds between batches applied in [FROM, TO] (and its ends)
    mariadb -h127.0.0.1 -P"$(db_port "$1")" -uroot -N -e "
        SELECT ROUND(COALESCE(MAX(gap), $3 - $2), 3) FROM (
            SELECT ts - LAG(ts) OVER (ORDER BY ts) AS gap FROM (
                SELECT DISTINCT UNIX_TIMESTAMP(applied_at) AS ts FROM db$(printf %05d "$1").bw_job_parts
                    WHERE applied_at BETWEEN FROM_UNIXTIME($2) AND FROM_UNIXTIME($3)
                UNION ALL SELECT $2 UNION ALL SELECT $3) t) g"
}
worst_gap() { # worst_gap SHARDS...: "SECONDS SHARD", the longest of longest_gap over them
    local s
    for s in "$@"; do echo "$(longest_gap "$s" "$t0" "$t1") $s"; done | sort -g | tail -1
}
others=$(for s in 0 1 2 3 4 5 6 7; do [[ " $mine " == *" $s "* ]] || echo "$s"; done | tr '\n' ' ')
read -r gap_others at_others <<<"$(worst_gap $others)"
read -r gap_mine at_mine <<<"$(worst_gap $mine)"
echo "# the restart, from the ledgers' applied_at: the other consumers' shards ($others) went at most ${gap_others} s (shard $at_others) without an applied batch; the restarted consumer's own ($mine) ${gap_mine} s (shard $at_mine)"
check "no other consumer's shard stalled: its longest gap between applied batches is under 2 s (${gap_others} s)" \
    awk -v g="$gap_others" 'BEGIN {exit !(g != "" && g + 0 < 2)}'
check "the other two logged no revocation or assignment during the restart" \
    test "$(assigned_line $C1) $(assigned_line $C2)" = "$before1 $before2"
same_shards() { [ "$(shards_of $C3)" = "$mine" ]; }
check "the restarted consumer holds the same shards as before ($mine)" same_shards
kept_applying() { [ "$(applied_total $C1)" -gt "$a1" ] && [ "$(applied_total $C2)" -gt "$a2" ]; }
check "the other two kept applying meanwhile" kept_applying

# ---- the same instance id twice --------------------------------------------------------------
cp "$CONF" "$WORK/twin.conf" && "$BIN/bwctl" config-set "$WORK/twin.conf" "consumer.instance_id=$(hostname):$C2" || exit 1
start_consumer $((C3 + 10)) "$WORK/twin.conf"
TWIN=$LAST_PID
fenced() { ! kill -0 "$P2" 2>/dev/null && grep -q 'FENCED_INSTANCE_ID.*this consumer stops (exit 1): another consumer of the group runs with the same group.instance.id' "$WORK/consumer-$C2.log"; }
check "a second consumer with the same instance id fences the first, which stops naming it" wait_for 60 fenced
wait "$P2" 2>/dev/null; code=$?
check "... with exit code 1" test "$code" = 1
kill "$TWIN"; wait "$TWIN" 2>/dev/null
start_consumer $C2; P2=$LAST_PID
check "the fenced consumer, started again, is ready" wait_for 60 curl -sf "http://127.0.0.1:$C2/readyz"

# ---- settings that must agree ------------------------------------------------------------------
# A proxy with another job-id secret (a resend through it would be another job) and a
# consumer with other batch sizes start after the fleet: each refuses to become ready,
# naming the setting; a proxy like the first is ready beside them.
cp "$CONF" "$WORK/secret.conf" && "$BIN/bwctl" config-set "$WORK/secret.conf" proxy.auth.job_id_secret=another || exit 1
cp "$CONF" "$WORK/batch.conf" && "$BIN/bwctl" config-set "$WORK/batch.conf" 'object_types[0].batch_size.create=499' || exit 1
"$BIN/bw-proxy" -c "$WORK/secret.conf" -b "$BROKERS" -p 0 --port-file "$WORK/secret.port" >"$WORK/proxy-secret.log" 2>&1 &
ODD_PROXY=$!
"$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" -p 0 --port-file "$WORK/same.port" >"$WORK/proxy-same.log" 2>&1 &
SAME_PROXY=$!
pids+=($ODD_PROXY $SAME_PROXY)
start_consumer $((C3 + 20)) "$WORK/batch.conf"
ODD_CONSUMER=$LAST_PID
wait_for 60 test -s "$WORK/secret.port" && wait_for 60 test -s "$WORK/same.port"
ODD=http://127.0.0.1:$(cat "$WORK/secret.port") SAME=http://127.0.0.1:$(cat "$WORK/same.port")
odd_proxy() {
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$ODD/readyz")" = 503 ] &&
        grep -q "fleet proxy .*: proxy.auth.job_id_secret differs from that of proxy $(hostname):$PROXY" "$WORK/proxy-secret.log"
}
check "a proxy with another job-id secret is not ready, and its log names the setting and the proxy" wait_for 30 odd_proxy
odd_batch() {
    local code
    code=$(curl -s -o "$WORK/odd.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary '{"ops":[{"op":"delete","object_type":"pin","id":68719476736}]}' "$ODD/v1/batches")
    cat "$WORK/odd.json"
    [ "$code" = 503 ] && grep -q "this proxy's settings differ" "$WORK/odd.json"
}
check "... and takes no batch (503)" odd_batch
check "a proxy with the same settings is ready beside it" wait_for 30 curl -sf "$SAME/readyz"
odd_consumer() {
    grep -q "fleet consumer .*: object_types differs from that of" "$WORK/consumer-$((C3 + 20)).log" &&
        ! curl -sf "http://127.0.0.1:$((C3 + 20))/readyz" && ! grep -q 'assigned [0-9]* partitions' "$WORK/consumer-$((C3 + 20)).log"
}
check "a consumer with other batch sizes does not join the group, naming the setting" wait_for 30 odd_consumer
kill "$ODD_CONSUMER" "$ODD_PROXY" "$SAME_PROXY" 2>/dev/null; wait "$ODD_CONSUMER" "$ODD_PROXY" "$SAME_PROXY" 2>/dev/null

# ---- a consumer lost for good ------------------------------------------------------------------
lost=$(shards_of $C3)
[ -n "$lost" ] || { echo "not ok - consumer $C3 holds no shard"; failed=$((failed + 1)); }
backlog_of() { curl -sf "http://127.0.0.1:$1/metrics" |
    awk '$1 ~ /^bulkwrite_consumer_lag_messages\{/ { n += $2 } END { print n + 0 }'; }
check "its shards still have a backlog to apply (it must outlast the kill)" test "$(backlog_of $C3)" -gt 0
# one of its shards throttled: the signal over its threshold (100) until the throttle cuts,
# then between the recovery level (80) and the threshold, where the rate holds
T=${lost%% *}
set_signal() { mariadb -h127.0.0.1 -P"$(db_port $T)" -uroot -e "SET GLOBAL max_sp_recursion_depth = $1"; }
metric_of() { bw_metric "$1" "$2"; }
rate_of() { metric_of "$1" "bulkwrite_consumer_rate_batches_per_second{shard=\"$T\"}"; }
throttled_on() { [ "$(metric_of "$1" "bulkwrite_consumer_throttle_state{shard=\"$T\",state=\"throttled\"}")" = 1 ]; }
below_cap() { awk -v r="$(rate_of "$1")" -v c=$CAP 'BEGIN {exit !(r != "" && r > 0 && r < c)}'; }
set_signal 150
check "the signal over its threshold: shard $T is throttled on consumer $C3 within 10 s" \
    wait_for 10 eval "throttled_on $C3 && below_cap $C3"
set_signal 90
sleep 2 # the cut under way, if any, is made; between the levels the rate holds from here
R=$(rate_of $C3)
status_says() { # the proxy's view (the status topic): shard $T of consumer $1 throttled at $R
    curl -sf "http://127.0.0.1:$PROXY/v1/shards" | jq -e --arg c "127.0.0.1:$1" --argjson r "$R" --argjson s "$T" \
        '.shards[$s].consumer | .instance == $c and .throttle.state == "throttled" and .throttle.rate == $r' >/dev/null
}
check "... held there at $R statements/s (cap $CAP), and its status record says so" wait_for 10 status_says $C3
kill -9 "$P3"; wait "$P3" 2>/dev/null
taken_over() {
    local s held
    held=" $(shards_of $C1)$(shards_of $C2) "
    for s in $lost; do [[ $held == *" $s "* ]] || return 1; done
}
check "after the session timeout the others take the killed consumer's shards ($lost)" wait_for 90 taken_over
NEW=$C1
[[ " $(shards_of $C2) " == *" $T "* ]] && NEW=$C2
resumed_line() {
    grep -E "shard $T: resumes the throttle's $R stmt/s \(throttled since [0-9T:-]+Z\), from consumer 127.0.0.1:$C3's status \([0-9.]+ s old\)" \
        "$WORK/consumer-$NEW.log"
}
check "consumer $NEW took shard $T and logged that it resumes the throttle's $R statements/s from consumer $C3's status" resumed_line
check "... it runs shard $T throttled at $R statements/s, not at its cap" \
    eval "throttled_on $NEW && [ \"\$(rate_of $NEW)\" = \"$R\" ]"
check "... and its status records (the proxy's GET /v1/shards) say so" wait_for 10 status_says $NEW
first_rate() { # the first rate line of shard $T after the line that seeded it
    awk -v seeded="shard $T: resumes" -v rate="shard=$T rate " 'index($0, seeded) {on = 1} on && index($0, rate)' \
        "$WORK/consumer-$NEW.log" | head -1 | grep -- "-> $R statements/s"
}
check "... its rate was set once on arrival, to $R (never at its cap meanwhile)" first_rate
set_signal 0
check "the signal back to 0: shard $T climbs back to its cap on consumer $NEW" \
    wait_for 30 eval "[ \"\$(rate_of $NEW)\" = $CAP ]"
submitted() { wait "$SUBMIT"; }
check "every request of the load ends accepted" submitted
check "every shard holds exactly the rows sent, row by row" "$BIN/bw-workload" -c "$CONF" verify --wait 300 spread:$OPS

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
