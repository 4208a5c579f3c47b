#!/usr/bin/env bash
# Priority lanes: a spam cleanup sent as "urgent" behind a bulk ingestion on the same
# shard gets its lane's weight of the shard's statements, not the ingestion's leftovers.
#
#   test/tiers/lanes.sh embedded|kafka
#
# Lanes "urgent" (weight 4) and "bulk" (weight 1); shard $HOT limited to $RATE
# statements/s, pin deletes cut in statements of $DELETE_BATCH rows (so the 2,000-op
# cleanup is 200 statements, enough to measure a share). A 200,000-create feed goes to
# the shard as "bulk"; once its first 20,000 pins are in place (the cleanup deletes
# every 10th of them, and lanes keep no order between them), the cleanup goes as
# "urgent". The consumer's /metrics is sampled every 0.5 s: between the sample where the
# urgent lane had run $FROM statements and the one where it had run $TO (both lanes
# with work all along), its share of the shard's statements must be within ±20 % of
# 4/5. The cleanup must finish while the bulk lane still has a backlog. Then a second
# consumer joins (each must hold whole shards: every lane of a shard), the rest of the
# feed drains and every row is compared, row by row.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/lanes.sh embedded|kafka}
. test/lib.sh
RATE=20 DELETE_BATCH=10 FEED=200000 CLEANUP=20000 FROM=20 TO=160 WEIGHT_URGENT=4 WEIGHT_BULK=1

bw_stack_conf() {
    "$BIN/bwctl" config-set "$1" "shards.rate_overrides=( { shard = $HOT; rate = $RATE.0; } )" \
        "object_types[0].batch_size.delete=$DELETE_BATCH" \
        "lanes=( { name = \"urgent\"; weight = $WEIGHT_URGENT; }, { name = \"bulk\"; weight = $WEIGHT_BULK; } )" || exit 1
}
bw_stack_start lanes "$MODE"
start_consumer $C1
C1_PID=$LAST_PID

metrics() { bw_metrics_text $C1; }
lane_series() { # lane_series NAME LANE < metrics: the shard's value
    awk -v k="$1{shard=\"$HOT\",lane=\"$2\"}" '$1 == k {print $2}'
}
rows_applied() { metrics | awk -v k="bulkwrite_consumer_rows_applied_total{shard=\"$HOT\"}" '$1 == k {print $2}'; }
rows_at_least() { [ "$(rows_applied)" -ge "$1" ] 2>/dev/null; }

check "a request naming a lane the config does not have is refused (400, naming it)" \
    sh -c "curl -s -o '$WORK/badlane.json' -w '%{http_code}' -H 'Content-Type: application/json' \
        -d '{\"lane\":\"nosuch\",\"ops\":[{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":1}]}' '$URL' | grep -qx 400 &&
        grep -q 'unknown lane \\\\\"nosuch\\\\\" (the configured lanes: default, urgent, bulk)' '$WORK/badlane.json'"

# the feed, in the background: on the embedded Kafka its backlog bound makes it wait (429)
"$BIN/bw-workload" -c "$CONF" submit --url "$URL" --protobuf --lane bulk feed:$FEED:$HOT >"$WORK/feed.log" 2>&1 &
FEED_PID=$!
check "the bulk feed's first $CLEANUP pins are in place" wait_for 180 rows_at_least $CLEANUP

# sample the lanes every 0.5 s while the cleanup runs
: >"$WORK/samples.txt"
(
    while :; do
        m=$(metrics) || continue
        printf '%s %s %s %s %s\n' "$(date +%s.%N)" \
            "$(lane_series bulkwrite_consumer_lane_statements_total urgent <<<"$m")" \
            "$(lane_series bulkwrite_consumer_lane_statements_total bulk <<<"$m")" \
            "$(lane_series bulkwrite_consumer_lane_lag urgent <<<"$m")" \
            "$(lane_series bulkwrite_consumer_lane_lag bulk <<<"$m")" >>"$WORK/samples.txt"
        sleep 0.5
    done
) &
SAMPLER_PID=$!
t0=$(date +%s.%N)
check "the urgent cleanup ($((CLEANUP / 10)) deletes) is accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --protobuf --lane urgent --request-id lanes-cleanup cleanup:$CLEANUP:$HOT
urgent_done() { # every statement of the cleanup ran (200), and its lane has nothing left
    awk -v n=$((CLEANUP / 10 / DELETE_BATCH)) 'END {exit !($2 >= n && $4 == 0)}' "$WORK/samples.txt"
}
check "the urgent lane drains" wait_for 120 urgent_done
t1=$(date +%s.%N)
kill "$SAMPLER_PID" 2>/dev/null
wait "$SAMPLER_PID" 2>/dev/null

