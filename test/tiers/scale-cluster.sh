#!/usr/bin/env bash
# test/tiers/scale-cluster.sh cluster: 4,096 partitions x replication factor 3 on three KRaft
# nodes, measured (make scale-cluster; opt-in, never part of make check). The stack is
# test/lib.sh's MODE=cluster one (scripts/kafka.sh start-cluster, the reference config's
# durability: 3 replicas, min.insync.replicas 2) with shards-4096.sh's layout: BW_SCALE_SHARDS
# (4,096) shards split over the two MariaDB servers, no rate limit.
#
# 1. The proxy creates its topics: the time to the batches topic created, to listening and
#    to ready (from the proxy's log and /readyz), in one start of the proxy. Each node gets
#    a 1 GiB heap (BW_KAFKA_JVM_OPTS; scripts/kafka.sh's 384 MiB cluster default, sized for
#    make check's 64 partitions, spent minutes in full GCs at 12,288 replicas).
# 2. Two consumers; a job of BW_SCALE_OPS (51,200) creates spread over every shard, sent
#    BW_SCALE_PER_REQUEST (51,200) ops a request (so one message of 12.5 ops per shard): accepted ops/s and acked Kafka messages/s
#    at the proxy (its /metrics), the time from the first request sent to the last row
#    committed (the shards' ledger, bw-bench applied), the brokers' CPU and RSS; then
#    `bw-workload verify` row by row.
# 3. With the consumers stopped (the produce path alone, which is what 4,096 x RF 3 costs),
#    each of BW_SCALE_VARIANTS sends BW_SCALE_VARIANT_OPS (4,096: one op, so one message, per
#    partition) more creates of a spread job, BW_SCALE_VARIANT_PER_REQUEST (5,000) ops a
#    request, one variable changed from the defaults at a time:
#      base                    the defaults
#      per-request=N           bw-workload submit --per-request N (requests go one after another)
#      proxy:KEY=VALUE         the proxy restarted with KEY=VALUE (bwctl config-set syntax)
#      broker:KEY=VALUE        a dynamic broker setting for every node (Kafka's ConfigCommand,
#                              --entity-default), removed again afterwards (a thread count
#                              may at most double at a time)
#    The list is run BW_SCALE_ROUNDS (2) times over, so that each setting is measured early
#    and late (a young JVM and the neighbours' load drift). These creates are never applied (no consumer runs again): their ids are the main job's.
# The brokers' CPU while idle (BW_SCALE_IDLE, 10 s) is printed before the consumers join and
# after, since their fetches over 4,096 partitions cost the brokers even with nothing to read.
# Timings are printed, never asserted; what is checked is that every op is accepted and
# every row of the main job is exact. BW_SCALE_WAIT (1800) s bounds each wait.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/scale-cluster.sh cluster}
[ "$MODE" = cluster ] || { echo "usage: test/tiers/scale-cluster.sh cluster (three Kafka nodes)" >&2; exit 2; }
. test/lib.sh
SHARDS=${BW_SCALE_SHARDS:-4096} OPS=${BW_SCALE_OPS:-51200} PER_REQUEST=${BW_SCALE_PER_REQUEST:-51200}
VARIANT_OPS=${BW_SCALE_VARIANT_OPS:-4096} VARIANT_PER_REQUEST=${BW_SCALE_VARIANT_PER_REQUEST:-5000}
WAIT=${BW_SCALE_WAIT:-1800} IDLE=${BW_SCALE_IDLE:-10} ROUNDS=${BW_SCALE_ROUNDS:-2}
VARIANTS=${BW_SCALE_VARIANTS-base proxy:proxy.producers=32 broker:num.replica.fetchers=2 broker:num.network.threads=6 broker:num.io.threads=16}
BW_STACK_PROXY_WAIT=$WAIT
export BW_KAFKA_JVM_OPTS=${BW_KAFKA_JVM_OPTS--Xms1g -Xmx1g}

bw_stack_conf() { # shards-4096.sh's layout; a request may wait long for 4,096 partitions' acks
    "$BIN/bwctl" config-set "$1" shards.count=$SHARDS "shards.servers[0].last_shard=$((SHARDS / 2 - 1))" \
        "shards.servers[1].first_shard=$((SHARDS / 2))" "shards.servers[1].last_shard=$((SHARDS - 1))" \
        shards.default_rate=0.0 'shards.rate_overrides=( { shard = 7; rate = 0.0; } )' \
        proxy.produce_timeout_ms=${BW_SCALE_PRODUCE_TIMEOUT_MS:-600000} || exit 1
}
secs() { echo "$2 - $1" | bc | xargs printf %.1f; } # secs FROM TO
iso_s() { date -d "$1" +%s.%N; }                   # a log line's ISO time as epoch seconds
t_stack=$(date +%s.%N)
bw_stack_start scale "$MODE"
echo "# $SHARDS shards x 3 replicas; stack up in $(secs $t_stack "$(date +%s.%N)") s (the three nodes, two MariaDB servers and their $SHARDS databases, the proxy's topics)"

