#!/usr/bin/env bash
# End-to-end tests: real MariaDB servers, the proxy, two consumer processes, and either
# the embedded Kafka (librdkafka mock cluster) or a real Apache Kafka broker.
#
#   test/e2e.sh embedded|kafka
#
# Each check prints "ok - …" or "not ok - …"; the last line is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: test/e2e.sh embedded|kafka}
BIN=${BW_BIN:-bin}
WORK=$(mktemp -d /tmp/bw-e2e.XXXXXX)
DB_A=24306 DB_B=24307 PROXY=28080 C1=28081 C2=28082 KAFKA=29092
HOT=5 HOT_RATE=5
pids=()
passed=0 failed=0

cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    scripts/mariadb.sh stop "$WORK/mysql-a" >/dev/null 2>&1 || true
    scripts/mariadb.sh stop "$WORK/mysql-b" >/dev/null 2>&1 || true
    [ "$MODE" = kafka ] && scripts/kafka.sh stop "$WORK/kafka" >/dev/null 2>&1
    if [ "$failed" -gt 0 ] || [ "${BW_KEEP:-0}" = 1 ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@" >"$WORK/check.out" 2>&1; then
        echo "ok - $name"; passed=$((passed + 1))
    else
        echo "not ok - $name"; sed 's/^/    /' "$WORK/check.out" | tail -25; failed=$((failed + 1))
    fi
}

