#!/usr/bin/env bash
# 4,096 shards: Pinterest's 4,096 logical shards (one Kafka partition each) on the real
# broker, two MariaDB servers holding 2,048 shard databases each.
#
#   test/tiers/shards-4096.sh kafka
#
# 0. While the schema is created, a proxy with no broker waits on the metadata until its
#    deadline (60 s) and exits with an error naming the topic and the reason.
# 1. Three times in a row a fresh broker (new data dir) and one start of the proxy (the
#    first time started before the broker): it creates its topics (the batches topic with
#    4,096 partitions) and becomes ready without an error and without a restart.
# 2. On the last of those brokers, two consumers in one group and no rate limits take
#    BW_FLEET_OPS (51,200) creates spread over every shard (a request Kafka did not
#    acknowledge in time, 503, is resent, as a client does): every row lands exactly
#    (row by row per shard, and counted per server against what the proxy accepted), and
#    once both consumers hold their share no consumer loses it: no session timeout, no
#    timed-out heartbeat, no revoked partitions. The elapsed time and the consumers'
#    memory are printed; only a generous bound (BW_FLEET_WAIT, 600 s) is asserted.
# 3. The page's poll: GET /v1/shards?view=summary gzip'd is under 200 KiB on the wire (the
#    bytes of it and of the full form, /v1/fleet, /v1/jobs and a shard's history are
#    printed), and a poll with its ETag answers 304 once nothing moved.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/shards-4096.sh kafka}
[ "$MODE" = kafka ] || { echo "usage: test/tiers/shards-4096.sh kafka (4,096 partitions need the real broker)" >&2; exit 2; }
. test/lib.sh
SHARDS=4096
OPS=${BW_FLEET_OPS:-51200}
WAIT=${BW_FLEET_WAIT:-600}
WORK=$(mktemp -d /tmp/bw-fleet.XXXXXX)
trap bw_stack_stop EXIT
CONF=$WORK/bulkwrite.conf
# The reference config with this tier's ports, 4,096 shards split evenly over the two
# servers, and no rate limit anywhere.
cp conf/bulkwrite.conf "$CONF"
"$BIN/bwctl" config-set "$CONF" "shards.servers[0].port=$DB_A" "shards.servers[1].port=$DB_B" proxy.port=$PROXY \
    shards.count=$SHARDS "shards.servers[0].last_shard=$((SHARDS / 2 - 1))" \
    "shards.servers[1].first_shard=$((SHARDS / 2))" "shards.servers[1].last_shard=$((SHARDS - 1))" \
    shards.default_rate=0.0 'shards.rate_overrides=( { shard = 7; rate = 0.0; } )' \
    kafka.consumer_group="bw-fleet-$MODE" kafka.replication_factor=1 kafka.min_insync_replicas=1 || exit 1
"$BIN/bwctl" -c "$CONF" check-config >/dev/null || exit 1

echo "# 4,096 shards ($MODE): $SHARDS shards; MariaDB on $DB_A and $DB_B"
scripts/mariadb.sh start "$WORK/mysql-a" $DB_A >/dev/null || exit 1
scripts/mariadb.sh start "$WORK/mysql-b" $DB_B >/dev/null || exit 1
BROKERS=127.0.0.1:$KAFKA
# Meanwhile a proxy with no broker at all: it waits on the metadata until its deadline, then
# says which topic and why.
"$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >"$WORK/proxy-0.log" 2>&1 &
lonely=$!
t0=$(date +%s.%N)
"$BIN/bwctl" -c "$CONF" schema --create-users --admin-user root >/dev/null || exit 1
echo "# schema: $SHARDS shard databases created in $(echo "$(date +%s.%N) - $t0" | bc | xargs printf %.1f) s"
wait $lonely
rc=$?
grep " ERROR " "$WORK/proxy-0.log"
check "with no broker the proxy waits out its deadline, then exits (rc $rc) naming the topic and the reason" \
    sh -c "test $rc -ne 0 && grep -q 'ERROR .*kafka metadata for topic bulkwrite.batches: [^)]*(still after 60 s; librdkafka.s log lines say why' '$WORK/proxy-0.log'"