# the window: from the first sample with >= FROM urgent statements to the first with >= TO
awk -v from=$FROM -v to=$TO '$2 >= from && !a {a = $0} $2 >= to && !b {b = $0} END {print a; print b}' \
    "$WORK/samples.txt" >"$WORK/window.txt"
read -r _ u0 b0 _ _ < <(sed -n 1p "$WORK/window.txt")
read -r _ u1 b1 _ lag_bulk < <(sed -n 2p "$WORK/window.txt")
echo "# window: urgent $u0 -> $u1, bulk $b0 -> $b1 statements; bulk lag at its end $lag_bulk"
share=$(awk -v u0="${u0:-0}" -v u1="${u1:-0}" -v b0="${b0:-0}" -v b1="${b1:-0}" \
    'BEGIN {d = (u1 - u0) + (b1 - b0); s = 0; if (d > 0) s = (u1 - u0) / d; printf "%.3f", s}')
want=$(awk -v u=$WEIGHT_URGENT -v b=$WEIGHT_BULK 'BEGIN {printf "%.3f", u / (u + b)}')
echo "# urgent share of the shard's statements: $share (weight share $want); cleanup took $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s"
check "the window was sampled (urgent from $FROM to $TO statements)" test -n "${u1:-}"
check "the bulk lane had a backlog all through the window (lag $lag_bulk at its end)" test "${lag_bulk:-0}" -gt 0
check "the urgent share $share is within ±20 % of its weight's $want" \
    awk -v s="$share" -v w="$want" 'BEGIN {exit !(s >= w * 0.8 && s <= w * 1.2)}'
bulk_lag_now=$(metrics | lane_series bulkwrite_consumer_lane_lag bulk)
check "the cleanup finished before the ingestion's backlog (bulk lag $bulk_lag_now when it did)" \
    test "${bulk_lag_now:-0}" -gt 0
check "GET /v1/shards shows the shard's lanes, the default first" \
    sh -c "curl -sf 'http://127.0.0.1:$PROXY/v1/shards' | jq -e '.shards[$HOT].consumer.lanes | map(.lane) == [\"default\", \"urgent\", \"bulk\"]' >/dev/null"
check "bwctl shards --lanes lists the shard's lanes with their weights" \
    sh -c "'$BIN/bwctl' -c '$CONF' shards --lanes | awk '\$1 == $HOT {printf \"%s %s \", \$2, \$3}' | grep -qx 'default 1 urgent 4 bulk 1 '"
# a delete of a pin that does not exist (a no-op, counted as applied), sent as urgent in JSON
urgent_job=$(curl -sf -H 'Content-Type: application/json' --data-binary \
    '{"lane":"urgent","ops":[{"op":"delete","object_type":"pin","id":'$(( (HOT << 46) | (1 << 36) | 999999999 ))'}]}' \
    "$URL" | jq -r .job_id)
job_lane() { curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$urgent_job" | jq -e '.lane == "urgent" and .finished' >/dev/null; }
check "a JSON request names its lane; GET /v1/jobs says it (job ${urgent_job:-none})" wait_for 60 job_lane

# a second consumer while the feed still flows: the range assignor gives each consumer
# whole shards (every lane of a shard on one consumer), and nothing is applied twice
start_consumer $C2
C2_PID=$LAST_PID
lanes_whole() { # lanes_whole PORT: the consumer holds shards, each with its 3 lanes
    curl -sf "http://127.0.0.1:$1/metrics" | awk -F'"' '/^bulkwrite_consumer_lane_lag[{]/ {n[$2]++; k++}
        END {for (s in n) if (n[s] != 3) bad = 1; exit bad || !k}'
}
check "a second consumer joins and holds whole shards (all 3 lanes of each)" wait_for 90 lanes_whole $C2
check "so does the first" wait_for 60 lanes_whole $C1
check "no consumer warned of a shard's lanes split between consumers" \
    sh -c "! grep -q 'have only some of their' '$WORK'/consumer-*.log"
check "the feed is accepted whole" wait_for 300 sh -c "! kill -0 $FEED_PID 2>/dev/null"
wait "$FEED_PID"
check "the feed's submit succeeded" test $? -eq 0
check "both jobs applied: every row of every shard in place (row by row)" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 240 feed:$FEED:$HOT cleanup:$CLEANUP:$HOT
# stopped while Kafka is up, as an operator would
kill "$C1_PID" "$C2_PID"
check "the consumers stop within 30 s" wait_for 30 sh -c "ps -o stat= -p $C1_PID,$C2_PID | grep -qv Z; test \$? = 1"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
