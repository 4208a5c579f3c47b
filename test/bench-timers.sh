#!/usr/bin/env bash
# make bench-timers: the delay queue measured against the same writes unscheduled, in
# one run, on a real broker (not in `make check`; docs/performance.md). One proxy, two
# consumers, 8 shards on two MariaDB servers, no rate limit.
#
#   baseline  N one-op jobs (spread:N, one op per request) sent unscheduled by C clients
#             while the consumers are stopped, then applied from the moment the consumers
#             start to the last row committed (the shards' ledgers): the writes themselves,
#             in ops/s (the clients' send rate is printed too)
#   timers    the same N one-op jobs, each with its own not_before spread over W s that
#             start once every one is sent (so the proxy holds all N at once: a sales
#             day's backlog): the proxy's RSS and held bytes with all N held, the release
#             rate (N / (the last row committed - the first not_before)), and lateness
#             (applied_at - not_before) p50, p99 and max; none missing, early or twice
#             (bw-workload lateness fails the run otherwise), every row compared;
#             before the window the proxy is killed -9 and started again: the seconds it
#             takes to read the N held records back, and its RSS then (a restart's cost;
#             the releases after it are the lateness measured)
# The ratio is the timers' rate over the baseline's: what holding and releasing on time
# costs over the writes (1.0: nothing; the asked rate N / W caps it).
#
# Knobs: BENCH_TIMERS (1000000) N, BENCH_TIMERS_WINDOW (100) W in seconds (N / W is the
# rate asked for: 10,000/s by default), BENCH_TIMERS_CLIENTS (8) C. Output: the table on
# stdout and in build/bench-timers/results.md.
set -uo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh
N=${BENCH_TIMERS:-1000000} WINDOW=${BENCH_TIMERS_WINDOW:-100} CLIENTS=${BENCH_TIMERS_CLIENTS:-8}
OUT=build/bench-timers
mkdir -p "$OUT"

bw_stack_conf() { # every shard unlimited; the records of a million held jobs fit in the index's default or not: it does not matter
    "$BIN/bwctl" config-set "$1" 'shards.rate_overrides=()' || exit 1
}
bw_stack_start bench-timers kafka

send() { # send NAME [--not-before FROM:WINDOW]: the N one-op jobs from C clients at once, from SENT_FROM
    local name=$1 k pids_send=()
    shift
    SENT_FROM=$(($(date +%s%3N) + 3000))
    local start=$SENT_FROM
    for ((k = 0; k < CLIENTS; k++)); do
        "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --protobuf --per-request 1 --part $k/$CLIENTS \
            --start-at $start --jobs-out "$WORK/$name-$k.jobs" "$@" spread:$N >"$WORK/$name-$k.log" 2>&1 &
        pids_send+=($!)
    done
    for k in "${pids_send[@]}"; do wait "$k" || { echo "a client failed: $WORK/$name-*.log"; exit 1; }; done
}
applied() { # applied NAME: LAST, the epoch ms of the last commit of the jobs; exits on a missing, early or doubled one
    "$BIN/bw-workload" -c "$CONF" lateness --wait 900 "$WORK/$1"-*.jobs >"$WORK/$1.lateness" || { cat "$WORK/$1.lateness"; exit 1; }
    LAST=$(sed -n 's/^applied: from \([0-9]*\) to \([0-9]*\).*/\2/p' "$WORK/$1.lateness")
}
truncate_pins() {
    local s port
    for s in 0 1 2 3 4 5 6 7; do
        port=$DB_A
        [ $s -ge 4 ] && port=$DB_B
        mariadb -h127.0.0.1 -P$port -uroot -e "TRUNCATE db0000$s.pins"
    done
}
rss_kib() { awk '/^VmRSS/ {print $2}' /proc/$PROXY_PID/status; }
held_is() { [ "$(bw_metric $PROXY bulkwrite_proxy_held_job_records)" = "$1" ]; }
restart_proxy() { # kill -9 and start again; READ_BACK_S: until it holds the $held records again
    kill -9 "$PROXY_PID"
    wait "$PROXY_PID" 2>/dev/null
    local t=$(date +%s%3N)
    "$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >>"$WORK/proxy.log" 2>&1 &
    PROXY_PID=$!
    pids+=($PROXY_PID)
    wait_for 300 held_is "$held" || { echo "the restarted proxy holds $(bw_metric $PROXY bulkwrite_proxy_held_job_records) of $held after 300 s"; exit 1; }
    READ_BACK_S=$(awk -v ms=$(($(date +%s%3N) - t)) 'BEGIN {printf "%.1f", ms / 1000}')
}