# ---- 1. the proxy's first start on a fresh broker, three times ----------------------------
proxy_up() { # ready, or gone: stop waiting either way
    curl -sf "http://127.0.0.1:$PROXY/readyz" >/dev/null || ! kill -0 "$PROXY_PID" 2>/dev/null
}
# bulkwrite's errors and librdkafka's (levels 0-3), but for the broker not listening yet
errors_logged() { grep -E ' ERROR |^%[0-3]\|' "$1" | grep -vE 'Connection refused|brokers are down'; }
for run in 1 2 3; do
    # the last broker stays for the load (bw_stack_stop stops $WORK/kafka)
    kdir=$WORK/kafka-$run
    [ $run = 3 ] && kdir=$WORK/kafka
    # the first proxy starts before its broker does (a fleet's usual boot order): it waits
    [ $run = 1 ] || scripts/kafka.sh start "$kdir" $KAFKA >/dev/null || exit 1
    t0=$(date +%s.%N)
    "$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >"$WORK/proxy-$run.log" 2>&1 &
    PROXY_PID=$!
    pids+=($PROXY_PID)
    [ $run = 1 ] && { scripts/kafka.sh start "$kdir" $KAFKA >/dev/null || exit 1; }
    wait_for 180 proxy_up
    secs=$(echo "$(date +%s.%N) - $t0" | bc | xargs printf %.1f)
    echo "# run $run: proxy start on a fresh broker took $secs s$([ $run = 1 ] && echo ', the broker'"'"'s start included')"
    check "run $run: the proxy's first start on a fresh broker becomes ready" \
        sh -c "kill -0 $PROXY_PID && curl -sf http://127.0.0.1:$PROXY/readyz"
    check "run $run: no error logged on the way" sh -c "$(declare -f errors_logged); ! errors_logged '$WORK/proxy-$run.log'"
    # the batches topic has its 4,096 partitions: the last one answers its watermarks
    check "run $run: the batches topic has $SHARDS partitions (partition $((SHARDS - 1)) exists)" \
        sh -c "test \"\$('$BIN/bw-workload' -c '$CONF' offsets --brokers $BROKERS $((SHARDS - 1)))\" = '0 0'"
    if [ $run != 3 ]; then
        kill $PROXY_PID 2>/dev/null; wait $PROXY_PID 2>/dev/null
        scripts/kafka.sh stop "$kdir" >/dev/null
        rm -rf "$kdir/logs" # the partitions' data; kafka.log stays for a failed run
    fi
done
kill -0 $PROXY_PID 2>/dev/null || { echo "# no proxy for the load"; exit 1; }
ln -sf proxy-3.log "$WORK/proxy.log"

# ---- 2. load with two consumers -------------------------------------------------------
consumer_pids=()
for port in $C1 $C2; do
    start_consumer $port
    consumer_pids+=($LAST_PID)
done
# Both have their share once their latest assignments add up to every partition.
last_assigned() { grep -o 'assigned [0-9]* partitions' "$WORK/consumer-$1.log" | tail -1 | awk '{print $2}'; }
shares_settled() {
    curl -sf "http://127.0.0.1:$C1/readyz" >/dev/null && curl -sf "http://127.0.0.1:$C2/readyz" >/dev/null &&
        test $(($(last_assigned $C1) + $(last_assigned $C2))) = $SHARDS &&
        ! tail -1 "$WORK/consumer-$C1.log" | grep -q revoking && ! tail -1 "$WORK/consumer-$C2.log" | grep -q revoking
}
t0=$(date +%s.%N)
check "two consumers join the group and share the $SHARDS partitions" wait_for 180 shares_settled
echo "# consumers: shares $(last_assigned $C1) + $(last_assigned $C2) after" \
    "$(echo "$(date +%s.%N) - $t0" | bc | xargs printf %.1f) s"
# what the consumers log from here on is judged: the group must hold steady under load
sleep 2
mark1=$(wc -l <"$WORK/consumer-$C1.log") mark2=$(wc -l <"$WORK/consumer-$C2.log")

rss_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null; }
( while :; do
    for pid in "${consumer_pids[@]}"; do echo "$pid $(rss_kb $pid VmRSS)"; done; sleep 1
  done ) >"$WORK/rss.log" 2>/dev/null &
sampler=$!

t0=$(date +%s.%N)
# a 503 (Kafka did not acknowledge in proxy.produce_timeout_ms: 4,096 partitions on one
# loaded broker) is resent, as a client does; the same request ids apply once
"$BIN/bw-workload" -c "$CONF" submit --protobuf --url "http://127.0.0.1:$PROXY/v1/batches" --request-id fleet \
    --retry-for 300 spread:$OPS >"$WORK/submit.log" 2>&1
submit_rc=$?
submit_secs=$(echo "$(date +%s.%N) - $t0" | bc | xargs printf %.1f)
cat "$WORK/submit.log"
check "$OPS creates over every shard are accepted (in $submit_secs s)" \
    sh -c "test $submit_rc = 0 && grep -q '$OPS ops sent, $OPS accepted, 0 not accepted' '$WORK/submit.log'"
check "every row is in place within $WAIT s, row by row on every shard" \
    sh -c "'$BIN/bw-workload' -c '$CONF' verify --wait $WAIT spread:$OPS >'$WORK/verify.log' 2>&1"
secs=$(echo "$(date +%s.%N) - $t0" | bc | xargs printf %.1f)
kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
tail -1 "$WORK/verify.log"
echo "# load: $OPS ops over $SHARDS shards applied in $secs s (submit $submit_secs s)"

