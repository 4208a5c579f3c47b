#!/usr/bin/env bash
# The demo behind `make demo`: 8 logical shards on two throwaway MariaDB servers, the
# embedded Kafka, one proxy and one consumer. A partner's feed ingestion (100,000 pin
# creates, all on one owner's shard: the hot-shard case) and a spam cleanup (deletes of
# every 10th of those pins) go through the proxy; progress (ops applied of ops accepted)
# is shown while they apply; then every shard is compared row by row with what was sent.
# Everything started here is stopped on exit; the logs are kept when it fails.
#
# Ports: the configuration's (MariaDB 13306 and 13307, the proxy 18080, the consumer
# 18081), or with DEMO_PORT_BASE=N (`make demo DEMO_PORT_BASE=N`) N and N+1 for MariaDB,
# N+2 for the proxy, N+3 for the consumer, written into a copy of the configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BW_BIN:-bin}
CONF=${BW_CONF:-conf/bulkwrite.conf}
# every program is also told by the environment (an installed one reads /etc/... else)
export BULKWRITE_CONF=$CONF
FEED=${BW_DEMO_FEED:-100000}
PORT_BASE=${DEMO_PORT_BASE:-}
HOT_SHARD=3
WORK=$(mktemp -d /tmp/bw-demo.XXXXXX)
pids=()
started= # set once something writes a log: a failure before leaves nothing to keep