# ---- 1. topics and readiness --------------------------------------------------------------
proxy_log_at() { # proxy_log_at ERE: the first matching line's time (epoch s) in $WORK/proxy.log
    local line
    line=$(grep -m1 -E "$1" "$WORK/proxy.log") || return 1
    iso_s "${line%% *}"
}
proxy_ready() { curl -sf "http://127.0.0.1:$PROXY/readyz" >/dev/null; }
check "the proxy becomes ready" wait_for $WAIT proxy_ready
t_ready=$(date +%s.%N)
t_start=$(proxy_log_at '^[0-9]{4}-')
t_created=$(proxy_log_at 'created topic bulkwrite.batches with')
t_listen=$(proxy_log_at ' listening on ')
echo "# proxy: batches topic ($SHARDS partitions x 3) created $(secs $t_start ${t_created:-$t_start}) s after its start," \
    "listening after $(secs $t_start ${t_listen:-$t_start}) s, ready after $(secs $t_start $t_ready) s"
replicated() {
    kafka_topics --describe --topic bulkwrite.batches >"$WORK/describe.txt" 2>&1 &&
        grep -q "PartitionCount: $SHARDS.*ReplicationFactor: 3" "$WORK/describe.txt" &&
        grep -q 'min.insync.replicas=2' "$WORK/describe.txt" && test "$(grep -c 'Partition: ' "$WORK/describe.txt")" = $SHARDS
}
check "the batches topic has $SHARDS partitions, 3 replicas each, min.insync.replicas=2" replicated