# spread:N puts op i on shard i mod SHARDS: count what each server should hold, and what it does
expected_rows() { # expected_rows FIRST LAST
    awk -v f="$1" -v l="$2" -v n="$OPS" -v s="$SHARDS" \
        'BEGIN { for (i = f; i <= l; i++) t += int(n / s) + (i < n % s); print t }'
}
server_rows() { # server_rows PORT FIRST LAST: every shard database's pins, counted in one session
    seq "$2" "$3" | awk '{printf "SELECT COUNT(*) FROM db%05d.pins;\n", $1}' |
        mariadb -h127.0.0.1 -P"$1" -uroot -N | awk '{n += $1} END {print n + 0}'
}
for srv in "a $DB_A 0 $((SHARDS / 2 - 1))" "b $DB_B $((SHARDS / 2)) $((SHARDS - 1))"; do
    set -- $srv
    want=$(expected_rows $3 $4) have=$(server_rows $2 $3 $4)
    echo "# mysql-$1 (shards $3-$4): $have rows, $want expected"
    check "mysql-$1 holds exactly the $want rows accepted for its shards" test "$have" = "$want"
done

for port in $C1 $C2; do
    mark=$mark1
    [ $port = $C2 ] && mark=$mark2
    tail -n +$((mark + 1)) "$WORK/consumer-$port.log" >"$WORK/consumer-$port.load.log"
    log=$WORK/consumer-$port.load.log
    echo "# consumer $port under load: $(grep -c 'session timed out' "$log") session timeouts," \
        "$(grep -c 'Timed out HeartbeatRequest' "$log") timed-out heartbeats," \
        "$(grep -c 'revoking [0-9]* partitions' "$log") revokes ($(grep -o 'revoking [0-9]* partitions' "$log" |
            awk '{n += $2} END {print n + 0}') partitions)"
    check "consumer $port kept its partitions under load (no session timeout, no heartbeat timeout, no revoke)" \
        sh -c "! grep -E 'session timed out|Timed out HeartbeatRequest|revoking' '$WORK/consumer-$port.load.log'"
done
for pid in "${consumer_pids[@]}"; do
    peak=$(awk -v p=$pid '$1 == p && $2 > m {m = $2} END {print m + 0}' "$WORK/rss.log")
    now=$(rss_kb $pid VmRSS) hwm=$(rss_kb $pid VmHWM)
    echo "# consumer pid $pid: RSS $((${now:-0} / 1024)) MiB now, peak sampled $((peak / 1024)) MiB," \
        "high-water $((${hwm:-0} / 1024)) MiB"
done

# ---- 3. the page's poll at 4,096 shards: bytes on the wire -------------------------------
# every shard reported by its consumer (status every 2 s); curl --compressed asks for gzip
# and counts what came over the wire (docs/performance.md's table has the numbers)
reported_all() { curl -sf "http://127.0.0.1:$PROXY/v1/shards?view=summary" |
    jq -e '[.shards[] | select(.consumer != null)] | length == '$SHARDS >/dev/null; }
check "every shard's consumer status reached the proxy" wait_for 30 reported_all
wire() { curl -s --compressed -o /dev/null -w '%{size_download}' "http://127.0.0.1:$PROXY$1"; }
plain() { curl -s -o /dev/null -w '%{size_download}' "http://127.0.0.1:$PROXY$1"; }
summary_gz=$(wire '/v1/shards?view=summary') full_gz=$(wire /v1/shards) summary_raw=$(plain '/v1/shards?view=summary')
full_raw=$(plain /v1/shards) fleet_gz=$(wire /v1/fleet) jobs_gz=$(wire /v1/jobs) history_gz=$(wire /v1/shards/7/history)
echo "# page poll at $SHARDS shards: /v1/shards?view=summary $summary_gz bytes gzip'd ($summary_raw plain)," \
    "/v1/shards $full_gz ($full_raw plain), /v1/fleet $fleet_gz, /v1/jobs $jobs_gz, /v1/shards/7/history $history_gz"
check "the page's poll (GET /v1/shards?view=summary, gzip) is under 200 KiB on the wire ($summary_gz bytes)" \
    test "$summary_gz" -lt 204800
etag=$(curl -s -D - -o /dev/null --compressed "http://127.0.0.1:$PROXY/v1/shards?view=summary" | awk 'tolower($1) == "etag:" {print $2}' | tr -d '\r')
unchanged() { [ "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "http://127.0.0.1:$PROXY/v1/shards?view=summary")" = 304 ] ||
    { etag=$(curl -s -D - -o /dev/null --compressed "http://127.0.0.1:$PROXY/v1/shards?view=summary" | awk 'tolower($1) == "etag:" {print $2}' | tr -d '\r'); false; }; }
check "... and a poll with its ETag (If-None-Match) answers 304 once nothing moved" wait_for 120 unchanged
proxy_rss=$(rss_kb $PROXY_PID VmRSS)
echo "# proxy RSS $((${proxy_rss:-0} / 1024)) MiB (its shard history holds about 33 MB at $SHARDS shards)"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