stop_all() {
    local rc=$?
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    scripts/mariadb.sh stop "$WORK/mysql-a" >/dev/null 2>&1 || true
    scripts/mariadb.sh stop "$WORK/mysql-b" >/dev/null 2>&1 || true
    if [ "$rc" != 0 ] && [ -n "$started" ]; then
        echo "demo: failed; its logs are kept in $WORK (mysql-a/error.log, mysql-b/error.log, kafka.log," \
            "consumer.log, proxy.log)" >&2
    elif [ "${BW_KEEP:-0}" = 1 ]; then
        echo "demo: logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap stop_all EXIT

wait_for() { # wait_for WHAT SECONDS COMMAND...
    local what=$1 secs=$2; shift 2
    for _ in $(seq 1 $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "demo: $what did not come up in ${secs}s" >&2; tail -20 "$WORK"/*.log >&2; return 1
}

if [ -n "$PORT_BASE" ]; then
    if ! [[ $PORT_BASE =~ ^[0-9]+$ ]] || [ "$PORT_BASE" -lt 1024 ] || [ "$PORT_BASE" -gt 65532 ]; then
        echo "demo: DEMO_PORT_BASE=$PORT_BASE: expected a port from 1024 to 65532 (it takes 4 ports from there)" >&2
        exit 2
    fi
    cp "$CONF" "$WORK/bulkwrite.conf"
    CONF=$WORK/bulkwrite.conf
    export BULKWRITE_CONF=$CONF
    "$BIN/bwctl" config-set "$CONF" "shards.servers[0].port=$PORT_BASE" "shards.servers[1].port=$((PORT_BASE + 1))" \
        proxy.port=$((PORT_BASE + 2)) consumer.port=$((PORT_BASE + 3)) >/dev/null
fi
dump=$("$BIN/bwctl" -c "$CONF" dump-config)
conf_port() { # conf_port GROUP KEY [NTH]: the NTH (1st) "KEY = N;" inside top-level GROUP of the effective config
    awk -v g="$1" -v k="$2" -v nth="${3:-1}" '/^[a-z_]+ = / {cur = $1}
        cur == g && $1 == k {if (++n == nth) {sub(";", "", $3); print $3; exit}}' <<<"$dump"
}
DB_A=$(conf_port shards port 1) DB_B=$(conf_port shards port 2)
PROXY_PORT=$(conf_port proxy port) ADMIN_PORT=$(conf_port proxy admin_port) CONSUMER_PORT=$(conf_port consumer port)
for pair in "$DB_A:MariaDB for shards 0-3" "$DB_B:MariaDB for shards 4-7" "$PROXY_PORT:the proxy" \
    "$CONSUMER_PORT:the consumer's metrics"; do
    port=${pair%%:*}
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "demo: port $port (${pair#*:}) is taken on 127.0.0.1: something else listens there." >&2
        echo "demo: move the demo's ports: make demo DEMO_PORT_BASE=N (or DEMO_PORT_BASE=N scripts/demo.sh) takes N to N+3," \
            "e.g. DEMO_PORT_BASE=23000" >&2
        exit 1
    fi
done

echo "== starting two MariaDB servers (shards 0-3 and 4-7)"
started=1
scripts/mariadb.sh start "$WORK/mysql-a" "$DB_A"
scripts/mariadb.sh start "$WORK/mysql-b" "$DB_B"
# the tables, and least-privilege users: the consumer writes its tables only, the proxy
# reads the job ledger only (docs/security.md); root (empty password) is the admin here
"$BIN/bwctl" -c "$CONF" schema --create-users --admin-user root

echo "== starting the embedded Kafka, the consumer and the proxy"
"$BIN/bw-kafka-embedded" -c "$CONF" --bootstrap-file "$WORK/bootstrap" >"$WORK/kafka.log" 2>&1 &
pids+=($!)
wait_for "embedded kafka" 20 test -s "$WORK/bootstrap"
BROKERS=$(cat "$WORK/bootstrap")
"$BIN/bw-consumer" -c "$CONF" -b "$BROKERS" >"$WORK/consumer.log" 2>&1 &
pids+=($!)
"$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >"$WORK/proxy.log" 2>&1 &
pids+=($!)
URL=http://127.0.0.1:$PROXY_PORT
METRICS=http://127.0.0.1:$CONSUMER_PORT/metrics
wait_for "proxy" 30 curl -sf "$URL/healthz"
echo "kafka: $BROKERS; proxy: $URL; consumer metrics: $METRICS"

echo "== feed ingestion: $FEED pin creates for one partner (shard $HOT_SHARD)"
"$BIN/bw-workload" -c "$CONF" submit --url "$URL/v1/batches" --protobuf "feed:$FEED:$HOT_SHARD" 2>&1 |
    tee "$WORK/feed.out"
echo "== spam cleanup: delete every 10th of those pins"
"$BIN/bw-workload" -c "$CONF" submit --url "$URL/v1/batches" "cleanup:$FEED:$HOT_SHARD" 2>&1 |
    tee "$WORK/cleanup.out"

# Progress as ops the consumer has done (applied or refused) of the ops the proxy accepted,
# creates and deletes alike: a row count would pass the final count while the feed is in
# and the deletes have not run yet.
accepted_in() { sed -n 's/^submit: [0-9]* ops sent, \([0-9]*\) accepted.*/\1/p' "$1"; }
ACCEPTED=$(($(accepted_in "$WORK/feed.out") + $(accepted_in "$WORK/cleanup.out")))
consumer_sum() { # the sum of a per-shard counter over every shard
    curl -sf "$METRICS" | awk -v m="$1{" 'index($1, m) == 1 {s += $2} END {printf "%d", s}'
}
echo "== waiting for the consumer ($ACCEPTED ops accepted)"
for _ in $(seq 1 300); do
    applied=$(consumer_sum bulkwrite_consumer_rows_applied_total)
    refused=$(consumer_sum bulkwrite_consumer_rows_failed_total)
    echo "progress: $applied of $ACCEPTED accepted ops applied$([ "$refused" = 0 ] || echo ", $refused refused")"
    [ $((applied + refused)) -ge "$ACCEPTED" ] && break
    sleep 1
done
echo "== checking every shard row by row"
"$BIN/bw-workload" -c "$CONF" verify --wait 300 "feed:$FEED:$HOT_SHARD" "cleanup:$FEED:$HOT_SHARD"
echo "== the shards as an SRE sees them (bwctl shards; consumers report every 2 s)"
sleep 4
"$BIN/bwctl" -c "$CONF" shards
echo "== consumer metrics for shard $HOT_SHARD"
curl -sf "$METRICS" | grep "shard=\"$HOT_SHARD\"" || true
# the page is on the admin listener when there is one
PAGE=$URL/ui/
if [ -n "$ADMIN_PORT" ] && [ "$ADMIN_PORT" != 0 ]; then PAGE=http://127.0.0.1:$ADMIN_PORT/ui/; fi
# BW_DEMO_STAY=1: the stack stays up for your own requests (README.md), until Ctrl-C
if [ "${BW_DEMO_STAY:-0}" = 1 ]; then
    echo "== the stack stays up: proxy $URL, consumer metrics $METRICS; Ctrl-C stops it"
    echo "== the SRE page: $PAGE"
    echo "   (bwctl from another shell in this folder: export BULKWRITE_CONF=$CONF, or bin/bwctl -c $CONF …)"
    while sleep 1; do :; done
fi
echo "== done. The SRE page is $PAGE: run BW_DEMO_STAY=1 make demo to keep the stack up and open it"
