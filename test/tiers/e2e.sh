#!/usr/bin/env bash
# End-to-end tests: real MariaDB servers, the proxy, two consumer processes, and either
# the embedded Kafka (librdkafka mock cluster) or a real Apache Kafka broker.
#
#   test/tiers/e2e.sh embedded|kafka
#
# Each check prints "ok - …" or "not ok - …"; the last line is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/e2e.sh embedded|kafka}
. test/lib.sh
bw_stack_start e2e "$MODE"
# the audit below reads every message back from Kafka: the consumers must not delete what
# they applied meanwhile (DeleteRecords is tested in backlog.sh)
"$BIN/bwctl" config-set "$CONF" consumer.delete_applied_interval_ms=0 || exit 1

# bw_stack_start made the users as root (`schema --create-users --admin-user root`). Without
# --admin-user, schema connects as each server's `user`; one that does not exist yet is
# refused at connect (access denied, 1045), and bwctl says to pass --admin-user.
cp "$CONF" "$WORK/nouser.conf"
"$BIN/bwctl" config-set "$WORK/nouser.conf" 'shards.servers[0].user=bw_nobody' 'shards.servers[1].user=bw_nobody' || exit 1
schema_hint() {
    [ "$("$BIN/bwctl" dump-config -c "$WORK/nouser.conf" | grep -c 'user = "bw_nobody";')" = 2 ] ||
        { echo "the config edit did nothing"; return 1; }
    if "$BIN/bwctl" -c "$WORK/nouser.conf" schema --create-users >"$WORK/schema.out" 2>&1; then
        echo "schema succeeded as bw_nobody"; return 1
    fi
    cat "$WORK/schema.out"
    grep -q "Access denied for user 'bw_nobody'" "$WORK/schema.out" && grep -q -- "pass$" "$WORK/schema.out" &&
        grep -q -- "--admin-user USER" "$WORK/schema.out"
}
check "schema --create-users as a user that does not exist says to pass --admin-user" schema_hint
# the consumer's own user exists now, but may not create databases or users (1044)
schema_hint_denied() {
    if "$BIN/bwctl" -c "$CONF" schema --create-users >"$WORK/schema.out" 2>&1; then
        echo "schema succeeded as bw_consumer"; return 1
    fi
    cat "$WORK/schema.out"
    grep -q "Access denied for user 'bw_consumer'" "$WORK/schema.out" && grep -q -- "--admin-user USER" "$WORK/schema.out"
}
check "schema --create-users as the consumer's own user says to pass --admin-user" schema_hint_denied

consumer_pids=()
for port in $C1 $C2; do
    start_consumer $port
    consumer_pids+=($LAST_PID)
done
assigned_both() { grep -q "assigned" "$WORK/consumer-$C1.log" && grep -q "assigned" "$WORK/consumer-$C2.log"; }
# bwctl's config verbs: -c after the verb, --help after any, config-set refusing what is wrong
config_verbs() {
    "$BIN/bwctl" check-config -c "$WORK/nouser.conf" | grep -q "^$WORK/nouser.conf: ok" &&
        "$BIN/bwctl" check-config --help | grep -q '^usage: bwctl check-config' &&
        "$BIN/bwctl" dump-config --help | grep -q '^usage: bwctl dump-config' &&
        "$BIN/bwctl" config-doc --help | grep -q '^usage: bwctl config-doc' &&
        "$BIN/bwctl" config-set --help | grep -q '^usage: bwctl config-set' &&
        printf 'shards = { count = "x"; };\n' >"$WORK/broken.conf" &&
        ! "$BIN/bwctl" check-config -c "$WORK/broken.conf" 2>"$WORK/check.err" &&
        grep -q 'shards.count: expected an integer' "$WORK/check.err" || return 1
    cp "$WORK/nouser.conf" "$WORK/set.conf"
    local code
    for bad in proxy.no_such_key=1 proxy.max_ops=-3 log_level=loud 'shards.count="x"'; do
        "$BIN/bwctl" config-set "$WORK/set.conf" proxy.max_ops=7 "$bad" 2>"$WORK/set.err"; code=$?
        [ "$code" = 2 ] && grep -q "${bad%%=*}" "$WORK/set.err" || { echo "$bad: exit $code"; cat "$WORK/set.err"; return 1; }
    done
    cmp -s "$WORK/nouser.conf" "$WORK/set.conf" || { echo "a refused config-set wrote the file"; return 1; }
    "$BIN/bwctl" config-set "$WORK/set.conf" proxy.max_ops=7 &&
        "$BIN/bwctl" dump-config -c "$WORK/set.conf" >"$WORK/set.dump" && grep -q 'max_ops = 7;' "$WORK/set.dump"
}
check "bwctl check-config/dump-config take -c after the verb, --help prints help, config-set refuses bad keys and values" config_verbs

check "two consumers join the group and share the partitions" wait_for 60 assigned_both
# Gauges only for the shards a consumer holds now: a partition it had before the other
# consumer joined (revoked) leaves its /metrics, so the two lists are disjoint and cover
# every shard once.
gauge_shards() { curl -sf "http://127.0.0.1:$1/metrics" | awk -F'"' '/^bulkwrite_consumer_lag_messages[{]/ {print $2}'; }
gauges_split() {
    local a b
    a=$(gauge_shards $C1) b=$(gauge_shards $C2)
    [ -n "$a" ] && [ -n "$b" ] && [ "$(printf '%s\n%s\n' "$a" "$b" | sort -n | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 " ]
}
check "each consumer's gauges list only the shards it holds (revoked ones leave /metrics)" wait_for 30 gauges_split

# A shard paused before it ever applied anything keeps its backlog and applies all of it
# on resume (it has no stored offset yet: resuming must not jump to the end of the log).
BWCTL=("$BIN/bwctl" -c "$CONF" --url "http://127.0.0.1:$PROXY")
paused_sum() { for port in $C1 $C2; do curl -sf "http://127.0.0.1:$port/metrics"; done |
    awk -v m="$1{shard=\"$2\"}" '$1 == m {s += $2} END {print s + 0}'; }
