# test/lib.sh — shared by every tier (test/tiers/): a stack of two real
# MariaDB servers, Kafka (embedded or a real broker) and the proxy; consumers are
# started by each test. Sourced, not run.
#
#   bw_stack_start NAME MODE    sets WORK, CONF, BROKERS, URL and the ports below; a
#                               tier that needs another layout (more shards, fewer
#                               workers) defines bw_stack_conf, called with the config's
#                               path before anything starts
#   start_consumer PORT [CONF]  starts a consumer; its pid is in $!-like LAST_PID
#   counter_files ...           files of pins to count on and of increments (see below)
#   write_clients, client       a clients file with tokens (auth.sh, browser.sh)
#   check NAME COMMAND...       prints "ok - NAME" or "not ok - NAME" with the output
#   wait_for SECONDS COMMAND... polls every 0.1 s
#   start_alertmanager          a real Alertmanager (Debian's) on $ALERTMANAGER; the
#                               config's alerts.alertmanager_url points at it
#   alert_state SHARD           "active" while Alertmanager holds a firing
#                               BulkwriteShardUnhealthy alert for SHARD, else "none"
#   server_alert_state SERVER   the same for BulkwriteServerDown of SERVER (mysql-a|mysql-b)
#   start_replica NAME PORT PRIMARY_PORT
#                               a MariaDB replica in $WORK/NAME on 127.0.0.1:PORT (e.g. $DB_R)
#                               of the server on PRIMARY_PORT, replicating from its first
#                               binlog; bw_stack_stop stops it. Returns 1 (error printed) if
#                               it does not replicate within 30 s. The primary must keep a
#                               binlog: define BW_STACK_PRIMARY=1 before bw_stack_start to
#                               start mysql-a and mysql-b that way (off by default: it costs)
#   kafka_topics ARGS...        Kafka's TopicCommand against $BROKERS (real brokers)
#   bw_metric WHERE SERIES      the value of one series (name{labels} as /metrics writes it)
#                               of the process at WHERE (a port, or a /metrics URL); empty
#                               when it has none
#   bw_metric_sum NAME SHARD WHERE...
#                               a metric's samples summed over the processes (every label
#                               set, or only shard SHARD's when not ""); 0 when none
#   bw_metrics_text WHERE       the whole /metrics text
#   BW_STACK_PROXY_WAIT         seconds bw_stack_start waits for the proxy to listen (60; it
#                               makes its topics first: 4,096 partitions x 3 replicas take
#                               longer); a proxy that exits meanwhile fails the start at once
# The caller ends with: echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]

BIN=${BW_BIN:-bin}
# BW_TEST_PORT_OFFSET shifts every port, so two runs can share a machine
off=${BW_TEST_PORT_OFFSET:-0}
DB_A=$((24306 + off)) DB_B=$((24307 + off)) PROXY=$((28080 + off)) C1=$((28081 + off)) C2=$((28082 + off))
KAFKA=$((29092 + off)) ALERTMANAGER=$((29095 + off)) # Kafka's controller takes KAFKA + 1
KAFKA_CLUSTER=$((29100 + off)) # MODE=cluster: node n on KAFKA_CLUSTER + 2(n-1), its controller + 1
DB_R=$((24309 + off)) # a replica (start_replica); 24308 + off is auth.sh's DB_L
HOT=5 HOT_RATE=5

bw_metrics_text() { local at=$1; [[ $at == http* ]] || at="http://127.0.0.1:$at/metrics"; curl -sf "$at"; }
bw_metric() { bw_metrics_text "$1" | awk -v m="$2" '$1 == m {print $2}'; }
bw_metric_sum() {
    local name=$1 shard=$2 at
    shift 2
    for at in "$@"; do bw_metrics_text "$at"; done |
        awk -v name="$name" -v shard="$shard" '($1 == name || index($1, name "{") == 1) &&
            (shard == "" || index($1, "shard=\"" shard "\"")) {s += $2} END {print s + 0}'
}

pids=()
replicas=() # dirs of start_replica's servers
passed=0 failed=0