# ---- measuring ------------------------------------------------------------------------------
metric() { # metric NAME: the proxy's counter, 0 if absent
    curl -sf "http://127.0.0.1:$PROXY/metrics" | awk -v n="$1" '$1 == n {v = $2} END {print v + 0}'
}
node_pid() { cat "$WORK/kafka/node$1/kafka.pid" 2>/dev/null; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
TICK=$(getconf CLK_TCK)
cpu_all() { local n; for n in 1 2 3; do echo -n "$(cpu_ticks "$(node_pid $n)") "; done; cpu_ticks $PROXY_PID; }
rss_mib() { awk '$1 == "VmRSS:" {printf "%d", $2 / 1024}' "/proc/$1/status" 2>/dev/null; }
idle_cpu() { # idle_cpu LABEL: the nodes' CPU over IDLE s with nothing sent
    local c0 c1 i out=""
    read -r -a c0 <<<"$(cpu_all)"
    sleep $IDLE
    read -r -a c1 <<<"$(cpu_all)"
    for i in 0 1 2; do out+="$(echo "scale=2; (${c1[i]} - ${c0[i]}) / $TICK / $IDLE" | bc)/"; done
    echo "# idle, $1: the nodes use ${out%/} CPU-s per second"
}
# run_job LABEL JOB PER_REQUEST: submits JOB, prints the proxy's rates and the CPU it took
run_job() {
    local label=$1 job=$2 per=$3 ops0 msgs0 err0 cpu0 t0 t1 rc ops msgs errs cpu1 s i
    ops0=$(metric bulkwrite_proxy_ops_accepted_total) msgs0=$(metric bulkwrite_proxy_kafka_messages_total)
    err0=$(metric bulkwrite_proxy_kafka_produce_errors_total)
    read -r -a cpu0 <<<"$(cpu_all)"
    t0=$(date +%s.%N)
    "$BIN/bw-workload" -c "$CONF" submit --protobuf --url "$URL" --per-request "$per" --retry-for $WAIT \
        --request-id "scale-$label" "$job" >"$WORK/submit-$label.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    read -r -a cpu1 <<<"$(cpu_all)"
    ops=$(($(metric bulkwrite_proxy_ops_accepted_total) - ops0)) msgs=$(($(metric bulkwrite_proxy_kafka_messages_total) - msgs0))
    errs=$(($(metric bulkwrite_proxy_kafka_produce_errors_total) - err0))
    s=$(secs $t0 $t1)
    local cpu=""
    for i in 0 1 2; do cpu+="$(echo "scale=1; (${cpu1[i]} - ${cpu0[i]}) / $TICK" | bc)/"; done
    echo "# $label: $ops ops accepted in $s s ($(echo "$ops / $s" | bc) ops/s), $msgs Kafka messages acked" \
        "($(echo "$msgs / $s" | bc)/s, $(echo "scale=1; $ops / ($msgs + ($msgs == 0))" | bc) ops each), $errs ops not acked" \
        "(resent), per-request $per; CPU-s nodes ${cpu%/}, proxy $(echo "scale=1; (${cpu1[3]} - ${cpu0[3]}) / $TICK" | bc);" \
        "RSS MiB nodes $(rss_mib "$(node_pid 1)")/$(rss_mib "$(node_pid 2)")/$(rss_mib "$(node_pid 3)"), proxy $(rss_mib $PROXY_PID)"
    RUN_T0=$t0
    return $rc
}
job_ops() { echo "${1#*:}"; }

# ---- 2. the job, applied ---------------------------------------------------------------------
idle_cpu "no consumer"
start_consumer $C1
start_consumer $C2
consumers=("${pids[@]: -2}")
consumers_ready() { curl -sf "http://127.0.0.1:$C1/readyz" && curl -sf "http://127.0.0.1:$C2/readyz"; }
t0=$(date +%s.%N)
check "two consumers join the group" wait_for $WAIT consumers_ready
echo "# consumers ready after $(secs $t0 "$(date +%s.%N)") s"
sleep 5 # their first fetches
idle_cpu "two consumers in the group"
run_job main "spread:$OPS" $PER_REQUEST
submit_rc=$?
grep '^submit:' "$WORK/submit-main.log" | sed 's/^/# /'
check "the job's $OPS ops are all accepted" sh -c \
    "test $submit_rc = 0 && grep -q 'submit: $OPS ops sent, $OPS accepted, 0 not accepted' '$WORK/submit-main.log'"
first_sent=$(grep -o 'sent from [0-9]*' "$WORK/submit-main.log" | awk '{printf "%.3f", $3 / 1000}')
check "every row is in place within $WAIT s, row by row on every shard" \
    sh -c "'$BIN/bw-workload' -c '$CONF' verify --wait $WAIT spread:$OPS >'$WORK/verify.log' 2>&1"
tail -1 "$WORK/verify.log" | sed 's/^/# /'
"$BIN/bw-bench" -c "$CONF" applied --since "${first_sent:-$RUN_T0}" >"$WORK/applied.txt" 2>&1
last_at=$(grep -o 'last_at=[0-9.]*' "$WORK/applied.txt" | cut -d= -f2)
rows=$(grep -o ' rows=[0-9]*' "$WORK/applied.txt" | cut -d= -f2)
echo "# applied: $rows rows, the first request sent to the last row committed in $(secs "${first_sent:-$RUN_T0}" "${last_at:-0}") s" \
    "($(echo "${rows:-0} / $(secs "${first_sent:-$RUN_T0}" "${last_at:-0}")" | bc 2>/dev/null) rows/s)"
for pid in "${consumers[@]}"; do echo "# consumer pid $pid: RSS $(rss_mib $pid) MiB, CPU $(echo "scale=1; $(cpu_ticks $pid) / $TICK" | bc) s"; done

# ---- 3. the produce path alone, one setting at a time -------------------------------------
for pid in "${consumers[@]}"; do kill $pid 2>/dev/null && wait $pid 2>/dev/null; done
restart_proxy() { # restart_proxy CONFIG
    kill $PROXY_PID 2>/dev/null && wait $PROXY_PID 2>/dev/null
    "$BIN/bw-proxy" -c "$1" -b "$BROKERS" >>"$WORK/proxy.log" 2>&1 &
    PROXY_PID=$!
    pids+=($PROXY_PID)
    wait_for $WAIT proxy_ready || { echo "# the proxy did not become ready with $1"; return 1; }
}
config_command() {
    java -cp "${BW_KAFKA_HOME:-/var/cache/bulkwrite/kafka-4.1.1}/libs/*" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
        kafka.admin.ConfigCommand --bootstrap-server "$BROKERS" --entity-type brokers --entity-default "$@"
}
sleep 5 # the group gone
v=0
for variant in $(for _ in $(seq $ROUNDS); do echo $VARIANTS; done); do
    v=$((v + 1))
    label="v$v-${variant//[^A-Za-z0-9.=-]/_}" per=$VARIANT_PER_REQUEST ok=1
    case $variant in
        base) ;;
        per-request=*) per=${variant#per-request=} ;;
        proxy:*)
            cp "$CONF" "$WORK/variant.conf"
            "$BIN/bwctl" config-set "$WORK/variant.conf" "${variant#proxy:}" && restart_proxy "$WORK/variant.conf" || ok=0 ;;
        broker:*)
            config_command --alter --add-config "${variant#broker:}" >"$WORK/config-$v.log" 2>&1 || ok=0
            sleep 3 ;; # each node applies it on its own
        *) echo "# unknown variant $variant (base, per-request=N, proxy:KEY=VALUE, broker:KEY=VALUE)"; ok=0 ;;
    esac
    if [ $ok = 1 ]; then
        run_job "$label" "spread:$VARIANT_OPS" "$per"
        check "$variant: the $VARIANT_OPS ops are all accepted" \
            grep -q "submit: $VARIANT_OPS ops sent, $VARIANT_OPS accepted, 0 not accepted" "$WORK/submit-$label.log"
    else
        check "$variant: applied" false
    fi
    case $variant in
        proxy:*) restart_proxy "$CONF" ;;
        broker:*)
            [ $ok = 1 ] || continue
            kv=${variant#broker:}
            config_command --alter --delete-config "${kv%%=*}" >>"$WORK/config-$v.log" 2>&1 ||
                { echo "# could not take $kv back (see $WORK/config-$v.log): later variants run with it"; BW_KEEP=1; }
            sleep 3 ;;
    esac
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