is_paused6() { [ "$(paused_sum bulkwrite_consumer_paused 6)" = 1 ]; }
check "a fresh shard (6) is paused before its first batch" "${BWCTL[@]}" pause 6 --reason "fresh shard test"
check "the consumer owning shard 6 pauses it" wait_for 10 is_paused6
key6=
for i in $(seq 1 200); do
    h=$(printf %s "fresh-$i" | md5sum | cut -c15-16)
    if [ $((16#$h % 8)) = 6 ]; then key6=fresh-$i; break; fi
done
fresh_boards() { mariadb -h127.0.0.1 -P$DB_B -uroot -N -e "SELECT COUNT(*) FROM db00006.boards WHERE partner = '$key6'"; }
ops6=$(for i in $(seq 1 50); do printf '%s{"op":"create","object_type":"board","shard_key":"%s","fields":{"partner":"%s","name":"n%d"}}' \
    "$([ $i = 1 ] || echo ,)" "$key6" "$key6" $i; done)
check "50 boards for shard 6 (key $key6) are accepted while it is paused" test "$(curl -s -o /dev/null -w '%{http_code}' \
    -H 'Content-Type: application/json' --data-binary "{\"ops\":[$ops6]}" "$URL")" = 202
sleep 3
check "nothing is applied to the paused fresh shard" test "$(fresh_boards)" = 0
check "resume shard 6" "${BWCTL[@]}" resume 6
boards6_applied() { [ "$(fresh_boards)" = 50 ]; }
check "after the resume all 50 are applied" wait_for 30 boards6_applied

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

proxy_metric() { bw_metric $PROXY "$1"; }
requests_before=$(proxy_metric bulkwrite_proxy_accept_latency_seconds_count)
flushes_before=$(proxy_metric bulkwrite_proxy_linger_flushes_total)
check "100,000 creates over 8 shards are accepted (protobuf)" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --protobuf spread:100000
# one client, one request at a time: each is alone in the proxy, so the pollers of the
# producers it used flush (its batches leave at once instead of lingering for other
# requests' messages: kafka.producer_properties' linger.ms 5 in the reference config).
# Each request wakes at least one producer, and each wake-up is one flush (test_kafka.c
# checks that the wake-up interrupts the poll and that a flush overrides linger.ms).
requests=$(($(proxy_metric bulkwrite_proxy_accept_latency_seconds_count) - requests_before))
flushes=$(($(proxy_metric bulkwrite_proxy_linger_flushes_total) - flushes_before))
check "a request alone in the proxy does not linger: $flushes producer flushes for $requests requests" \
    test "$requests" -gt 0 -a "$flushes" -ge "$requests"
check "every shard holds exactly the rows sent, row by row" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 240 spread:100000

# The hot shard at 5 statements/s: 20,000 creates = 40 statements of 500 take about
# (40 - 6 stored or immediate permits) / 5 = 6.8 s; the bounds are generous.
start=$(date +%s.%N)
check "20,000 creates for a partner on the rate-limited shard are accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --protobuf feed:20000:$HOT
check "the rate-limited shard applies them all" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 240 spread:100000 feed:20000:$HOT
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
echo "# rate-limited shard: 40 statements at $HOT_RATE/s took ${elapsed}s"
check "the rate-limited shard took at least 5 s and at most 120 s (${elapsed}s)" \
    awk -v e="$elapsed" 'BEGIN {exit !(e >= 5 && e <= 120)}'

metric_sum() { bw_metric_sum "$1" "${2:-}" $C1 $C2; } # metric_sum NAME [SHARD]: over both consumers
batches_before=$(metric_sum bulkwrite_consumer_batches_applied_total $HOT)
check "JSON: a spam cleanup is accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" cleanup:20000:$HOT
# 2,000 increments in requests of 10 ops: 200 small messages on the 5 statements/s shard.
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
# 50 boards, 100,000 + 20,000 creates, 2,000 deletes, 2,000 updates
check "both consumers applied rows, together each row once ($rows1 + $rows2 = 124050)" \
    bash -c "[ $rows1 -gt 0 ] && [ $rows2 -gt 0 ] && [ $((rows1 + rows2)) -eq 124050 ]"

# A consumer in a brand-new group has no Kafka offsets: it must resume from the offsets
# stored in the shards, reading nothing again and applying nothing twice.
for pid in "${consumer_pids[@]}"; do kill "$pid"; wait "$pid" 2>/dev/null; done
cp "$CONF" "$WORK/fresh.conf" && "$BIN/bwctl" config-set "$WORK/fresh.conf" kafka.consumer_group="bw-e2e-$MODE-fresh" || exit 1
start_consumer $C1 "$WORK/fresh.conf"
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

# request_id: a client that resends a request (its connection broke before the reply)
# gets the same job, and the ops are applied once, increments included.
job_of() {
    curl -sf -H 'Content-Type: application/json' --data-binary \
        '{"request_id":"e2e-same","ops":[{"op":"delete","object_type":"pin","id":68719476736}]}' "$URL" |
        grep -o '"job_id":"[0-9a-f]*"'
}
job1=$(job_of) job2=$(job_of)
check "the same request_id twice gets the same job ($job1)" test -n "$job1" -a "$job1" = "$job2"
check "a request_id over 128 bytes gets 400 naming it" bash -c \
    "curl -s -H 'Content-Type: application/json' --data-binary '{\"request_id\":\"$(printf 'x%.0s' $(seq 1 129))\",\"ops\":[{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":1}]}' '$URL' | grep -q 'request_id is 129 bytes'"
for attempt in 1 2; do
    check "increments with request ids, sent in full (attempt $attempt)" \
        "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --per-request 10 --request-id e2e-likes like:1000:2
done
check "sent twice under the same request ids, the increments are applied once" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 60 spread:100000 feed:20000:$HOT cleanup:20000:$HOT \
    like:20000:$HOT feed:1000:2 like:1000:2
# 100 increments in 10 requests of 10 (one message each), plus the one-op request above:
# the proxy knows the parts it took under each request_id and does not produce them
# again (a resend to a proxy that does not know them yet is skipped by the shards:
# the fault test proxy-kill checks that path, the unit tests the apply transaction)
taken=$(curl -sf "http://127.0.0.1:$PROXY/metrics" | awk '$1 == "bulkwrite_proxy_parts_taken_before_total" {print $2}')
check "the proxy did not produce the resent messages again (${taken:-0} of 11)" test "${taken:-0}" = 11
check "so no copy reached the shards ($(fresh bulkwrite_consumer_messages_duplicate_total) duplicates)" \
    test "$(fresh bulkwrite_consumer_messages_duplicate_total)" = 0

# Data errors: 1,000 creates of pins that exist (feed:1000:2 made them), sent from a
# JSON-lines file by the CLI as one job of two parts of 500. Each op fails alone, is recorded with
# its reason on its job, and goes to the dead-letter topic; nothing else changes.
owner2=$(( (2 << 46) | 42 ))
for i in $(seq 1 1000); do
    printf '{"op":"create","object_type":"pin","id":%d,"shard_key":"%d","fields":{"owner_id":%d,"title":"again"}}\n' \
        $(( (2 << 46) | (1 << 36) | i )) $owner2 $owner2
done >"$WORK/dup.jsonl"
check "bwctl submit: 1,000 creates of existing pins are accepted as one job of 2 parts" \
    bash -c "'$BIN/bwctl' -c '$CONF' --url 'http://127.0.0.1:$PROXY' submit --batch 500 '$WORK/dup.jsonl' >'$WORK/dup.jobs' 2>'$WORK/dup.err' && [ \$(wc -l <'$WORK/dup.jobs') -eq 1 ] && grep -q ': 2 parts, 1000 ops sent, 1000 accepted' '$WORK/dup.err'"
dup_job=$(head -1 "$WORK/dup.jobs")
failed_rows() { test "$(fresh bulkwrite_consumer_rows_failed_total)" -eq 1000; }
check "the consumer counts 1,000 failed rows" wait_for 60 failed_rows
failures=$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e \
    "SELECT COUNT(*), COUNT(DISTINCT job_id), SUM(error_code = 1062), SUM(reason LIKE 'Duplicate entry%') FROM db00002.bw_job_failures")