wait_for() { # wait_for SECONDS COMMAND...
    local secs=$1; shift
    for _ in $(seq 1 $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}

# The reference config with this test's ports, no default rate limit, and a hot shard at 5 batches/s.
CONF=$WORK/bulkwrite.conf
sed -e "s/port = 13306;/port = $DB_A;/" -e "s/port = 13307;/port = $DB_B;/" \
    -e "s/port = 18080;/port = $PROXY;/" -e "s/default_rate = 200.0;/default_rate = 0.0;/" \
    -e "s/{ shard = 7; rate = 50.0; }/{ shard = $HOT; rate = $HOT_RATE.0; }/" \
    -e "s/consumer_group = \"bulkwrite-consumers\"/consumer_group = \"bw-e2e-$MODE\"/" \
    -e "s/produce_timeout_ms = 30000;/produce_timeout_ms = 3000;/" \
    conf/bulkwrite.conf >"$CONF"
"$BIN/bwctl" -c "$CONF" check-config >/dev/null || exit 1

echo "# e2e ($MODE): MariaDB on $DB_A and $DB_B"
scripts/mariadb.sh start "$WORK/mysql-a" $DB_A >/dev/null || exit 1
scripts/mariadb.sh start "$WORK/mysql-b" $DB_B >/dev/null || exit 1
"$BIN/bwctl" -c "$CONF" schema >/dev/null || exit 1

if [ "$MODE" = embedded ]; then
    "$BIN/bw-kafka-embedded" -c "$CONF" --bootstrap-file "$WORK/bootstrap" >"$WORK/kafka.log" 2>&1 &
    pids+=($!)
    wait_for 20 test -s "$WORK/bootstrap" || { echo "embedded kafka did not start"; exit 1; }
    BROKERS=$(cat "$WORK/bootstrap")
else
    scripts/kafka.sh start "$WORK/kafka" $KAFKA || exit 1
    BROKERS=127.0.0.1:$KAFKA
fi
echo "# kafka: $BROKERS"

# The proxy creates the topic (real broker) or finds it (embedded); consumers start after it.
"$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >"$WORK/proxy.log" 2>&1 &
pids+=($!)
wait_for 60 curl -sf "http://127.0.0.1:$PROXY/healthz" || { echo "proxy did not start"; tail "$WORK/proxy.log"; exit 1; }
consumer_pids=()
for port in $C1 $C2; do
    "$BIN/bw-consumer" -c "$CONF" -b "$BROKERS" -p $port >"$WORK/consumer-$port.log" 2>&1 &
    pids+=($!) consumer_pids+=($!)
done
assigned_both() { grep -q "assigned" "$WORK/consumer-$C1.log" && grep -q "assigned" "$WORK/consumer-$C2.log"; }
check "two consumers join the group and share the partitions" wait_for 60 assigned_both

topic_partitions() {
    if [ "$MODE" = kafka ]; then
        java -cp "${BW_KAFKA_HOME:-/var/cache/bulkwrite/kafka-4.1.1}/libs/*" \
               -Dorg.slf4j.simpleLogger.defaultLogLevel=warn org.apache.kafka.tools.TopicCommand \
               --bootstrap-server "$BROKERS" --describe --topic bulkwrite.batches | grep -q "PartitionCount: 8"
    else
        true
    fi
}
[ "$MODE" = kafka ] && check "the proxy created the topic with one partition per shard" topic_partitions

URL=http://127.0.0.1:$PROXY/v1/batches
JOBS=(spread:100000)
check "100,000 creates over 8 shards are accepted (protobuf)" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --protobuf spread:100000
check "every shard holds exactly the rows sent, row by row" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 240 spread:100000

# The hot shard at 5 batches/s: 20,000 creates = 40 batches of 500 take about
# (40 - 6 stored or immediate permits) / 5 = 6.8 s; the bounds are generous.
start=$(date +%s.%N)
check "20,000 creates for a partner on the rate-limited shard are accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --protobuf feed:20000:$HOT
check "the rate-limited shard applies them all" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 240 spread:100000 feed:20000:$HOT
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
echo "# rate-limited shard: 40 batches at $HOT_RATE/s took ${elapsed}s"
check "the rate-limited shard took at least 5 s and at most 120 s (${elapsed}s)" \
    awk -v e="$elapsed" 'BEGIN {exit !(e >= 5 && e <= 120)}'

metric_sum() { # metric_sum NAME [SHARD]: summed over both consumers (and shards)
    for port in $C1 $C2; do curl -sf "http://127.0.0.1:$port/metrics"; done |
        awk -v name="$1" -v shard="${2:-}" '$1 ~ "^" name "[{]" && (shard == "" || index($1, "shard=\"" shard "\"")) {s += $2}
            END {print s + 0}'
}
batches_before=$(metric_sum bulkwrite_consumer_batches_applied_total $HOT)
check "JSON: a spam cleanup is accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" cleanup:20000:$HOT
# 2,000 increments in requests of 10 ops: 200 small messages on the 5 batches/s shard.
# Buffered behind the limiter, consecutive ones coalesce into statements of up to 200 rows.
check "JSON: like increments in 200 small requests are accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --per-request 10 like:20000:$HOT
check "deletes and increments land exactly once" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 240 spread:100000 feed:20000:$HOT cleanup:20000:$HOT like:20000:$HOT

batches=$(( $(metric_sum bulkwrite_consumer_batches_applied_total $HOT) - batches_before ))
echo "# 2 delete messages and 200 increment messages on the limited shard took $batches statements"
check "small messages of one (type, op) coalesce: at most 60 statements for 202 messages ($batches)" \
    test "$batches" -le 60

check "every Kafka message sits in its shard's partition" \
    "$BIN/bw-workload" -c "$CONF" audit --brokers "$BROKERS"

applied() { # rows applied by the consumer on PORT
    curl -sf "http://127.0.0.1:$1/metrics" | awk '/^bulkwrite_consumer_rows_applied_total/ {s += $2} END {print s + 0}'
}
rows1=$(applied $C1) rows2=$(applied $C2)
echo "# rows applied: consumer 1 $rows1, consumer 2 $rows2"
# 100,000 + 20,000 creates, 2,000 deletes, 2,000 updates
check "both consumers applied rows, together each row once ($rows1 + $rows2 = 124000)" \
    bash -c "[ $rows1 -gt 0 ] && [ $rows2 -gt 0 ] && [ $((rows1 + rows2)) -eq 124000 ]"

# A consumer in a brand-new group has no Kafka offsets: it must resume from the offsets
# stored in the shards, reading nothing again and applying nothing twice.
for pid in "${consumer_pids[@]}"; do kill "$pid"; wait "$pid" 2>/dev/null; done
sed "s/consumer_group = \"bw-e2e-$MODE\"/consumer_group = \"bw-e2e-$MODE-fresh\"/" "$CONF" >"$WORK/fresh.conf"
"$BIN/bw-consumer" -c "$WORK/fresh.conf" -b "$BROKERS" -p $C1 >"$WORK/consumer-fresh.log" 2>&1 &
pids+=($!)
check "a consumer in a new group joins" wait_for 60 curl -sf "http://127.0.0.1:$C1/readyz"
check "it applies new work: 1,000 creates on shard 2" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" feed:1000:2
check "the shards hold exactly the expected rows, old and new" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 60 spread:100000 feed:20000:$HOT cleanup:20000:$HOT \
    like:20000:$HOT feed:1000:2
fresh() { curl -sf "http://127.0.0.1:$C1/metrics" | awk -v name="$1" '$1 ~ "^" name "[{]" {s += $2} END {print s + 0}'; }
fresh_rows=$(fresh bulkwrite_consumer_rows_applied_total) fresh_replayed=$(fresh bulkwrite_consumer_messages_replayed_total)
check "it resumed from the shards' stored offsets: 1000 rows applied, 0 messages re-read ($fresh_rows, $fresh_replayed)" \
    test "$fresh_rows,$fresh_replayed" = "1000,0"

status_of() { curl -s -o /dev/null -w '%{http_code}' -H "Content-Type: $1" --data-binary "$2" "$URL"; }
check "malformed JSON gets 400" test "$(status_of application/json '{"ops": [')" = 400
check "a wrong content type gets 415" test "$(status_of text/plain 'hello')" = 415
check "an invalid op is rejected alone with its reason" bash -c \
    "curl -sf -H 'Content-Type: application/json' --data-binary '{\"ops\":[{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":68719476736},{\"op\":\"delete\",\"object_type\":\"nope\",\"id\":1}]}' '$URL' | grep -q '\"index\":1,\"reason\":\"unknown object_type'"
check "promtool accepts the proxy's metrics" bash -c "curl -sf http://127.0.0.1:$PROXY/metrics | promtool check metrics"
check "promtool accepts the consumer's metrics" bash -c "curl -sf http://127.0.0.1:$C1/metrics | promtool check metrics"

# A config whose shard count differs from the topic's partitions must not start.
sed -e 's/count = 8;/count = 4;/' -e 's/last_shard = 3;/last_shard = 1;/' -e 's/first_shard = 4;/first_shard = 2;/' \
    -e 's/last_shard = 7;/last_shard = 3;/' -e "s/{ shard = $HOT; rate/{ shard = 1; rate/" "$CONF" >"$WORK/four.conf"
wrong_count() {
    ! "$BIN/bw-proxy" -c "$WORK/four.conf" -b "$BROKERS" -p 0 2>"$WORK/four.log" &&
        grep -q "has 8 partitions but shards.count is 4" "$WORK/four.log"
}
check "a topic whose partition count differs from shards.count stops startup" wrong_count

if [ "$MODE" = kafka ]; then
    # With the broker gone, nothing may be reported as accepted: both ops come back as
    # not accepted, with the reason, once produce_timeout_ms (3 s here) has passed.
    scripts/kafka.sh stop "$WORK/kafka" >/dev/null 2>&1
    body='{"ops":[{"op":"delete","object_type":"pin","id":68719476736},{"op":"delete","object_type":"pin","id":68719476737}]}'
    kafka_down() {
        local code
        code=$(curl -s -o "$WORK/down.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$body" "$URL")
        cat "$WORK/down.json"
        [ "$code" = 503 ] && grep -q '"accepted":0' "$WORK/down.json" &&
            grep -q '"index":0,"reason":"not accepted' "$WORK/down.json" &&
            grep -q '"index":1,"reason":"not accepted' "$WORK/down.json"
    }
    check "with Kafka down the reply names every op as not accepted (503)" kafka_down
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
