#!/usr/bin/env bash
# The demo behind `make demo`: 8 logical shards on two throwaway MariaDB servers, the
# embedded Kafka, one proxy and one consumer. A partner's feed ingestion (100,000 pin
# creates, all on one owner's shard: the hot-shard case) and a spam cleanup (deletes of
# every 10th of those pins) go through the proxy; progress (ops applied of ops accepted)
# is shown while they apply; then every shard is compared row by row with what was sent.
# Everything started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BW_BIN:-bin}
CONF=${BW_CONF:-conf/bulkwrite.conf}
# every program is also told by the environment (an installed one reads /etc/... else)
export BULKWRITE_CONF=$CONF
FEED=${BW_DEMO_FEED:-100000}
HOT_SHARD=3
WORK=$(mktemp -d /tmp/bw-demo.XXXXXX)
pids=()

stop_all() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    scripts/mariadb.sh stop "$WORK/mysql-a" >/dev/null 2>&1 || true
    scripts/mariadb.sh stop "$WORK/mysql-b" >/dev/null 2>&1 || true
    if [ "${BW_KEEP:-0}" = 1 ]; then echo "demo: logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap stop_all EXIT

wait_for() { # wait_for WHAT SECONDS COMMAND...
    local what=$1 secs=$2; shift 2
    for _ in $(seq 1 $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "demo: $what did not come up in ${secs}s" >&2; tail -20 "$WORK"/*.log >&2; return 1
}

echo "== starting two MariaDB servers (shards 0-3 and 4-7)"
scripts/mariadb.sh start "$WORK/mysql-a" 13306
scripts/mariadb.sh start "$WORK/mysql-b" 13307
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
URL=http://127.0.0.1:18080
wait_for "proxy" 30 curl -sf "$URL/healthz"
echo "kafka: $BROKERS; proxy: $URL; consumer metrics: http://127.0.0.1:18081/metrics"

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
    curl -sf http://127.0.0.1:18081/metrics | awk -v m="$1{" 'index($1, m) == 1 {s += $2} END {printf "%d", s}'
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
curl -sf http://127.0.0.1:18081/metrics | grep "shard=\"$HOT_SHARD\"" || true
# BW_DEMO_STAY=1: the stack stays up for your own requests (README.md), until Ctrl-C
if [ "${BW_DEMO_STAY:-0}" = 1 ]; then
    echo "== the stack stays up: proxy $URL, consumer metrics http://127.0.0.1:18081/metrics; Ctrl-C stops it"
    echo "   (bwctl from another shell in this folder: export BULKWRITE_CONF=$CONF, or bin/bwctl -c $CONF …)"
    while sleep 1; do :; done
fi