bw_stack_stop() {
    # newest first, each gone before the next: consumers leave their group while Kafka
    # still answers (with Kafka gone first, each would wait out its close deadline)
    local i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill "${pids[i]}" 2>/dev/null && wait "${pids[i]}" 2>/dev/null || true
    done
    # replicas before their primaries, so none logs a lost primary on the way out
    for ((i = ${#replicas[@]} - 1; i >= 0; i--)); do
        scripts/mariadb.sh stop "${replicas[i]}" >/dev/null 2>&1 || true
    done
    scripts/mariadb.sh stop "$WORK/mysql-a" >/dev/null 2>&1 || true
    scripts/mariadb.sh stop "$WORK/mysql-b" >/dev/null 2>&1 || true
    case $MODE in kafka | cluster) scripts/kafka.sh stop "$WORK/kafka" >/dev/null 2>&1 ;; esac
    # a sanitizer report in any daemon or tool fails the run, even if no check noticed
    local reports
    reports=$(grep -l -E 'WARNING: ThreadSanitizer|ERROR: (Address|Leak)Sanitizer|runtime error:' "$WORK"/*.log 2>/dev/null)
    if [ -n "$reports" ]; then
        echo "not ok - sanitizer reports in: $reports"
        failed=$((failed + 1))
        trap - EXIT
        echo "logs kept in $WORK"
        exit 1
    fi
    if [ "$failed" -gt 0 ] || [ "${BW_KEEP:-0}" = 1 ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}

check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@" >"$WORK/check.out" 2>&1; then
        echo "ok - $name"; passed=$((passed + 1))
    else
        echo "not ok - $name"; sed 's/^/    /' "$WORK/check.out" | tail -25; failed=$((failed + 1))
    fi
}

kafka_topics() {
    java -cp "${BW_KAFKA_HOME:-/var/cache/bulkwrite/kafka-4.1.1}/libs/*" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
        org.apache.kafka.tools.TopicCommand --bootstrap-server "$BROKERS" "$@"
}

wait_for() { # wait_for SECONDS COMMAND...
    local secs=$1; shift
    for _ in $(seq 1 $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}

start_alertmanager() {
    mkdir -p "$WORK/alertmanager"
    cat >"$WORK/alertmanager/alertmanager.yml" <<'YML'
route:
  receiver: sink
  group_wait: 1s
receivers:
  - name: sink
YML
    prometheus-alertmanager --config.file="$WORK/alertmanager/alertmanager.yml" \
        --storage.path="$WORK/alertmanager" --web.listen-address=127.0.0.1:$ALERTMANAGER \
        --cluster.listen-address= >"$WORK/alertmanager.log" 2>&1 &
    pids+=($!)
    wait_for 30 curl -sf "http://127.0.0.1:$ALERTMANAGER/-/ready" || { echo "alertmanager did not start"; exit 1; }
    "$BIN/bwctl" config-set "$CONF" alerts.alertmanager_url="http://127.0.0.1:$ALERTMANAGER/api/v2/alerts" || exit 1
}

alerts_json() { curl -sf "http://127.0.0.1:$ALERTMANAGER/api/v2/alerts?active=true&silenced=false&inhibited=false"; }

alert_state() { # alert_state SHARD
    alerts_json | jq -r --arg s "$1" '[.[] | select(.labels.alertname == "BulkwriteShardUnhealthy" and
        .labels.shard == $s)] | if length > 0 then .[0].status.state else "none" end'
}

server_alert_state() { # server_alert_state SERVER: BulkwriteServerDown for that server
    alerts_json | jq -r --arg s "$1" '[.[] | select(.labels.alertname == "BulkwriteServerDown" and
        .labels.server == $s)] | if length > 0 then .[0].status.state else "none" end'
}

start_replica() { # start_replica NAME PORT PRIMARY_PORT
    # registered first: a server that came up but does not replicate is stopped too
    replicas+=("$WORK/$1")
    scripts/mariadb.sh start-replica "$WORK/$1" "$2" "$3" >/dev/null
}

# counter_files PINS_FILE INCS_FILE FIRST PINS INCS: JSON lines of PINS creates of pins of
# shard 0 (local ids FIRST, FIRST + 1, …; like_count 0), and of INCS increments of their
# like_count, round-robin over them
counter_files() {
    awk -v first="$3" -v n="$4" 'BEGIN { for (k = 0; k < n; k++)
        printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"like_count\":0}}\n",
            68719476736 + first + k }' >"$1"
    awk -v first="$3" -v n="$4" -v incs="$5" 'BEGIN { for (i = 0; i < incs; i++)
        printf "{\"op\":\"update\",\"object_type\":\"pin\",\"id\":%d,\"fields\":{\"like_count\":{\"increment\":1}}}\n",
            68719476736 + first + i % n }' >"$2"
}

# A clients file (docs/security.md): write_clients FILE "$(client NAME TOKEN ROLES [SCOPES])"...
digest() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
write_clients() { # write_clients FILE CLIENT_LINE...
    local f=$1; shift
    { echo "clients = ("; local IFS=$'\n'; echo "$*" | sed '$!s/$/,/'; echo ");"; } >"$f.tmp" && mv "$f.tmp" "$f"
}
client() { # client NAME TOKEN ROLES [SCOPES] (a trailing " }" may be cut off to add keys)
    printf '  { name = "%s"; token_sha256 = "%s"; roles = [%s];%s }' "$1" "$(digest "$2")" "$3" \
        "${4:+ scopes = [$4];}"
}

start_consumer() { # start_consumer PORT [CONF]
    "$BIN/bw-consumer" -c "${2:-$CONF}" -b "$BROKERS" -p "$1" >>"$WORK/consumer-$1.log" 2>&1 &
    LAST_PID=$!
    pids+=($LAST_PID)
}

# Starts MariaDB x2 (shards 0-3 and 4-7), Kafka and the proxy for test NAME in MODE
# (embedded|kafka). The config is the reference one with this tier's ports, no default
# rate limit, and shard $HOT limited to $HOT_RATE statements/s. Exits on failure.
bw_stack_start() {
    local name=$1
    MODE=$2
    WORK=$(mktemp -d "/tmp/bw-$name.XXXXXX")
    trap bw_stack_stop EXIT
    CONF=$WORK/bulkwrite.conf
    cp conf/bulkwrite.conf "$CONF"
    "$BIN/bwctl" config-set "$CONF" "shards.servers[0].port=$DB_A" "shards.servers[1].port=$DB_B" \
        proxy.port="$PROXY" shards.default_rate=0.0 "shards.rate_overrides=( { shard = $HOT; rate = $HOT_RATE.0; } )" \
        kafka.consumer_group="bw-$name-$MODE" proxy.produce_timeout_ms=3000 || exit 1
    # one test broker: one replica (the embedded Kafka has one whatever the config says)
    if [ "$MODE" = kafka ]; then
        "$BIN/bwctl" config-set "$CONF" kafka.replication_factor=1 kafka.min_insync_replicas=1 || exit 1
    fi
    if declare -F bw_stack_conf >/dev/null; then bw_stack_conf "$CONF"; fi
    "$BIN/bwctl" -c "$CONF" check-config >/dev/null || exit 1
    export BULKWRITE_CONF=$CONF # the tier's programs, where a line gives no -c (the default is the installed one)

    echo "# $name ($MODE): MariaDB on $DB_A and $DB_B"
    # BW_STACK_PRIMARY=1: with a binlog before anything is created, so a replica
    # (start_replica) that starts from the first binlog gets every shard and user
    BW_MARIADB_PRIMARY=${BW_STACK_PRIMARY:-0} scripts/mariadb.sh start "$WORK/mysql-a" $DB_A >/dev/null || exit 1
    BW_MARIADB_PRIMARY=${BW_STACK_PRIMARY:-0} scripts/mariadb.sh start "$WORK/mysql-b" $DB_B >/dev/null || exit 1
    # the tables, and the consumer's and the proxy's least-privilege users (root is the admin)
    "$BIN/bwctl" -c "$CONF" schema --create-users --admin-user root >/dev/null || exit 1

    if [ "$MODE" = embedded ]; then
        "$BIN/bw-kafka-embedded" -c "$CONF" --bootstrap-file "$WORK/bootstrap" >"$WORK/kafka.log" 2>&1 &
        KAFKA_PID=$!
        pids+=($KAFKA_PID)
        wait_for 20 test -s "$WORK/bootstrap" || { echo "embedded kafka did not start"; exit 1; }
        BROKERS=$(cat "$WORK/bootstrap")
    elif [ "$MODE" = cluster ]; then # three brokers: the config's durability as it is (3 replicas, 2 in sync)
        scripts/kafka.sh start-cluster "$WORK/kafka" $KAFKA_CLUSTER >/dev/null || exit 1
        BROKERS=$(cat "$WORK/kafka/bootstrap")
    else
        scripts/kafka.sh start "$WORK/kafka" $KAFKA >/dev/null || exit 1
        BROKERS=127.0.0.1:$KAFKA
    fi
    echo "# kafka: $BROKERS"

    # The proxy creates the topic (real broker) or finds it (embedded); consumers come after.
    "$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >"$WORK/proxy.log" 2>&1 &
    PROXY_PID=$!
    pids+=($PROXY_PID)
    # listening, or gone: stop waiting either way
    wait_for "${BW_STACK_PROXY_WAIT:-60}" sh -c "curl -sf http://127.0.0.1:$PROXY/healthz || ! kill -0 $PROXY_PID"
    curl -sf "http://127.0.0.1:$PROXY/healthz" >/dev/null || { echo "proxy did not start"; tail "$WORK/proxy.log"; exit 1; }
    URL=http://127.0.0.1:$PROXY/v1/batches
}