echo "# baseline: $N one-op jobs, unscheduled, $CLIENTS clients, the consumers stopped"
send base
send_ms=$(($(date +%s%3N) - SENT_FROM))
t0=$(date +%s%3N)
start_consumer $C1
start_consumer $C2
applied base
base_rate=$(awk -v n=$N -v ms=$((LAST - t0)) 'BEGIN {printf "%.0f", n * 1000 / ms}')
"$BIN/bw-workload" -c "$CONF" verify --wait 60 spread:$N >"$WORK/base.verify" || { cat "$WORK/base.verify"; exit 1; }
echo "# baseline: sent in $((send_ms / 1000)) s ($((N * 1000 / send_ms)) requests/s), applied at $base_rate ops/s"
truncate_pins

# the window starts once every job is sent: the sending took send_ms unscheduled (the
# proxy writes a held job's record instead of its batch: about the same work)
from=$(($(date +%s%3N) + send_ms * 3 / 2 + 15000))
echo "# timers: $N one-op jobs over $WINDOW s from $from"
send timers --not-before "$from:$((WINDOW * 1000))"
held_at=$(date +%s%3N)
[ "$held_at" -lt "$from" ] || echo "# warning: sending ended $(((held_at - from) / 1000)) s after the window began"
rss=$(rss_kib)
held=$(bw_metric $PROXY bulkwrite_proxy_held_job_records)
held_bytes=$(bw_metric $PROXY bulkwrite_proxy_held_bytes)
echo "# all sent: the proxy holds $held job records ($((${held_bytes:-0} / 1048576)) MiB), RSS $((rss / 1024)) MiB"
restart_proxy
rss_restart=$(rss_kib)
echo "# killed -9 and started again: held records read back in $READ_BACK_S s, RSS $((rss_restart / 1024)) MiB"
[ "$(date +%s%3N)" -lt "$from" ] || echo "# warning: the restart ended $((($(date +%s%3N) - from) / 1000)) s after the window began"
# the ledgers are read once the window is over: reading them every second meanwhile
# (bw-workload lateness --wait) would take the servers' time from the release measured
sleep $(((from - $(date +%s%3N)) / 1000 + WINDOW + 2))
applied timers
late=$(sed -n 's/.*p50 \([0-9-]*\), p99 \([0-9-]*\), max \([0-9-]*\)$/\1 \2 \3/p' "$WORK/timers.lateness")
read -r p50 p99 max <<<"$late"
rate=$(awk -v n=$N -v ms=$((LAST - from)) 'BEGIN {printf "%.0f", n * 1000 / ms}')
peak=$(awk '/^VmHWM/ {print $2}' /proc/$PROXY_PID/status)
"$BIN/bw-workload" -c "$CONF" verify --wait 60 spread:$N >"$WORK/timers.verify" || { cat "$WORK/timers.verify"; exit 1; }

{
    echo "| case | N | asked | released | baseline (unscheduled) | ratio | lateness p50 / p99 / max | proxy RSS held (peak) | restart: read back, RSS |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    awk -v n=$N -v w=$WINDOW -v r=$rate -v b=$base_rate -v p50=$p50 -v p99=$p99 -v mx=$max -v rss=$rss -v peak=$peak \
        -v rb=$READ_BACK_S -v rr=$rss_restart 'BEGIN {
        printf "| delay queue: one-op jobs, each its own not_before | %d | %.0f/s | %d/s | %d ops/s | %.2f | %.2f / %.2f / %.2f s | %d MiB (%d MiB) | %.1f s, %d MiB |\n",
            n, n / w, r, b, r / b, p50 / 1000, p99 / 1000, mx / 1000, rss / 1024, peak / 1024, rb, rr / 1024 }'
} | tee "$OUT/results.md"
echo "0 failed"