check "the shard records each failed op with its error and reason ($failures)" \
    test "$(echo $failures)" = "1000 2 1000 1000"
"$BIN/bw-workload" -c "$CONF" dead-letters --brokers "$BROKERS" >"$WORK/dead-letters.jsonl" 2>"$WORK/dead-letters.log"
dl=$(grep -c '"error_code":1062' "$WORK/dead-letters.jsonl")
check "every failed op is in the dead-letter topic with its op and reason ($dl of 1000)" \
    bash -c "[ $dl -eq 1000 ] && grep -q '\"op\":{\"fields\":{\"owner_id\"' '$WORK/dead-letters.jsonl'"
check "after the data errors the shards still hold exactly the expected rows" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 60 spread:100000 feed:20000:$HOT cleanup:20000:$HOT \
    like:20000:$HOT feed:1000:2 like:1000:2

# ---- job receipts -------------------------------------------------------------------------
job_json() { curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$1"; }
watch_failed() {
    "${BWCTL[@]}" watch --timeout 60 "$dup_job" 2>"$WORK/watch.err"
    local rc=$?
    cat "$WORK/watch.err"
    [ $rc -eq 1 ] && grep -q '1000 submitted, 0 applied, 1000 failed' "$WORK/watch.err"
}
check "bwctl watch ends with exit 1 and the failure counts for a job whose ops all failed" watch_failed
job_counts() { job_json "$1" | jq -c '[.submitted, .applied, .failed, .pending, .finished, (.shards | map(.shard)), (.failures | length), (.failures[0].reason | test("^Duplicate entry"))]'; }
counts=$(job_counts "$dup_job")
check "GET /v1/jobs: 1000 submitted, 0 applied, 1000 failed, 0 pending, finished, shard 2, 20 sampled reasons ($counts)" \
    test "$counts" = '[1000,0,1000,0,true,[2],20,true]'
like_job=$(curl -sf -H 'Content-Type: application/json' --data-binary \
    '{"ops":[{"op":"update","object_type":"pin","id":'$(( (2 << 46) | (1 << 36) | 999999 ))',"fields":{"board_id":9}},{"op":"delete","object_type":"pin","id":'$(( (3 << 46) | (1 << 36) | 999999 ))'},{"op":"delete","object_type":"nope","id":1}]}' \
    "$URL" | jq -r .job_id)
# (an update and a delete of pins that do not exist: no-ops that count as applied)
check "a job over two shards with one invalid op finishes: 2 applied, 1 rejected" \
    "${BWCTL[@]}" watch --timeout 60 "$like_job"
breakdown=$(job_json "$like_job" | jq -c '[.submitted, .applied, .rejected, (.shards | map([.shard, .submitted, .applied]))]')
check "its status has a per-shard breakdown ($breakdown)" test "$breakdown" = '[2,2,1,[[2,1,1],[3,1,1]]]'
protobuf_status() {
    [ "$(curl -s -o "$WORK/job.pb" -w '%{content_type}' -H 'Accept: application/x-protobuf' \
        "http://127.0.0.1:$PROXY/v1/jobs/$dup_job")" = application/x-protobuf ] && grep -q "$dup_job" "$WORK/job.pb"
}
check "GET /v1/jobs answers protobuf (JobStatus) on request" protobuf_status
check "an unknown job gets 404" test "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PROXY/v1/jobs/0123456789abcdef0123456789abcdef)" = 404
check "a malformed job id gets 400" test "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PROXY/v1/jobs/xyz)" = 400

# After a consumer restart and a proxy restart the answer is the same (Kafka and the
# shards hold it, not the processes).
kill "$LAST_PID"; wait "$LAST_PID" 2>/dev/null
start_consumer $C1 "$WORK/fresh.conf"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null
"$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >>"$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
pids+=($PROXY_PID)
wait_for 60 curl -sf "http://127.0.0.1:$PROXY/healthz"
check "a restarted consumer rejoins" wait_for 60 curl -sf "http://127.0.0.1:$C1/readyz"
check "after restarting the consumer and the proxy the job's counts are unchanged" \
    test "$(job_counts "$dup_job")" = "$counts"

# ---- runtime control -------------------------------------------------------------------------
metric_of() { bw_metric $C1 "$1{shard=\"$2\"}"; }
metric_is() { [ "$(metric_of "$1" "$2")" = "$3" ]; }
check "bwctl set-rate: shard 3 to 2.5 statements/s" "${BWCTL[@]}" set-rate 3 2.5 --reason "e2e"
check "the running consumer (another process) applies it within 5 s" \
    wait_for 5 metric_is bulkwrite_consumer_rate_batches_per_second 3 2.5
check "bwctl pause: shard 4" "${BWCTL[@]}" pause 4 --reason "e2e drain test"
check "the consumer pauses shard 4 within 5 s" wait_for 5 metric_is bulkwrite_consumer_paused 4 1
shard4_reasons() { curl -sf "http://127.0.0.1:$PROXY/v1/shards" | jq -e '.shards[4].consumer.reasons | index("paused") != null' >/dev/null; }
check "GET /v1/shards names \"paused\" among shard 4's reasons (its consumer's status record)" wait_for 10 shard4_reasons
rows4() { mariadb -h127.0.0.1 -P$DB_B -uroot -N -e "SELECT COUNT(*) FROM db00004.pins"; }
before4=$(rows4)
check "500 creates for paused shard 4 are accepted" "$BIN/bw-workload" -c "$CONF" submit --url "$URL" feed:500:4
sleep 3
check "nothing is applied to the paused shard ($before4 rows before, $(rows4) after 3 s)" test "$(rows4)" = "$before4"
check "bwctl set-rate --rows: shard 3 to 5000 rows/s, its statement rate stays" \
    "${BWCTL[@]}" set-rate 3 --rows 5000 --reason "e2e rows"
shard3_budgets() { curl -sf "http://127.0.0.1:$PROXY/v1/shards" |
    jq -e '.shards[3] | .operator_rate == 2.5 and .operator_row_rate == 5000 and .effective_row_rate == 5000 and .configured_row_rate == 0'; }
check "GET /v1/shards shows both of shard 3's budgets" shard3_budgets
# columns: shard, database, server, conf stmt/s, stmt/s, conf rows/s, rows/s, paused, unhealthy, lag
shards_table() { "${BWCTL[@]}" shards >"$WORK/shards.txt" && cat "$WORK/shards.txt" &&
    awk 'NF == 0 {servers = 1; next} servers {v += ($1 == "mysql-a" || $1 == "mysql-b") && $2 == "-"; next}
        {n++} $1 == 4 && $8 == "yes" && $10 > 0 {p = 1} $1 == 3 && $5 == 2.5 && $6 == "-" && $7 == 5000 {r = 1}
        END {exit !(p && r && n == 9 && v == 2)}' "$WORK/shards.txt"; }
check "bwctl shards: 8 shards; 4 paused with lag, 3 at 2.5 statements/s and 5000 rows/s; then both servers, no budget" \
    wait_for 10 shards_table
check "bwctl shards: REASONS (column 12) names paused for shard 4" \
    awk '$1 == 4 && $12 ~ /(^|,)paused(,|$)/ {ok = 1} END {exit !ok}' "$WORK/shards.txt"
kill "$LAST_PID"; wait "$LAST_PID" 2>/dev/null
start_consumer $C1 "$WORK/fresh.conf"
check "after a consumer restart shard 4 is still paused" wait_for 60 metric_is bulkwrite_consumer_paused 4 1
check "and shard 3 still at 2.5 statements/s" metric_is bulkwrite_consumer_rate_batches_per_second 3 2.5
check "bwctl resume: shard 4" "${BWCTL[@]}" resume 4
check "the resumed shard applies its backlog, row by row" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 60 spread:100000 feed:20000:$HOT cleanup:20000:$HOT \
    like:20000:$HOT feed:1000:2 like:1000:2 feed:500:4
check "bwctl set-rate 3 default --rows default: back to the configured budgets" \
    "${BWCTL[@]}" set-rate 3 default --rows default
check "the consumer goes back to the configured rate (0 = unlimited)" \
    wait_for 5 metric_is bulkwrite_consumer_rate_batches_per_second 3 0
refused() { # refused CODE MESSAGE BWCTL-ARGS...: exit CODE and the message on stderr
    local code=$1 msg=$2; shift 2
    "${BWCTL[@]}" "$@" 2>"$WORK/refused.err"
    local rc=$?
    cat "$WORK/refused.err"
    [ $rc -eq "$code" ] && grep -qF "$msg" "$WORK/refused.err"
}
# bwctl refuses a rate out of bounds itself (exit 2), before sending; the proxy answers 400
check "a rate over 1,000,000 is refused with the reason" refused 2 "rate 2e+06 is out of range" set-rate 3 2000000
check "a rate below the minimum (1e-13) is refused with the bounds" \
    refused 2 "rate 1e-13 is out of range: use 0 (unlimited) or 0.001 to 1e6 statements per second" set-rate 3 1e-13
check "a row rate below the minimum is refused with the bounds" \
    refused 2 "row_rate 0.5 is out of range: use 0 (no row budget) or 1 to 1e6 rows per second" set-rate 3 --rows 0.5
shard3_rate() { curl -sf "http://127.0.0.1:$PROXY/v1/shards" |
    jq -e '.shards[3] | .operator_rate == null and .effective_rate == 0 and .operator_row_rate == null and .effective_row_rate == 0'; }
check "and shard 3's rate is unchanged in GET /v1/shards (the configured 0 = unlimited)" shard3_rate
check "a shard out of range is refused with the reason" refused 1 "shard 99 is out of range: shards.count is 8" pause 99
api_refuses() { # api_refuses RATE MESSAGE: 400 with the message
    curl -s -w '\n%{http_code}' -H 'Content-Type: application/json' --data-binary "{\"rate\": $1}" \
        "http://127.0.0.1:$PROXY/v1/shards/3/rate" >"$WORK/api.out"
    cat "$WORK/api.out"
    [ "$(tail -1 "$WORK/api.out")" = 400 ] && grep -qF "$2" "$WORK/api.out"
}
check "a negative rate is refused by the API with the reason" api_refuses -5 "rate -5 is out of range"
check "a rate below the minimum is refused by the API (400) with the bounds" \
    api_refuses 1e-13 "rate 1e-13 is out of range: use 0 (unlimited) or 0.001 to 1e6"
check "a row rate beside a good rate is refused by the API (400), naming row_rate" \
    api_refuses '1, "row_rate": 0.5' "row_rate 0.5 is out of range: use 0 (no row budget) or 1 to 1e6"
check "the API's refusals left shard 3's rate unchanged" shard3_rate
usage_codes() {
    "${BWCTL[@]}" set-rate 3 >/dev/null 2>&1
    [ $? -eq 2 ] && "${BWCTL[@]}" watch --help >/dev/null && "${BWCTL[@]}" submit --help | grep -q jsonl &&
        "${BWCTL[@]}" --help | grep -q set-rate
}
check "bad usage exits 2, --help exits 0" usage_codes

# Per-server control: every shard of mysql-b (4 to 7) paused in one call, then resumed.
all_paused() { for s in "$@"; do metric_is bulkwrite_consumer_paused "$s" 1 || return 1; done; }
none_paused() { for s in "$@"; do metric_is bulkwrite_consumer_paused "$s" 0 || return 1; done; }
rates_are() { local r=$1; shift; for s in "$@"; do metric_is bulkwrite_consumer_rate_batches_per_second "$s" "$r" || return 1; done; }
check "bwctl pause --server mysql-b" "${BWCTL[@]}" pause --server mysql-b --reason "kernel upgrade"
check "the consumer pauses shards 4 to 7 within 5 s, and no shard of mysql-a" \
    wait_for 5 eval 'all_paused 4 5 6 7 && none_paused 0 1 2 3'
server_records() { curl -sf "http://127.0.0.1:$PROXY/v1/shards" | jq -e '
    ([.shards[] | select(.shard >= 4) | .paused and .reason == "server mysql-b: kernel upgrade"] | all) and
    ([.shards[] | select(.shard < 4) | .paused] | any | not)'; }
check "GET /v1/shards: shards 4 to 7 paused, each naming the server and the reason" server_records
rows6() { mariadb -h127.0.0.1 -P$DB_B -uroot -N -e "SELECT COUNT(*) FROM db00006.pins"; }
rows1() { mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT COUNT(*) FROM db00001.pins"; }
before6=$(rows6) before1=$(rows1)
check "creates for shard 6 (mysql-b) and shard 1 (mysql-a) are accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" feed:300:6 feed:300:1
check "shard 1 (mysql-a) applies its 300 creates meanwhile" wait_for 60 eval '[ "$(rows1)" = $((before1 + 300)) ]'
check "nothing is applied to shard 6 ($before6 rows before, $(rows6) now)" test "$(rows6)" = "$before6"
server_history() { "${BWCTL[@]}" shards --history | tee "$WORK/history.txt" | grep -E '^6 .*pause .*server mysql-b: kernel upgrade'; }
check "bwctl shards --history: shard 6's pause by the server-wide change" server_history
check "an unknown server is refused, naming the servers there are" \
    refused 1 'no server "mysql-c" in shards.servers (mysql-a, mysql-b)' pause --server mysql-c
check "bwctl set-rate --server mysql-a 40" "${BWCTL[@]}" set-rate --server mysql-a 40 --reason "e2e"
check "shards 0 to 3 run at 40 statements/s within 5 s" \
    wait_for 5 rates_are 40 0 1 2 3
check "bwctl resume --server mysql-b" "${BWCTL[@]}" resume --server mysql-b
check "bwctl set-rate --server mysql-a default: back to the configured rate" \
    "${BWCTL[@]}" set-rate --server mysql-a default
check "the resumed server applies its backlog; every shard row by row" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 60 spread:100000 feed:20000:$HOT cleanup:20000:$HOT \
    like:20000:$HOT feed:1000:2 like:1000:2 feed:500:4 feed:300:6 feed:300:1
check "no shard is paused, and shards 0 to 3 are back at the configured rate (0 = unlimited)" \
    wait_for 5 eval 'none_paused 0 1 2 3 4 5 6 7 && rates_are 0 0 1 2 3'

# SIGHUP: the running consumer takes the file's new rates; a key that needs a restart keeps
# its running value, named in the log, while the rest of the file is applied.
"$BIN/bwctl" config-set "$WORK/fresh.conf" shards.default_rate=7 || exit 1
kill -HUP "$LAST_PID"
check "SIGHUP: the consumer takes the new default rate from its file" \
    wait_for 5 metric_is bulkwrite_consumer_rate_batches_per_second 0 7
check "... and its log names the key it applied" grep -q "SIGHUP: reloaded .*applied .*shards.default_rate" "$WORK/consumer-$C1.log"
"$BIN/bwctl" config-set "$WORK/fresh.conf" shards.default_rate=0 consumer.workers=5 || exit 1
kill -HUP "$LAST_PID"
check "SIGHUP with a restart-only change beside a rate: the log names the key it keeps until a restart" \
    wait_for 5 grep -q "applied shards.default_rate; NOT applied, needs a restart (the running value stays until then): consumer.workers" \
    "$WORK/consumer-$C1.log"
check "... and the rate beside it is applied: back to unlimited" wait_for 5 metric_is bulkwrite_consumer_rate_batches_per_second 0 0
"$BIN/bwctl" config-set "$WORK/fresh.conf" consumer.workers=4 || exit 1
kill -HUP "$LAST_PID"
check "SIGHUP again with the running value: nothing to apply, nothing kept" \
    wait_for 5 grep -q "SIGHUP: reloaded $WORK/fresh.conf: nothing to apply$" "$WORK/consumer-$C1.log"

# CSV through the CLI: 300 boards, typed by the configuration's column types.
{ echo 'op,object_type,shard_key,partner,name,score,archived'
  for i in $(seq 1 300); do echo "create,board,partner-$i,partner-$i,\"Board \"\"$i\"\", spring\",$i.5,$([ $((i % 2)) = 0 ] && echo true || echo false)"; done
} >"$WORK/boards.csv"
submit_csv() { "${BWCTL[@]}" submit --batch 100 "$WORK/boards.csv" >"$WORK/boards.jobs"; }
check "bwctl submit: 300 boards from CSV are accepted" submit_csv
boards_job=$(tail -1 "$WORK/boards.jobs")
check "bwctl watch: the CSV job finishes with nothing failed" "${BWCTL[@]}" watch --timeout 60 "$boards_job"
boards() { local n=0; for port in $DB_A $DB_B; do for db in $(mariadb -h127.0.0.1 -P$port -uroot -N -e "SHOW DATABASES LIKE 'db0%'"); do
    n=$((n + $(mariadb -h127.0.0.1 -P$port -uroot -N -e "SELECT COUNT(*) FROM $db.boards WHERE name LIKE 'Board \"%'"))); done; done; echo $n; }
board_row() { for port in $DB_A $DB_B; do for db in $(mariadb -h127.0.0.1 -P$port -uroot -N -e "SHOW DATABASES LIKE 'db0%'"); do
    mariadb -h127.0.0.1 -P$port -uroot -N -e "SELECT partner, name, score, archived FROM $db.boards WHERE partner = 'partner-42'"; done; done; }
boards_ok() { [ "$(boards)" -eq 300 ] && [ "$(board_row | tr '\t' '|')" = 'partner-42|Board "42", spring|42.5|1' ]; }
check "the shards hold 300 boards, quotes and types intact ($(board_row | tr '\t' '|'))" boards_ok

# A cell that is not UTF-8 (a Latin-1 export) is refused by name; jansson would refuse
# the text and the op used to go without that field. So is a cell not of its column's
# type. The other line goes through.
latin1_csv() {
    printf 'op,object_type,shard_key,partner,name,score\ncreate,board,latin1-ok,latin1-ok,caf\xc3\xa9,1.5\ncreate,board,latin1-bad,latin1-bad,caf\xe9,2\ncreate,board,typed-bad,typed-bad,x,high\n' \
        >"$WORK/latin1.csv"
    if "${BWCTL[@]}" submit "$WORK/latin1.csv" >"$WORK/latin1.out" 2>&1; then cat "$WORK/latin1.out"; return 1; fi
    cat "$WORK/latin1.out"
    grep -q 'line 3: column name: not UTF-8 text' "$WORK/latin1.out" &&
        grep -q 'line 4: column score: "high" is not of its type (double)' "$WORK/latin1.out" &&
        grep -q '^submit: job [0-9a-f]* ("bwctl-[0-9a-f]*"): 1 parts, 1 ops sent, 1 accepted, 0 rejected, 2 unreadable lines' "$WORK/latin1.out"
}
check "bwctl submit: a cell that is not UTF-8, or not of its column's type, is refused, naming its line and column; the rest is accepted" latin1_csv

status_of() { curl -s -o /dev/null -w '%{http_code}' -H "Content-Type: $1" --data-binary "$2" "$URL"; }
check "malformed JSON gets 400" test "$(status_of application/json '{"ops": [')" = 400
check "a wrong content type gets 415" test "$(status_of text/plain 'hello')" = 415
check "an invalid op is rejected alone with its reason" bash -c \
    "curl -sf -H 'Content-Type: application/json' --data-binary '{\"ops\":[{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":68719476736},{\"op\":\"delete\",\"object_type\":\"nope\",\"id\":1}]}' '$URL' | grep -q '\"index\":1,\"reason\":\"unknown object_type'"
# A value JSON can write but protobuf could not carry there (a negative or 2^63 id, a
# number past 64 bits, a wrong-typed increment) rejects its op alone, as protobuf does;
# the good op beside them is accepted and lands.
json_pin=$(( (1 << 36) | 900101 ))
json_faults() {
    local code
    code=$(curl -s -o "$WORK/faults.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary         "{\"request_id\":\"e2e-json-faults\",\"ops\":[{\"op\":\"create\",\"object_type\":\"pin\",\"id\":$json_pin,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"json faults\"}},
          {\"op\":\"delete\",\"object_type\":\"pin\",\"id\":-1},
          {\"op\":\"delete\",\"object_type\":\"pin\",\"id\":9223372036854775808},
          {\"op\":\"update\",\"object_type\":\"pin\",\"id\":$json_pin,\"fields\":{\"like_count\":{\"increment\":\"1\"}}},
          {\"op\":\"update\",\"object_type\":\"pin\",\"id\":$json_pin,\"fields\":{\"like_count\":9223372036854775808}}]}" "$URL")
    cat "$WORK/faults.json"
    [ "$code" = 202 ] && jq -e '.accepted == 1 and ([.rejected[].index] == [1, 2, 3, 4]) and
        (.rejected[0].reason == "id -1 is not an unsigned 64-bit integer") and
        (.rejected[1].reason == "id 9223372036854775808: the two top bits must be zero") and
        (.rejected[2].reason | startswith("field \"like_count\": column type is int")) and
        (.rejected[3].reason == "field \"like_count\": 9223372036854775808 is out of the signed 64-bit range")' \
        "$WORK/faults.json" >/dev/null
}
check "JSON: bad ids and numbers beside a good op get 202, each rejected alone with its reason" json_faults
json_fault_row() {
    test "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT title FROM db00000.pins WHERE id = $json_pin")" = 'json faults'
}
check "... and the good op's pin is in place" wait_for 60 json_fault_row
# like_count has increment_null_as_zero: increments of the pin's NULL count start from 0
# (SQL's NULL + 3 stays NULL, and the README's own increment did nothing).
null_inc() {
    curl -sf -o "$WORK/nullinc.json" -H 'Content-Type: application/json' --data-binary \
        "{\"request_id\":\"e2e-null-increment\",\"ops\":[{\"op\":\"update\",\"object_type\":\"pin\",\"id\":$json_pin,\"fields\":{\"like_count\":{\"increment\":3}}},
          {\"op\":\"update\",\"object_type\":\"pin\",\"id\":$json_pin,\"fields\":{\"like_count\":{\"increment\":4}}}]}" "$URL" &&
        grep -q '"accepted":2' "$WORK/nullinc.json"
}
check "two increments of a NULL like_count are accepted" null_inc
null_inc_row() {
    test "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT like_count FROM db00000.pins WHERE id = $json_pin")" = 7
}
check "... and the count is 7, not NULL (increment_null_as_zero)" wait_for 60 null_inc_row
# bwctl submit is resumable: the file is one job, each request a numbered part of it, so
# a submit killed half-way and run again sends only what the proxy lacks and applies every
# op once. 2,000 increments of 20 pins (100 each) from a file; the first run reads 1,005
# lines through a pipe that then stalls, is killed -9 once its 100 parts are in (5 lines
# never sent), and the same command over the whole file runs to the end. The consumer
# sums each transaction's increments of a pin (coalesce_increments), and the sums still
# come out exact.
resume_pin() { echo $(( (1 << 36) | (7000000 + $1) )); }
counter_files "$WORK/resume-pins.jsonl" "$WORK/resume-incs.jsonl" 7000000 20 2000
resume_pins() { "${BWCTL[@]}" submit "$WORK/resume-pins.jsonl" >/dev/null; }
check "bwctl submit: 20 pins to count on are accepted" resume_pins
resume_first_run() {
    rm -f "$WORK/resume.fifo" && mkfifo "$WORK/resume.fifo"
    "${BWCTL[@]}" submit --batch 10 - <"$WORK/resume.fifo" >"$WORK/resume-1.jobs" 2>"$WORK/resume-1.err" &
    local pid=$!
    exec 7>"$WORK/resume.fifo" # held open: bwctl sees no end of its input until it is killed
    head -n 1005 "$WORK/resume-incs.jsonl" >&7
    wait_for 60 test -s "$WORK/resume-1.jobs"
    wait_for 120 sh -c "curl -sf 'http://127.0.0.1:$PROXY/v1/jobs/$(head -n 1 "$WORK/resume-1.jobs")' | jq -e '.parts == 100' >/dev/null"
    local sent=$?
    kill -9 "$pid"
    wait "$pid" 2>/dev/null
    exec 7>&-
    [ "$sent" = 0 ] && [ "$(wc -l <"$WORK/resume-1.jobs")" -eq 1 ]
}
check "bwctl submit killed -9 after 100 of its 200 parts" resume_first_run
resume_second_run() { "${BWCTL[@]}" submit --batch 10 - <"$WORK/resume-incs.jsonl" >"$WORK/resume-2.jobs" 2>"$WORK/resume-2.err"; }
check "... the same command again runs to the end (exit 0)" resume_second_run
check "... it is the same job, and it sent only the 100 parts the proxy lacked" \
    sh -c "[ \"\$(cat '$WORK/resume-2.jobs')\" = \"\$(cat '$WORK/resume-1.jobs')\" ] && grep -q ': 200 parts, 1010 ops sent, 2000 accepted, .* 99 parts held before' '$WORK/resume-2.err'"
check "... and the job finishes" "${BWCTL[@]}" watch --timeout 120 "$(cat "$WORK/resume-2.jobs")"
resume_counts() {
    local ids="" k
    for k in $(seq 0 19); do ids="$ids${ids:+,}$(resume_pin $k)"; done
    mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT COUNT(*), SUM(like_count = 100) FROM db00000.pins WHERE id IN ($ids)" |
        tr '\t' ' ' | tee "$WORK/resume-counts.txt" | grep -qx '20 20'
}
check "... every pin counts exactly 100: no increment applied twice, none lost" wait_for 60 resume_counts
check "... and the consumer summed increments of one pin ($(fresh bulkwrite_consumer_increments_coalesced_total) ops)" \
    test "$(fresh bulkwrite_consumer_increments_coalesced_total)" -gt 0
# Hostile input (issue 11): a NUL cannot cut a request_id short; a body of empty ops is
# refused while it is decoded, before the ops' structs exist; idle sockets from one
# address cannot take the proxy's connections.
nul_json() {
    local a b
    a=$(curl -s -o "$WORK/nul1.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary \
        '{"request_id":"nightly\u0000-monday","ops":[{"op":"delete","object_type":"pin","id":68719476736}]}' "$URL")
    b=$(curl -s -o "$WORK/nul2.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary \
        '{"request_id":"nightly\u0000-tuesday","ops":[{"op":"delete","object_type":"pin","id":68719476737}]}' "$URL")
    cat "$WORK/nul1.json"
    [ "$a" = 400 ] && [ "$b" = 400 ] && grep -q 'request_id contains a control character (NUL) at byte 7' "$WORK/nul1.json"
}
check "JSON: a request_id with a NUL is refused (400), never a silent duplicate" nul_json
nul_protobuf() {
    # field 1 (request_id) = "ab\0cd", field 2 = one empty op
    printf '\x0a\x05ab\x00cd\x12\x00' >"$WORK/nul.pb"
    local code
    code=$(curl -s -o "$WORK/nul.out" -w '%{http_code}' -H 'Content-Type: application/x-protobuf' \
        --data-binary @"$WORK/nul.pb" "$URL")
    [ "$code" = 400 ] && grep -q 'request_id contains a control character (NUL) at byte 2' "$WORK/nul.out"
}
check "protobuf: a request_id with a NUL is refused (400)" nul_protobuf
hwm_kb() { awk '$1 == "VmHWM:" {print $2}' "/proc/$PROXY_PID/status"; }
empty_ops() { # empty_ops FORMAT FILE: 16 MiB of empty ops -> 413 naming proxy.max_ops
    local code
    code=$(curl -s -o "$WORK/empty.out" -w '%{http_code}' -H "Content-Type: application/$1" --data-binary @"$2" "$URL")
    cat "$WORK/empty.out"
    [ "$code" = 413 ] && grep -q 'proxy.max_ops is' "$WORK/empty.out"
}
perl -e 'print "\x12\x00" x 8388608' >"$WORK/empty.pb"                   # 8,388,608 empty ops, 16 MiB
perl -e 'print "{\"ops\":[" . "{}," x 5592400 . "{}]}"' >"$WORK/empty.json" # 5,592,401 of them, 16 MiB
hwm0=$(hwm_kb)
check "protobuf: 16 MiB of empty ops is refused (413) before they are unpacked" empty_ops x-protobuf "$WORK/empty.pb"
check "JSON: 16 MiB of empty ops is refused (413) while it is parsed" empty_ops json "$WORK/empty.json"
hwm1=$(hwm_kb)
# the bound (docs/security.md): the body (16 MiB, read into a buffer grown by doubling) and
# the structs of at most proxy.max_ops ops: 27 MiB measured, 85 MiB under AddressSanitizer
# (freed blocks wait in its quarantine), 136 MiB under ThreadSanitizer (its shadow memory);
# before, 1.1 GB (protobuf) and 1.8 GB (JSON)
check "the proxy's peak memory grew by less than 256 MiB ($(((hwm1 - hwm0) / 1024)) MiB)" test $((hwm1 - hwm0)) -lt 262144
rm -f "$WORK/empty.pb" "$WORK/empty.json"
slowloris() {
    # 129 half-sent requests from 127.0.0.2 (proxy.max_connections_per_ip = 32), then a real
    # client from 127.0.0.1 while they are held
    "$BIN/bw-workload" -c "$CONF" hold 127.0.0.2 "127.0.0.1:$PROXY" 129 4 >"$WORK/hold.out" 2>"$WORK/hold.err" &
    local holder=$! code open
    sleep 1.5
    code=$(curl -s -m 10 -o "$WORK/real.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary \
        '{"ops":[{"op":"delete","object_type":"pin","id":68719476736}]}' "$URL")
    wait "$holder" || return 1
    cat "$WORK/hold.out"
    open=$(sed -n 's/.* \([0-9]*\) still open.*/\1/p' "$WORK/hold.out")
    [ "$code" = 202 ] && [ "$open" -ge 1 ] && [ "$open" -le 32 ]
}
check "129 idle sockets from one address: at most 32 stay open, and a real client is served (202)" slowloris

check "promtool accepts the proxy's metrics" bash -c "curl -sf http://127.0.0.1:$PROXY/metrics | promtool check metrics"
check "promtool accepts the consumer's metrics" bash -c "curl -sf http://127.0.0.1:$C1/metrics | promtool check metrics"

# A config whose shard count differs from the topic's partitions must not start.
cp "$CONF" "$WORK/four.conf" && "$BIN/bwctl" config-set "$WORK/four.conf" shards.count=4 'shards.servers[0].last_shard=1' \
    'shards.servers[1].first_shard=2' 'shards.servers[1].last_shard=3' 'shards.rate_overrides[0].shard=1' || exit 1
wrong_count() {
    ! "$BIN/bw-proxy" -c "$WORK/four.conf" -b "$BROKERS" -p 0 2>"$WORK/four.log" &&
        grep -q "has 8 partitions but shards.count is 4" "$WORK/four.log"
}
check "a topic whose partition count differs from shards.count stops startup" wrong_count

# Protected mode: without a clients file the API (shard control included) is served on
# loopback addresses only. The refused proxy stops before it binds anything.
cp "$CONF" "$WORK/open.conf" && "$BIN/bwctl" config-set "$WORK/open.conf" proxy.listen_address=0.0.0.0 || exit 1
cp "$WORK/open.conf" "$WORK/open-allowed.conf" && "$BIN/bwctl" config-set "$WORK/open-allowed.conf" proxy.auth.allow_open=true || exit 1
open_refused() {
    ! timeout 20 "$BIN/bw-proxy" -c "$WORK/open.conf" -b "$BROKERS" -p 0 2>"$WORK/open.log" &&
        grep -q 'proxy.listen_address "0.0.0.0" is not a loopback address and proxy.auth.clients_file is not set' \
            "$WORK/open.log" && grep -q 'proxy.auth.allow_open = true' "$WORK/open.log" &&
        ! "$BIN/bwctl" check-config -c "$WORK/open.conf" >/dev/null 2>"$WORK/open-check.err" &&
        grep -q 'is not a loopback address' "$WORK/open-check.err" &&
        "$BIN/bwctl" check-config -c "$WORK/open-allowed.conf" >/dev/null 2>"$WORK/open-allowed.err" &&
        grep -q '^bwctl: warning: proxy.listen_address "0.0.0.0"' "$WORK/open-allowed.err"
}
check "without a clients file, a proxy on 0.0.0.0 refuses to start and check-config fails, naming proxy.auth.allow_open (which turns it into a warning)" open_refused

if [ "$MODE" = kafka ]; then
    # Durable by default: the default config wants 3 replicas and min.insync.replicas 2.
    # On this one broker the topics have 1, so a proxy with the defaults refuses to start,
    # naming the setting; kafka.allow_weak_durability starts it with a warning; a topic it
    # would create with 3 replicas on one broker is refused with the way out.
    cp "$CONF" "$WORK/durable.conf" && "$BIN/bwctl" config-set "$WORK/durable.conf" kafka.replication_factor=3 \
        kafka.min_insync_replicas=2 || exit 1
    cp "$WORK/durable.conf" "$WORK/weak.conf" && "$BIN/bwctl" config-set "$WORK/weak.conf" kafka.allow_weak_durability=true || exit 1
    cp "$WORK/durable.conf" "$WORK/rf3.conf" && "$BIN/bwctl" config-set "$WORK/rf3.conf" kafka.topic=bw-e2e-rf3 || exit 1
    weak_refused() {
        ! timeout 60 "$BIN/bw-proxy" -c "$WORK/durable.conf" -b "$BROKERS" -p 0 2>"$WORK/durable.log" &&
            grep -q "kafka topic bulkwrite.batches has 1 replica of its partitions (fewest) where kafka.replication_factor is 3" \
                "$WORK/durable.log" && grep -q 'kafka.allow_weak_durability = true to start anyway' "$WORK/durable.log"
    }
    check "a topic with fewer replicas than kafka.replication_factor stops startup, naming the setting" weak_refused
    weak_allowed() {
        "$BIN/bw-proxy" -c "$WORK/weak.conf" -b "$BROKERS" -p 0 --port-file "$WORK/weak.port" >"$WORK/weak.log" 2>&1 &
        local pid=$!
        wait_for 60 test -s "$WORK/weak.port"
        local up=$?
        kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
        [ $up = 0 ] && grep -q 'WARN  kafka kafka topic bulkwrite.batches has 1 replica.*(kafka.allow_weak_durability is true)' \
            "$WORK/weak.log"
    }
    check "... kafka.allow_weak_durability starts it with a warning" weak_allowed
    rf3_refused() {
        ! timeout 60 "$BIN/bw-proxy" -c "$WORK/rf3.conf" -b "$BROKERS" -p 0 2>"$WORK/rf3.log" &&
            grep -q 'creating topic bw-e2e-rf3: .*(kafka.replication_factor is 3: the cluster needs at least that many brokers' \
                "$WORK/rf3.log"
    }
    check "creating a topic with 3 replicas on one broker is refused with the way out" rf3_refused
fi

# A fatal producer error (librdkafka 2.0.2 can raise one on an idempotent producer after a
# broker disconnect), injected into producer 0 (shards 0, 8, …) of a second proxy, whose
# rebuild waits while $WORK/fatal-hold exists: /readyz fails, the ops for shard 0 get 503
# with Retry-After (the other shard's are accepted), and once the producer is rebuilt the
# same request again is 202 and each pin is in place once.
touch "$WORK/fatal-hold"
BW_TEST_PRODUCER_FATAL="$WORK/fatal-hold" "$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" -p 0 --port-file "$WORK/fatal.port" \
    >"$WORK/proxy-fatal.log" 2>&1 &
pids+=($!)
wait_for 60 test -s "$WORK/fatal.port" || { echo "the second proxy did not start"; tail "$WORK/proxy-fatal.log"; exit 1; }
FATAL=http://127.0.0.1:$(cat "$WORK/fatal.port")
pin0=$(( (1 << 36) | 900001 )) pin1=$(( (1 << 46) | (1 << 36) | 900001 )) owner1=$(( (1 << 46) | 42 ))
fatal_body=$(printf '{"request_id":"fatal-1","ops":[{"op":"create","object_type":"pin","id":%d,"shard_key":"42","fields":{"owner_id":42,"title":"fatal"}},{"op":"create","object_type":"pin","id":%d,"shard_key":"%d","fields":{"owner_id":%d,"title":"fatal"}}]}' \
    $pin0 $pin1 $owner1 $owner1)
readyz_is() { test "$(curl -s -o /dev/null -w '%{http_code}' "$FATAL/readyz")" = "$1"; }
fatal_unready() { wait_for 20 readyz_is 503 &&
    grep -q 'producer 0: fatal error .*injected by BW_TEST_PRODUCER_FATAL; its requests get 503' "$WORK/proxy-fatal.log"; }
check "a producer in a fatal state fails /readyz, and the log says which and why" fatal_unready
fatal_503() {
    local code
    code=$(curl -s -D "$WORK/fatal.headers" -o "$WORK/fatal.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "$fatal_body" "$FATAL/v1/batches")
    cat "$WORK/fatal.json"
    [ "$code" = 503 ] && grep -qi '^Retry-After: 1' "$WORK/fatal.headers" && grep -q '"accepted":1' "$WORK/fatal.json" &&
        grep -q '"index":0,"reason":"not accepted: Kafka did not acknowledge it (Broker: Broker received an out of order sequence number)' "$WORK/fatal.json" &&
        ! grep -q '"index":1' "$WORK/fatal.json"
}
check "meanwhile the ops for its shards get 503 with Retry-After, the others are accepted" fatal_503
rm -f "$WORK/fatal-hold"
rebuilt() { readyz_is 200 && grep -q 'producer 0 rebuilt after its fatal error' "$WORK/proxy-fatal.log" &&
    curl -sf "$FATAL/metrics" | grep -q '^bulkwrite_proxy_producers_rebuilt_total 1$'; }
check "the producer is rebuilt by itself: /readyz is 200 again, counted in bulkwrite_proxy_producers_rebuilt_total" \
    wait_for 30 rebuilt
fatal_resent() {
    local code
    code=$(curl -s -o "$WORK/fatal2.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "$fatal_body" "$FATAL/v1/batches")
    cat "$WORK/fatal2.json"
    [ "$code" = 202 ] && grep -q '"accepted":2' "$WORK/fatal2.json"
}
check "the same request again is 202" fatal_resent
fatal_rows() {
    test "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT (SELECT COUNT(*) FROM db00000.pins WHERE id = $pin0 AND title = 'fatal') + (SELECT COUNT(*) FROM db00001.pins WHERE id = $pin1 AND title = 'fatal')")" = 2
}
check "each of its pins is in place, once" wait_for 60 fatal_rows

# README's and api.md's request examples, as written, get the replies the docs show
. test/tiers/doc-examples.sh
doc_examples

# one job across many requests, resumed after a kill; a job cancelled half-way
. test/tiers/jobs.sh
jobs_tests

# the log: a named job's id as its client holds it, librdkafka's lines in our format,
# journald's priorities, log_format=json
. test/tiers/logs.sh
logs_tests

# bulkwrite.v1.BulkwriteService over the Connect protocol, from curl and protoc
. test/tiers/connect.sh
connect_tests

# what the page reads besides GET /v1/shards: the fleet, the latest jobs, the caller
fleet_seen() {
    curl -sf "http://127.0.0.1:$PROXY/v1/fleet" | tee "$WORK/fleet.json" |
        jq -e '.shards == 8 and ([.members[] | select(.alive and .role == "proxy")] | length) >= 1
            and ([.members[] | select(.alive and .role == "consumer")] | length) >= 1
            and ([.kafka.topics[] | select(.name == "bulkwrite.batches")][0] | .partitions == 8 and .offline == 0)
            and (.servers | map(.name)) == ["mysql-a", "mysql-b"]' >/dev/null
}
check "GET /v1/fleet: the proxies and consumers alive, the batches topic (8 partitions, none offline), the servers" fleet_seen
build_seen() { # the build --version names, on both daemons' /metrics, with their process_* numbers
    local v c
    read -r _ v _ c <<<"$("$BIN/bw-proxy" --version)"
    c=${c%)}
    [ "$v" = "$(cat VERSION)" ] && [ -n "$c" ] &&
        [ "$(bw_metric $PROXY "bulkwrite_build_info{version=\"$v\",commit=\"$c\"}")" = 1 ] &&
        [ "$(bw_metric $C1 "bulkwrite_build_info{version=\"$v\",commit=\"$c\"}")" = 1 ] &&
        [ "$(bw_metric $C1 process_resident_memory_bytes)" -gt 1000000 ] && [ "$(bw_metric $PROXY process_open_fds)" -gt 3 ]
}
check "bw-proxy --version names VERSION and the commit; both daemons export it as bulkwrite_build_info, and process_*" build_seen
recent_jobs() {
    curl -sf "http://127.0.0.1:$PROXY/v1/jobs?limit=5" | tee "$WORK/recent.json" |
        jq -e '(.jobs | length) == 5 and .jobs[0].created_at_ms >= .jobs[4].created_at_ms' >/dev/null &&
        jq -e '[.jobs[] | select(.job == "dep-d")] | length == 1' <(curl -sf "http://127.0.0.1:$PROXY/v1/jobs?limit=256") >/dev/null
}
check "GET /v1/jobs: the latest jobs newest first, a named job once" recent_jobs
check "GET /v1/jobs?limit=0 is refused (400)" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' 'http://127.0.0.1:$PROXY/v1/jobs?limit=0') = 400 ]"
check "GET /v1/whoami without a clients file: (open), an admin" \
    sh -c "curl -sf 'http://127.0.0.1:$PROXY/v1/whoami' | jq -e '.client == \"(open)\" and .admin and .open' >/dev/null"
check "GET /ui/ serves the page" sh -c "curl -sf 'http://127.0.0.1:$PROXY/ui/' | grep -qi '<!doctype html>'"

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
