#!/usr/bin/env bash
# make bench: bulkwrite's throughput, rate precision and isolation as ratios against
# baselines measured in the same run, on the same servers (docs/performance.md).
#
#   test/bench.sh            BENCH_RUNS (3) runs of every case, then the table
#   BENCH_SMOKE=1 test/bench.sh   every case once at tiny sizes (seconds): no speed is
#                            asserted, but a case that errors or leaves the wrong rows fails
#
# It starts its own servers (two MariaDB by scripts/mariadb.sh, the embedded Kafka, the
# proxy, one consumer; for the proxy-alone case also a real broker by scripts/kafka.sh
# unless BENCH_KAFKA=0) on BW_TEST_PORT_OFFSET-shifted ports, and stops all of them on any
# exit. Three stacks in turn, each case measured and its baseline next to it:
#   A  500-row create and 1,000-row delete batches, no rate limits, 4 workers:
#      hot-shard feed, spam cleanup, spread over all shards, online probe
#   B  2-row create batches: one shard's most statements/s, rate precision
#   C  the proxy alone (no consumer), 128 shards: 1/4/16 clients, JSON and protobuf,
#      on the embedded Kafka and on the real broker
#   D  (on stack A's servers, run after it) counters: BENCH_COUNTERS like_count increments
#      scattered over 1,000 pins of one shard, summed by the consumer
#      (coalesce_increments) against the same with it off
# End-to-end cases time from the moment the client begins its first request until the
# commit of the last transaction that applied the job's rows (the shards' ledger), once
# bulkwrite_consumer_rows_applied_total has counted every row; then bw-workload verify
# compares every shard row by row (not timed). The tables are
# truncated between cases (bw-bench clean; the ledger stays), and each case starts once
# InnoDB has flushed and purged what the one before wrote (bw-bench settle).
#
# Knobs (full / smoke): BENCH_ROWS (200000 / 2000) creates of the hot-shard and spread
# cases; BENCH_DELETES (100000 / 500) deletes of the cleanup case (a feed of 10x that is
# inserted directly first); BENCH_ROWWISE (5000 / 200) rows of the one-INSERT-per-row
# sample; BENCH_SMALL_BATCHES (2000 / 200) 2-row batches of the most-batches case;
# BENCH_RATES ("5 50 500 2000"); BENCH_RATE_SECONDS (10 / 1) each rate's window;
# BENCH_PROBE_SECONDS (5 / 1) of each side of an online probe, in BENCH_PROBE_SLICES (5 / 2)
# turns of idle and busy, BENCH_PROBE_ROWS (1500000 / 3000; the full run raises it to what the
# hot shard drains in 2 x BENCH_PROBE_SECONDS at its hot-shard-drain rate), BENCH_PROBE_RATE (20);
# BENCH_ADAPTIVE_THREADS (0.2), BENCH_ADAPTIVE_SAMPLES (4), BENCH_ADAPTIVE_SETTLE (3) s,
# BENCH_ADAPTIVE_QUIET_MS (3000, the default) and BENCH_ADAPTIVE_INCREASE (0.1): the adaptive case's
# throttle.threads_running and threads_running_samples, settling time, throttle.quiet_ms
# and throttle.increase;
# BENCH_PROXY_OPS (300000 / 2000) ops per proxy case; BENCH_CLIENTS ("1 4 16");
# BENCH_PROXY_LEAD_MS (3000): how long the proxy case's clients have to encode their
# requests before they all start sending;
# BENCH_PAGES (5) pages of the SRE page open in the proxy-pages case (0: no such case),
# BENCH_PAGES_CLIENTS (4) its clients, BENCH_PAGES_OPS (1000000 / 6666) ops a window;
# BENCH_COUNTERS (100000 / 2000) increments of the counter case;
# BENCH_KAFKA (1 / 0) the real-broker proxy case; BENCH_STACKS ("A D B C") the stacks whose
# cases run (the others only start and stop); BENCH_KAFKA_JVM_OPTS (none) the real
# broker's extra JVM options. Output: the table on stdout and in
# BENCH_OUT/results.md, the raw numbers in BENCH_OUT/raw.tsv (BENCH_OUT: build/bench, for
# the smoke build/bench-smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh

SMOKE=${BENCH_SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
    RUNS=1 ROWS=2000 DELETES=500 ROWWISE=200 SMALL=200 RATE_SECONDS=1 WARMUP=0.5 COUNTERS=2000
    PROBE_SECONDS=1 PROBE_SLICES=2 PROBE_ROWS=3000 PROXY_OPS=2000 KAFKA_CASE=0
else
    RUNS=3 ROWS=200000 DELETES=100000 ROWWISE=5000 SMALL=2000 RATE_SECONDS=10 WARMUP=2 COUNTERS=100000
    PROBE_SECONDS=5 PROBE_SLICES=5 PROBE_ROWS=1500000 PROXY_OPS=300000 KAFKA_CASE=1
fi
RUNS=${BENCH_RUNS:-$RUNS} ROWS=${BENCH_ROWS:-$ROWS} DELETES=${BENCH_DELETES:-$DELETES}
ROWWISE=${BENCH_ROWWISE:-$ROWWISE} SMALL=${BENCH_SMALL_BATCHES:-$SMALL} COUNTERS=${BENCH_COUNTERS:-$COUNTERS}
RATES=${BENCH_RATES:-5 50 500 2000} RATE_SECONDS=${BENCH_RATE_SECONDS:-$RATE_SECONDS}
PROBE_SECONDS=${BENCH_PROBE_SECONDS:-$PROBE_SECONDS} PROBE_ROWS=${BENCH_PROBE_ROWS:-$PROBE_ROWS}
PROBE_SLICES=${BENCH_PROBE_SLICES:-$PROBE_SLICES}
[ "$PROBE_SLICES" -ge 1 ] 2>/dev/null || { echo "bench: BENCH_PROBE_SLICES must be a whole number >= 1" >&2; exit 2; }
SLICE_SECONDS=$(awk "BEGIN {printf \"%.3f\", $PROBE_SECONDS / $PROBE_SLICES}")
PROBE_RATE=${BENCH_PROBE_RATE:-20} PROXY_OPS=${BENCH_PROXY_OPS:-$PROXY_OPS}
ADAPTIVE_THREADS=${BENCH_ADAPTIVE_THREADS:-0.2} ADAPTIVE_SETTLE=${BENCH_ADAPTIVE_SETTLE:-3}
ADAPTIVE_QUIET_MS=${BENCH_ADAPTIVE_QUIET_MS:-3000} ADAPTIVE_INCREASE=${BENCH_ADAPTIVE_INCREASE:-0.1}
ADAPTIVE_SAMPLES=${BENCH_ADAPTIVE_SAMPLES:-4}
CLIENTS=${BENCH_CLIENTS:-1 4 16} KAFKA_CASE=${BENCH_KAFKA:-$KAFKA_CASE}
BENCH_PROXY_LEAD_MS=${BENCH_PROXY_LEAD_MS:-3000}
STACKS=${BENCH_STACKS:-A D B C}
# the real broker's extra JVM options (none: C1 only, -XX:TieredStopAtLevel=1, took the
# young JVM's compiler off the cores but cost the proxy-alone rows more; docs/performance.md)
export BW_KAFKA_JVM_OPTS=${BENCH_KAFKA_JVM_OPTS:-}
runs_of() { case " $STACKS " in *" $1 "*) echo "$RUNS" ;; *) echo 0 ;; esac; } # runs_of STACK
HOT_SHARD=3 COLD_SHARD=0 WORKERS=4 PROXY_SHARDS=128 # shards 0-3 share server mysql-a
OUT=${BENCH_OUT:-build/bench}
[ "$SMOKE" = 1 ] && OUT=${BENCH_OUT:-build/bench-smoke}
mkdir -p "$OUT"
RAW=$OUT/raw.tsv
printf 'case\trun\tmeasured_what\tmeasured\tbaseline_what\tbaseline\ttarget\tnote\n' >"$RAW"
KAFKA_UP=0

bench_stop() {
    local rc=$?
    set +e
    [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1 # keep the logs
    [ "$KAFKA_UP" = 1 ] && scripts/kafka.sh stop "$WORK/kafka" >/dev/null 2>&1
    bw_stack_stop
}
die() { echo "bench: ERROR: $*" >&2; failed=$((failed + 1)); exit 1; }
note() { echo "# $*" >&2; }
now() { date +%s.%N; }
calc() { awk "BEGIN {printf \"%.${2:-1}f\", ($1)}"; } # (…): a bare > would redirect

# record CASE RUN MEASURED_WHAT MEASURED BASELINE_WHAT BASELINE TARGET [NOTE]
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "${8:-}" >>"$RAW"
    # the values as awk's variables: gawk folds "0 / 0" written in the program, whatever the test before it
    note "$1 (run $2): $4 vs $6 = $(awk -v m="$4" -v b="$6" 'BEGIN {printf "%.3f", (b > 0 ? m / b : 0)}')${8:+ ($8)}"
}

# ---- the consumer's metrics --------------------------------------------------------------

metrics() { curl -sf "http://127.0.0.1:$C1/metrics"; }
metric_sum() { # metric_sum NAME: over every shard
    metrics | awk -v k="$1{" 'index($1, k) == 1 {s += $2} END {printf "%d\n", s}'
}
applied_rows() { metric_sum bulkwrite_consumer_rows_applied_total; }
refused_rows() { metric_sum bulkwrite_consumer_rows_failed_total; }
shard_metric() { # shard_metric NAME SHARD
    metrics | awk -v k="$1{shard=\"$2\"}" '$1 == k {v = $2} END {printf "%d\n", v}'
}
# wait_rows BEFORE COUNT SECONDS: until COUNT more rows are applied; prints the time then
wait_rows() {
    local deadline n
    deadline=$(calc "$(now) + $3" 3)
    while :; do
        n=$(applied_rows)
        if [ "$((n - $1))" -ge "$2" ]; then now; return 0; fi
        [ "$(calc "$(now) > $deadline" 0)" = 1 ] && die "only $((n - $1)) of $2 rows applied in $3 s"
        sleep 0.05
    done
}
# statements run (a transaction runs up to consumer.transaction_max_statements of them; with
# 2-row batches every statement is one batch)
batches() { shard_metric bulkwrite_consumer_statements_total "$HOT_SHARD"; }
# wait_batch_change SHARD SECONDS [FROM [DRY]]: until the shard's batch counter differs from
# FROM (default: its value now); prints "TIME COUNT". Fails after SECONDS, unless DRY is
# given: then it prints "TIME COUNT DRY" (nothing more was applied).
wait_batch_change() {
    local b0=${3:-} b deadline
    [ -n "$b0" ] || b0=$(shard_metric bulkwrite_consumer_statements_total "$1")
    deadline=$(calc "$(now) + $2" 3)
    while :; do
        b=$(shard_metric bulkwrite_consumer_statements_total "$1")
        if [ "$b" != "$b0" ]; then echo "$(now) $b"; return 0; fi
        if [ "$(calc "$(now) > $deadline" 0)" = 1 ]; then
            [ -n "${4:-}" ] || die "shard $1 applied no batch in $2 s"
            echo "$(now) $b $4"
            return 0
        fi
        sleep 0.02
    done
}

# ---- helpers for the stacks ------------------------------------------------------------------

submit() { # submit CONF JOB...: protobuf, 5,000 ops per request, every op accepted
    local conf=$1; shift
    "$BIN/bw-workload" -c "$conf" submit --url "$URL" --protobuf --per-request 5000 "$@" 2>>"$WORK/submit.log" ||
        die "submit $* failed (see $WORK/submit.log)"
}
verify() { # verify CONF JOB...: every shard row by row
    local conf=$1; shift
    "$BIN/bw-workload" -c "$conf" verify --wait 120 "$@" >"$WORK/verify.out" 2>>"$WORK/verify.log" ||
        { cat "$WORK/verify.out" >&2; die "verify $* failed"; }
}
bench() { # bench CONF ARGS...: a bw-bench run; prints its result line
    "$BIN/bw-bench" -c "$@" 2>>"$WORK/bw-bench.log" || die "bw-bench $* failed (see $WORK/bw-bench.log)"
}
pooled_p99() { # pooled_p99 FILE: the p99 (nearest rank) of the latencies in FILE, one per line
    sort -g "$1" | awk '{v[NR] = $1} END {k = int(0.99 * NR + 0.999999); print v[k ? k : 1]}'
}
field() { # field NAME < "a=1 b=2"
    tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'
}
# servers that have written out and purged what came before
settle() {
    local s
    s=$(bench "$CONF" settle | field seconds)
    [ "$(calc "$s > 2" 0)" = 0 ] || note "the servers took $s s to settle"
}
# before every case: empty tables, and settled servers
clean() {
    bench "$CONF" clean >/dev/null
    settle
}
# cleanup_feed ROWS: the cleanup case's feed, inserted directly on the hot shard; the
# deletes start once InnoDB has written it out (a delete case that started while the
# insert was still being flushed measured the flush too)
cleanup_feed() {
    bench "$CONF" insert "feed:$1:$HOT_SHARD" >/dev/null
    settle
}
start_proxy() { # start_proxy CONF
    "$BIN/bw-proxy" -c "$1" -b "$BROKERS" >>"$WORK/proxy.log" 2>&1 &
    PROXY_PID=$!
    pids+=($PROXY_PID)
    wait_for 90 curl -sf "http://127.0.0.1:$PROXY/healthz" || { tail "$WORK/proxy.log" >&2; die "proxy did not start"; }
}
stop_pid() { kill "$1" 2>/dev/null && wait "$1" 2>/dev/null || true; }
forget_pids() { # forget_pids PID...: off the list that bw_stack_stop kills
    local p kept=() gone
    for p in "${pids[@]}"; do
        for gone in "$@"; do [ "$p" = "$gone" ] && continue 2; done
        kept+=("$p")
    done
    pids=("${kept[@]}")
}
# start_applier CONF: the consumer, ready once a first job is applied (the group join is
# over; later timings do not include it)
start_applier() {
    start_consumer "$C1" "$1"
    CONSUMER_PID=$LAST_PID
    wait_for 60 curl -sf "http://127.0.0.1:$C1/readyz" || die "the consumer did not become ready"
    local before
    before=$(applied_rows)
    submit "$1" feed:10:1
    wait_rows "$before" 10 60 >/dev/null
    clean
}

# ledger_applied CONF SINCE: "parts rows first_at first_rows last_at" of the transactions
# committed since SINCE, from every shard's ledger (bw-bench applied): the end times of
# the pipeline cases, to the millisecond and without polling; every transaction's time and
# rows in BENCH_OUT/timeline-SINCE.txt
ledger_applied() {
    "$BIN/bw-bench" -c "$1" applied --since "$2" --timeline 2>"$OUT/timeline-$2.txt" |
        awk '{for (i = 1; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]}
        print v["parts"], v["rows"], v["first_at"], v["first_rows"], v["last_at"]}'
}
# CPU time used so far, in clock ticks: "MARIADB KAFKA PROXY CONSUMER" (both servers in
# the first; the Kafka of the stack, the real broker's JVM or the embedded one)
proc_ticks() {
    local pid s=0
    for pid in "$@"; do
        [ -r "/proc/$pid/stat" ] && s=$((s + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$s"
}
cpu_ticks() {
    local kafka=${KAFKA_PID:-$(cat "$WORK/kafka/kafka.pid" 2>/dev/null)}
    # shellcheck disable=SC2046 # one pid per word
    echo "$(proc_ticks $(cat "$WORK"/mysql-*/mysqld.pid 2>/dev/null)) $(proc_ticks $kafka)" \
        "$(proc_ticks "$PROXY_PID") $(proc_ticks "$CONSUMER_PID")"
}
TICK=$(getconf CLK_TCK)
# e2e CONF EXPECTED_ROWS PRESENT JOB...: submits the jobs, waits until every row is
# applied, verifies (PRESENT: a job whose rows were written directly before, or ""); no op
# may be refused. Prints rows/s from the moment the client began its first request to the
# last transaction's commit (the client's own start, 25-65 ms of loading libcurl's
# libraries and its config, is not timed, as bw-bench's clock starts once it is
# connected), and writes where the CPU went meanwhile to $WORK/cpu.note.
e2e() {
    local conf=$1 rows=$2 present=$3 before refused t0 started parts n first_at first_rows last_at c0 c1 client
    shift 3
    before=$(applied_rows)
    refused=$(refused_rows)
    c0=($(cpu_ticks))
    t0=$(now)
    submit "$conf" "$@"
    times >"$WORK/times" # this subshell's children: the client (times in a pipe would be the pipe's)
    client=$(awk 'NR == 2 {gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4}' "$WORK/times")
    started=$(awk '/^submit: sent from/ {s = $4} END {printf "%.3f", s / 1000}' "$WORK/submit.log") # this submit's
    [ "$(calc "$started >= $t0 - 0.01" 0)" = 1 ] || die "no start time from the client of $* (see $WORK/submit.log)"
    wait_rows "$before" "$rows" 600 >/dev/null
    c1=($(cpu_ticks))
    [ "$(refused_rows)" = "$refused" ] || die "the shards refused $(($(refused_rows) - refused)) ops of $*"
    read -r parts n first_at first_rows last_at < <(ledger_applied "$conf" "$t0")
    [ "$n" = "$rows" ] || die "the ledger counts $n rows applied since the submit of $*, not $rows"
    # the counters also span the client's start (untimed), said in the note
    echo "CPU s over $(calc "$last_at - $t0" 2) s (the client's start $(calc "($started - $t0) * 1000" 0) ms of it) on $(nproc) cores: MariaDB $(calc "(${c1[0]} - ${c0[0]}) / $TICK" 2)," \
        "Kafka $(calc "(${c1[1]} - ${c0[1]}) / $TICK" 2), proxy $(calc "(${c1[2]} - ${c0[2]}) / $TICK" 2)," \
        "consumer $(calc "(${c1[3]} - ${c0[3]}) / $TICK" 2), client $(calc "$client" 2)" >"$WORK/cpu.note"
    verify "$conf" $present "$@"
    calc "$rows / ($last_at - $started)" 0
}
# user_e2e CONF ROWS FILE JOB: what a user sees: FILE (JOB's ops as JSON lines) sent by
# `bwctl submit` with its defaults as one new job, rows/s from the moment the command
# starts (its own start included) to the last transaction's commit; then every shard row
# by row.
user_e2e() {
    local conf=$1 rows=$2 before t0 parts n first_at first_rows last_at
    before=$(applied_rows)
    t0=$(now)
    "$BIN/bwctl" -c "$conf" --url "http://127.0.0.1:$PROXY" submit --job "bench-user-$(date +%s%N)" "$3" \
        >/dev/null 2>>"$WORK/submit.log" || die "bwctl submit $3 failed (see $WORK/submit.log)"
    wait_rows "$before" "$rows" 600 >/dev/null
    read -r parts n first_at first_rows last_at < <(ledger_applied "$conf" "$t0")
    [ "$n" = "$rows" ] || die "the ledger counts $n rows applied since bwctl submit of $3, not $rows"
    verify "$conf" "$4"
    calc "$rows / ($last_at - $t0)" 0
}
# drain CONF ROWS PRESENT JOB...: rows/s of the consumer alone, from a backlog: the hot
# shard paused, the job submitted (it waits in Kafka), then resumed; with DRAIN_ALL=1 the
# consumer stopped instead and started again, so that every shard's backlog is there at
# once (resuming shards one bwctl call at a time staggers them by the control topic's
# round trip, ~0.2 s each). DRAIN_RATE: rows after the first transaction over the time
# from its commit to the last one's. Not run in a subshell: it may replace the consumer.
drain() {
    local conf=$1 rows=$2 present=$3 before t0 parts n first_at first_rows last_at; shift 3
    if [ "${DRAIN_ALL:-0}" = 1 ]; then
        stop_pid "$CONSUMER_PID"
        t0=$(now)
        submit "$conf" "$@"
        start_consumer "$C1" "$conf"
        CONSUMER_PID=$LAST_PID
        wait_for 60 curl -sf "http://127.0.0.1:$C1/readyz" || die "the consumer did not become ready"
        before=0 # a new process's counters
    else
        "$BIN/bwctl" -c "$conf" pause "$HOT_SHARD" >/dev/null
        sleep 1 # the pause reaches the consumer through the control topic
        before=$(applied_rows)
        t0=$(now)
        submit "$conf" "$@"
        "$BIN/bwctl" -c "$conf" resume "$HOT_SHARD" >/dev/null
    fi
    wait_rows "$before" "$rows" 600 >/dev/null
    read -r parts n first_at first_rows last_at < <(ledger_applied "$conf" "$t0")
    [ "$n" = "$rows" ] || die "the ledger counts $n rows applied since the submit of $*, not $rows"
    verify "$conf" $present "$@"
    DRAIN_RATE=$(calc "$last_at > $first_at ? ($rows - $first_rows) / ($last_at - $first_at) : 0" 0)
}
backlog_waits() { awk '/^submit: [0-9]+ ops sent/ {w += $10} END {print w + 0}' "$WORK/submit.log"; }

# ---- stack A: 500-row batches, no rate limits --------------------------------------------------

bw_stack_conf() { # no rate anywhere (lib.sh zeroes the default; drop its hot-shard override);
    # root for every connection: bw-bench truncates tables between cases, and its direct
    # baseline must connect as the consumer does; a paused shard's backlog up to 1 GiB (the
    # online probe's, sized to the hot shard's drain rate, passed the default 256 MiB)
    "$BIN/bwctl" config-set "$1" 'shards.rate_overrides=( )' consumer.workers=$WORKERS proxy.backlog_max_bytes=1073741824 \
        'shards.servers[0].user=root' 'shards.servers[1].user=root' \
        'shards.servers[0].password=""' 'shards.servers[1].password=""' \
        throttle.interval_ms=250 throttle.quiet_ms=$ADAPTIVE_QUIET_MS throttle.increase=$ADAPTIVE_INCREASE \
        throttle.threads_running=$ADAPTIVE_THREADS throttle.threads_running_samples=$ADAPTIVE_SAMPLES || exit 1
    # the adaptive throttle's knobs are in place from the start, its mode off: the
    # online-p99-adaptive case switches it on and off with SIGHUP (throttle_mode)
}
throttle_mode() { # throttle_mode off|on: the consumer's throttle.mode, by a reload
    "$BIN/bwctl" config-set "$CONF" throttle.mode="$1" || exit 1
    kill -HUP "$CONSUMER_PID"
    sleep 1
}
# on the real broker unless BENCH_KAFKA=0: on the embedded Kafka the proxy admits 4 MiB a shard, so the
# proxy holds a 200k-row feed back with 429s (backlog admission) and the consumer starves
A_MODE=embedded
[ "$KAFKA_CASE" = 1 ] && A_MODE=kafka
bw_stack_start bench "$A_MODE"
trap bench_stop EXIT
trap 'exit 130' INT TERM
start_applier "$CONF"
note "stack A: 500-row creates, 1,000-row deletes, $WORKERS workers, no rate limits; $RUNS run(s)"
if [ "$(runs_of A)" -gt 0 ]; then
    # untimed: one spread feed through the whole pipeline first, so that no case pays for
    # the broker JVM's just-in-time compilation or cold buffer pools
    clean
    e2e "$CONF" "$ROWS" "" "spread:$ROWS" >/dev/null
fi

for run in $(seq 1 "$(runs_of A)"); do
    # hot-shard feed: one partner's creates, all on one shard
    clean
    : >"$WORK/submit.log"
    e2e_rate=$(e2e "$CONF" "$ROWS" "" "feed:$ROWS:$HOT_SHARD")
    waits=$(backlog_waits)
    cpu=$(cat "$WORK/cpu.note")
    clean
    "$BIN/bw-workload" -c "$CONF" jsonl "feed:$ROWS:$HOT_SHARD" >"$WORK/feed.jsonl" # untimed: the user's file
    user_rate=$(user_e2e "$CONF" "$ROWS" "$WORK/feed.jsonl" "feed:$ROWS:$HOT_SHARD")
    clean
    direct=$(bench "$CONF" insert --conns 1 "feed:$ROWS:$HOT_SHARD" | field rows_per_s)
    clean
    array=$(bench "$CONF" array --conns 1 "feed:$ROWS:$HOT_SHARD" | field rows_per_s)
    clean
    rowwise=$(bench "$CONF" rowwise --sample "$ROWWISE" "feed:$ROWS:$HOT_SHARD" | field rows_per_s)
    clean
    drain "$CONF" "$ROWS" "" "feed:$ROWS:$HOT_SHARD"
    drain_rate=$DRAIN_RATE hot_drain_rate=$DRAIN_RATE
    record hot-shard "$run" "$ROWS creates on shard $HOT_SHARD, end to end, 1 client (rows/s)" "$e2e_rate" \
        "the same 500-row INSERTs sent directly, 1 connection" "$direct" "≥ 0.9" "$waits 429 waits; $cpu"
    record hot-shard-bwctl "$run" "the same feed as a JSON-lines file through bwctl submit, from the command's start (rows/s)" \
        "$user_rate" "the same 500-row INSERTs sent directly, 1 connection" "$direct" "≥ 0.9"
    record bwctl-vs-hot-shard "$run" "the bwctl submit figure above (rows/s)" "$user_rate" \
        "the hot-shard figure: bw-workload's protobuf requests, the same run" "$e2e_rate" "≥ 0.8"
    record hot-shard-drain "$run" "the same from a backlog: the consumer alone (rows/s)" "$drain_rate" \
        "the same 500-row INSERTs sent directly, 1 connection" "$direct" "≥ 0.9"
    record hot-shard-vs-rowwise "$run" "$ROWS creates on shard $HOT_SHARD, end to end (rows/s)" "$e2e_rate" \
        "one autocommit INSERT per row, 1 connection ($ROWWISE-row sample)" "$rowwise" "≥ 25"
    # what the machine allows the row above: its round trip sets one row's cost, the server's
    # CPU a 500-row statement's (the brief measured 147k vs 5k rows/s: 29)
    record ceiling-vs-rowwise "$run" "the same 500-row INSERTs sent directly, 1 connection (rows/s)" "$direct" \
        "one autocommit INSERT per row, 1 connection ($ROWWISE-row sample)" "$rowwise" "none: the bound on hot-shard-vs-rowwise"
    record array-bound "$run" "direct array-bound INSERT (mysql_stmt, STMT_ATTR_ARRAY_SIZE=500), 1 connection" \
        "$array" "direct 500-row text INSERTs, 1 connection" "$direct" "≥ 1.2"

    # spam cleanup: deletes by id of every 10th pin of a feed inserted directly
    feed=$((DELETES * 10))
    clean
    cleanup_feed "$feed"
    : >"$WORK/submit.log"
    e2e_rate=$(e2e "$CONF" "$DELETES" "feed:$feed:$HOT_SHARD" "cleanup:$feed:$HOT_SHARD")
    cpu=$(cat "$WORK/cpu.note")
    clean
    cleanup_feed "$feed"
    direct=$(bench "$CONF" delete --conns 1 "cleanup:$feed:$HOT_SHARD" | field rows_per_s)
    record cleanup "$run" "$DELETES deletes by id on shard $HOT_SHARD, end to end, 1 client (rows/s)" "$e2e_rate" \
        "DELETE … WHERE id IN (1,000 ids) directly, 1 connection" "$direct" "≥ 0.9" "$cpu"
    clean
    cleanup_feed "$feed"
    drain "$CONF" "$DELETES" "feed:$feed:$HOT_SHARD" "cleanup:$feed:$HOT_SHARD"
    drain_rate=$DRAIN_RATE
    record cleanup-drain "$run" "the same from a backlog: the consumer alone (rows/s)" "$drain_rate" \
        "DELETE … WHERE id IN (1,000 ids) directly, 1 connection" "$direct" "≥ 0.9"

    # spread: creates over every shard of both servers
    clean
    e2e_rate=$(e2e "$CONF" "$ROWS" "" "spread:$ROWS")
    cpu=$(cat "$WORK/cpu.note")
    clean
    c0=($(cpu_ticks))
    direct=$(bench "$CONF" insert --conns "$WORKERS" "spread:$ROWS" | field rows_per_s)
    c1=($(cpu_ticks))
    cpu="$cpu; direct: MariaDB $(calc "(${c1[0]} - ${c0[0]}) / $TICK" 2) CPU s over $(calc "$ROWS / $direct" 2) s"
    record spread "$run" "$ROWS creates over 8 shards on 2 servers, end to end (rows/s)" "$e2e_rate" \
        "the same 500-row INSERTs directly, $WORKERS connections (= consumer.workers)" "$direct" "≥ 0.9" "$cpu"
    clean
    DRAIN_ALL=1 drain "$CONF" "$ROWS" "" "spread:$ROWS"
    drain_rate=$DRAIN_RATE
    record spread-drain "$run" "the same from a backlog: the consumer alone (rows/s)" "$drain_rate" \
        "the same 500-row INSERTs directly, $WORKERS connections (= consumer.workers)" "$direct" "≥ 0.9"

    # online probe on a cold shard of the hot shard's server, idle and busy, three times:
    # while the hot shard drains a backlog unthrottled, throttled to BENCH_PROBE_RATE
    # statements/s, and with the adaptive throttle on (Threads_running over
    # BENCH_ADAPTIVE_THREADS, no rate set by hand), probed once it had
    # BENCH_ADAPTIVE_SETTLE s to find its rate.
    # The backlog is queued while the shard is paused, so the probe sees the drain, not the
    # client, proxy and broker taking the feed in on the same cores. Idle and busy take
    # turns, BENCH_PROBE_SLICES slices of each (the hot shard paused, then resumed), and
    # each p99 is over its slices' pooled samples: a writeback or a neighbour on the host
    # then falls on both sides of the ratio, where one idle probe before one busy probe
    # measured idle p99s from 1.1 to 5.4 ms in one run.
    busy_rate=
    # the unthrottled probe must end before its backlog: a host whose hot shard drained
    # 230k rows/s emptied 1.5M rows before the probe was over. At least what this run's
    # hot-shard-drain rate applies in twice the busy slices' time (pauses and resumes
    # between slices drain too); a BENCH_PROBE_ROWS given is taken as it is.
    probe_rows=$PROBE_ROWS
    [ "$SMOKE" = 1 ] || [ -n "${BENCH_PROBE_ROWS:-}" ] ||
        probe_rows=$(calc "2 * $PROBE_SECONDS * $hot_drain_rate > $PROBE_ROWS ? int(2 * $PROBE_SECONDS * $hot_drain_rate / 100000 + 1) * 100000 : $PROBE_ROWS" 0)
    for mode in busy throttled adaptive; do
        clean
        "$BIN/bwctl" -c "$CONF" pause "$HOT_SHARD" >/dev/null
        [ "$mode" = throttled ] && "$BIN/bwctl" -c "$CONF" set-rate "$HOT_SHARD" "$PROBE_RATE" >/dev/null
        sleep 1 # the pause and the rate reach the consumer through the control topic
        submit "$CONF" "feed:$probe_rows:$HOT_SHARD"
        sync # the backlog's broker log and the last case's pages on disk: no writeback under either probe
        settle # the probe starts on quiet servers
        # its baseline right before, backlog queued: a page-cache writeback or a neighbour
        # on the host then weighs on both probes of the ratio, not on one
        rm -f "$WORK/idle.samples" "$WORK/busy.samples"
        idle_cpu=(0 0 0 0) busy_cpu=(0 0 0 0) busy_rows=0 busy_s=0 before=$(applied_rows)
        for ((slice = 0; slice < PROBE_SLICES; slice++)); do
            if [ "$slice" -gt 0 ]; then # paused again, once the consumer has it and its last statement ended
                [ "$mode" = adaptive ] && throttle_mode off
                "$BIN/bwctl" -c "$CONF" pause "$HOT_SHARD" >/dev/null
                hot_paused() { [ "$(shard_metric bulkwrite_consumer_paused "$HOT_SHARD")" = 1 ]; }
                wait_for 30 hot_paused || die "the hot shard did not pause"
                b=$(batches)
                while sleep 0.2 && [ "$(batches)" != "$b" ]; do b=$(batches); done
            fi
            c0=($(cpu_ticks))
            bench "$CONF" probe --shard "$COLD_SHARD" --seconds "$SLICE_SECONDS" --samples "$WORK/idle.samples" >/dev/null
            c1=($(cpu_ticks))
            # the adaptive throttle is on for the busy slices only: during an idle one the
            # probe's own traffic over the threshold would start a bout of trouble for the
            # paused shard, and the next busy slice would begin from wherever that left it
            [ "$mode" = adaptive ] && throttle_mode on
            b=$(batches)
            "$BIN/bwctl" -c "$CONF" resume "$HOT_SHARD" >/dev/null
            # (a drain already over, which the note reports, has no batch to wait for)
            [ $(($(applied_rows) - before)) -ge "$probe_rows" ] || wait_batch_change "$HOT_SHARD" 60 "$b" >/dev/null
            [ "$mode" = adaptive ] && sleep "$ADAPTIVE_SETTLE"
            probe_from=$(applied_rows)
            t0=$(now)
            c2=($(cpu_ticks))
            bench "$CONF" probe --shard "$COLD_SHARD" --seconds "$SLICE_SECONDS" --samples "$WORK/busy.samples" >/dev/null
            c3=($(cpu_ticks))
            busy_rows=$((busy_rows + $(applied_rows) - probe_from))
            busy_s=$(calc "$busy_s + $(now) - $t0" 3)
            for i in 0 1 2 3; do
                idle_cpu[i]=$((idle_cpu[i] + c1[i] - c0[i])) busy_cpu[i]=$((busy_cpu[i] + c3[i] - c2[i]))
            done
        done
        idle=$(pooled_p99 "$WORK/idle.samples") p99=$(pooled_p99 "$WORK/busy.samples")
        lag=$(shard_metric bulkwrite_consumer_lag_messages "$HOT_SHARD")
        probe_rate=$(calc "$busy_rows / $busy_s" 0) # the hot shard's rows/s during the busy slices
        drained=$(($(applied_rows) - before))
        throttle_note=
        [ "$mode" = adaptive ] && throttle_note="; the throttle then: $(curl -sf "http://127.0.0.1:$C1/metrics" |
            awk -v k="bulkwrite_consumer_throttle_rate{shard=\"$HOT_SHARD\"}" \
                -v t="bulkwrite_consumer_signal{server=\"mysql-a\",signal=\"threads_running\"}" \
                '$1 == k {r = $2} $1 == t {v = $2} END {printf "%s statements/s, threads_running %s", r, v}')"
        [ "$mode" = adaptive ] && throttle_mode off
        [ "$mode" = throttled ] && "$BIN/bwctl" -c "$CONF" set-rate "$HOT_SHARD" 0 >/dev/null
        wait_rows "$before" "$probe_rows" 600 >/dev/null
        verify "$CONF" "feed:$probe_rows:$HOT_SHARD"
        [ "$mode" = throttled ] && "$BIN/bwctl" -c "$CONF" set-rate "$HOT_SHARD" default >/dev/null
        what="hot shard draining, no limit"
        [ "$mode" = throttled ] && what="hot shard throttled to $PROBE_RATE statements/s"
        [ "$mode" = adaptive ] && what="adaptive throttle on (threads_running $ADAPTIVE_THREADS, mean of $ADAPTIVE_SAMPLES reads, quiet_ms $ADAPTIVE_QUIET_MS, increase $ADAPTIVE_INCREASE), no rate set by hand"
        cpu=
        for i in 0 1 2 3; do # where the cores went during the probes: idle -> busy slices
            cpu="$cpu${cpu:+, }$(echo MariaDB Kafka proxy consumer | cut -d' ' -f$((i + 1))) $(calc "${idle_cpu[i]} / $TICK" 2) -> $(calc "${busy_cpu[i]} / $TICK" 2)"
        done
        busy_note="$drained of $probe_rows rows applied by the probe's end, lag then $lag messages; the hot shard $probe_rate rows/s in the busy slices$throttle_note; CPU s during the idle -> busy slices: $cpu"
        [ "$drained" -lt "$probe_rows" ] || busy_note="$busy_note: THE DRAIN ENDED BEFORE THE PROBE (raise BENCH_PROBE_ROWS)"
        record "online-p99-$mode" "$run" "online p99 on shard $COLD_SHARD (same server), $what (ms)" "$p99" \
            "the same probe, server idle (ms)" "$idle" "≤ 1.5" "$busy_note"
        [ "$mode" = busy ] && busy_rate=$probe_rate
        [ "$mode" = adaptive ] && record "hot-shard-adaptive" "$run" \
            "the hot shard's rows/s during the adaptive probe" "$probe_rate" \
            "its rows/s during the unthrottled probe (online-p99-busy)" "$busy_rate" "as high as the p99 allows"
    done
done
clean
[ "$(refused_rows)" = 0 ] || die "the shards refused $(refused_rows) ops in stack A"

# ---- stack D: counters, on stack A's servers ---------------------------------------------------

# restart_applier CONF: the consumer again, with another configuration (the proxy stays:
# coalesce_increments is the consumer's alone)
restart_applier() {
    stop_pid "$CONSUMER_PID"
    forget_pids "$CONSUMER_PID"
    start_applier "$1"
}
# counter_case CONF: the counter job end to end on a fresh feed of its 1,000 pins; prints
# "OPS_PER_S STATEMENTS" (statements: the hot shard's, for the job)
counter_case() {
    local s0 rate
    clean
    cleanup_feed 1000
    s0=$(shard_metric bulkwrite_consumer_statements_total "$HOT_SHARD")
    rate=$(e2e "$1" "$COUNTERS" "feed:1000:$HOT_SHARD" "counter:$COUNTERS:$HOT_SHARD")
    echo "$rate $(($(shard_metric bulkwrite_consumer_statements_total "$HOT_SHARD") - s0))"
}
CONF_UNSUMMED=$WORK/bulkwrite-unsummed.conf
cp "$CONF" "$CONF_UNSUMMED" && "$BIN/bwctl" config-set "$CONF_UNSUMMED" 'object_types[0].coalesce_increments=false' ||
    exit 1
[ "$(runs_of D)" -gt 0 ] && note "stack D: $COUNTERS like_count increments over 1,000 pins of shard $HOT_SHARD; $RUNS run(s)"
for run in $(seq 1 "$(runs_of D)"); do
    out=$(counter_case "$CONF")
    read -r summed summed_st <<<"$out"
    restart_applier "$CONF_UNSUMMED"
    out=$(counter_case "$CONF_UNSUMMED")
    read -r unsummed unsummed_st <<<"$out"
    restart_applier "$CONF"
    record counter "$run" "$COUNTERS increments of 1,000 pins on shard $HOT_SHARD, end to end, summed by the consumer (ops/s)" \
        "$summed" "the same with coalesce_increments = false" "$unsummed" "≥ 2" \
        "hot-shard statements: $summed_st summed, $unsummed_st not"
done
[ "$(refused_rows)" = 0 ] || die "the shards refused $(refused_rows) ops in stack D"

# ---- stack B: 2-row batches ---------------------------------------------------------------------

stop_pid "$CONSUMER_PID"
stop_pid "$PROXY_PID"
CONF_SMALL=$WORK/bulkwrite-small.conf
cp "$CONF" "$CONF_SMALL" && "$BIN/bwctl" config-set "$CONF_SMALL" 'object_types[0].batch_size.create=2' || exit 1
start_proxy "$CONF_SMALL"
start_applier "$CONF_SMALL"
note "stack B: 2-row create batches; $RUNS run(s)"
for run in $(seq 1 "$(runs_of B)"); do
    # one shard's most statements/s: a paused shard gets SMALL batches, then drains unlimited
    rows=$((SMALL * 2))
    clean
    "$BIN/bwctl" -c "$CONF_SMALL" pause "$HOT_SHARD" >/dev/null
    sleep 1 # the pause reaches the consumer through the control topic
    before=$(applied_rows)
    submit "$CONF_SMALL" "feed:$rows:$HOT_SHARD"
    b=$(batches)
    "$BIN/bwctl" -c "$CONF_SMALL" resume "$HOT_SHARD" >/dev/null
    # timed from the first batch seen applied (the resume takes a moment to arrive)
    read -r t0 b0 < <(wait_batch_change "$HOT_SHARD" 60 "$b")
    t1=$(wait_rows "$before" "$rows" 600)
    b1=$(batches)
    verify "$CONF_SMALL" "feed:$rows:$HOT_SHARD"
    most=$(calc "$b1 > $b0 ? ($b1 - $b0) / ($t1 - $t0) : 0" 0) # 0: too few batches to time (smoke)
    clean
    direct=$(bench "$CONF_SMALL" insert --conns 1 --batch 2 "feed:$rows:$HOT_SHARD" | field statements_per_s)
    record small-batches "$run" "one shard's statements/s, 2-row batches from a backlog, no limit" "$most" \
        "the same 2-row INSERTs directly, 1 connection (statements/s)" "$direct" "≥ 2,000 statements/s"

    # rate precision: the shard set to RATE, fed for the window, measured between two
    # batches (no quantisation) after the limiter's 1 s burst is spent
    for rate in $RATES; do
        clean
        "$BIN/bwctl" -c "$CONF_SMALL" set-rate "$HOT_SHARD" "$rate" >/dev/null
        sleep 1
        # enough batches for the window at the rate, or at what the shard took above (the
        # smoke's backlog is too small to time: 0, and then the rate decides)
        feed=$(calc "$most > 0 ? ($most > 50 ? $most : 50) * 1.2 : $rate" 0)
        # the smoke's sample of "most" is one short drain on a busy machine: feed at the rate
        [ "$SMOKE" = 0 ] || feed=$rate
        cap=$(calc "($rate < $feed ? $rate : $feed) * ($WARMUP + $RATE_SECONDS + 2)" 0)
        rows=$(((cap < 5 ? 5 : cap) * 2))
        before=$(applied_rows)
        b=$(batches)
        submit "$CONF_SMALL" "feed:$rows:$HOT_SHARD" &
        sub=$!
        pids+=($sub)
        wait_batch_change "$HOT_SHARD" 60 "$b" >/dev/null
        sleep "$WARMUP"
        dry=
        read -r t0 b0 dry < <(wait_batch_change "$HOT_SHARD" 10 "" dry)
        early=$dry # the backlog was gone before the window: no measure, said in the row's note
        if [ -z "$early" ]; then
            sleep "$(calc "$RATE_SECONDS - 0.3" 2)"
            dry=
            read -r t1 b1 dry < <(wait_batch_change "$HOT_SHARD" 3 "$(batches)" dry)
        else
            t1=$t0 b1=$b0
        fi
        lag=$(shard_metric bulkwrite_consumer_lag_messages "$HOT_SHARD")
        [ -z "$dry" ] || lag=0
        "$BIN/bwctl" -c "$CONF_SMALL" set-rate "$HOT_SHARD" 0 >/dev/null
        wait "$sub" || die "the rate case's feed failed"
        wait_rows "$before" "$rows" 600 >/dev/null
        verify "$CONF_SMALL" "feed:$rows:$HOT_SHARD"
        measured=$(calc "$t1 > $t0 ? ($b1 - $b0) / ($t1 - $t0) : 0" 2)
        rnote="$((b1 - b0)) batches in $(calc "$t1 - $t0" 2) s"
        [ "$lag" -gt 0 ] || rnote="$rnote; BACKLOG RAN DRY (the shard may have been starved, not limited)"
        [ -z "$early" ] || rnote="BACKLOG RAN DRY BEFORE THE WINDOW: not measured (raise BENCH_RATE_SECONDS or the feed)"
        record "rate-$rate" "$run" "shard $HOT_SHARD set to $rate statements/s: applied statements (2-row batches)/s" "$measured" \
            "the configured rate" "$rate" "1 ± 0.02" "$rnote"
    done
    "$BIN/bwctl" -c "$CONF_SMALL" set-rate "$HOT_SHARD" default >/dev/null
done
clean
[ "$(refused_rows)" = 0 ] || die "the shards refused $(refused_rows) ops in stack B"
stop_pid "$CONSUMER_PID"
stop_pid "$PROXY_PID"

# ---- stack C: the proxy alone ----------------------------------------------------------------------

# 128 shards so the unapplied backlog (the proxy admits 4 MiB a shard on the embedded Kafka) never fills
CONF_PROXY=$WORK/bulkwrite-proxy.conf
cp "$CONF" "$CONF_PROXY" && "$BIN/bwctl" config-set "$CONF_PROXY" shards.count=$PROXY_SHARDS \
    "shards.servers[0].last_shard=$((PROXY_SHARDS / 2 - 1))" "shards.servers[1].first_shard=$((PROXY_SHARDS / 2))" \
    "shards.servers[1].last_shard=$((PROXY_SHARDS - 1))" kafka.consumer_group=bw-bench-proxy \
    kafka.topic=bulkwrite.bench-proxy proxy.produce_timeout_ms=30000 kafka.replication_factor=1 \
    kafka.min_insync_replicas=1 || exit 1

# proxy_case CLIENTS FORMAT: ops/s accepted by the proxy from CLIENTS submitters at once.
# The clients encode their requests first and all start sending at one agreed moment
# (--start-at): the time is the proxy's, from that moment to the last answer, not the
# clients' encoding on the same two cores.
proxy_case() {
    local c=$1 fmt=$2 per=$((PROXY_OPS / $1)) i start end bg=() flag=() accepted
    [ "$fmt" = protobuf ] && flag=(--protobuf)
    start=$(($(date +%s%3N) + BENCH_PROXY_LEAD_MS))
    for ((i = 0; i < c; i++)); do
        "$BIN/bw-workload" -c "$CONF_PROXY" submit --url "$URL" "${flag[@]}" --start-at "$start" "spread:$per" \
            2>"$WORK/client-$i.log" &
        bg+=($!)
        pids+=($!)
    done
    for i in "${!bg[@]}"; do wait "${bg[i]}" || { cat "$WORK/client-$i.log" >&2; die "proxy client $i failed"; }; done
    accepted=$(cat "$WORK"/client-*.log | awk '/^submit: [0-9]+ ops sent/ {s += $5} END {print s + 0}')
    end=$(cat "$WORK"/client-*.log | awk '/^submit: sent from/ {if ($6 > e) e = $6} END {print e + 0}')
    if grep -q "after --start-at" "$WORK"/client-*.log; then # encoding in the timing: the number is low
        die "proxy clients were still encoding at their start (raise BENCH_PROXY_LEAD_MS): $(grep -h "after --start-at" "$WORK"/client-*.log | head -1)"
    fi
    rm -f "$WORK"/client-*.log
    [ "$accepted" -eq $((per * c)) ] || die "the proxy accepted $accepted of $((per * c)) ops"
    calc "$accepted / (($end - $start) / 1000)" 0
}
# proxy_warm_up: untimed requests to every shard (a new topic's partitions get their
# leaders, and every producer of the pool its metadata, before anything is timed)
proxy_warm_up() {
    "$BIN/bw-workload" -c "$CONF_PROXY" submit --url "$URL" --protobuf --retry-for 120 "spread:$PROXY_SHARDS" \
        2>>"$WORK/submit.log" || die "the proxy's warm-up request failed (see $WORK/submit.log)"
    "$BIN/bw-workload" -c "$CONF_PROXY" submit --url "$URL" --protobuf "spread:$((PROXY_OPS / 12))" \
        2>>"$WORK/submit.log" || die "the proxy's warm-up requests failed (see $WORK/submit.log)"
}
# proxy_runs KAFKA_NAME BETWEEN: every client count in both formats, RUNS times, after a
# warm-up; BETWEEN is run before every run but the first
proxy_runs() {
    local run c pb json one
    proxy_warm_up
    for run in $(seq 1 "$(runs_of C)"); do
        [ "$run" = 1 ] || "$2"
        one=
        for c in $CLIENTS; do
            pb=$(proxy_case "$c" protobuf)
            json=$(proxy_case "$c" json)
            record "proxy-$1-json-$c" "$run" "proxy alone, $1 Kafka, JSON, $c client(s): accepted ops/s" "$json" \
                "protobuf, same clients" "$pb" "≥ 0.7"
            if [ -z "$one" ]; then one=$pb; one_c=$c; continue; fi
            record "proxy-$1-scale-$c" "$run" "proxy alone, $1 Kafka, protobuf, $c clients: accepted ops/s" "$pb" \
                "protobuf, $one_c client(s)" "$one" "grows with clients until the cores are busy (> 1)"
        done
    done
}

# embedded_proxy_stack: an empty embedded Kafka and the proxy on it. Each run gets its own:
# nothing consumes here, and on the embedded Kafka the proxy admits at most 4 MiB of
# unapplied batches a shard, which a run's 6 cases fill by half (6 x 300k ops of ~150
# bytes over 128 shards).
embedded_proxy_stack() {
    rm -f "$WORK/bootstrap-proxy"
    "$BIN/bw-kafka-embedded" -c "$CONF_PROXY" --bootstrap-file "$WORK/bootstrap-proxy" >>"$WORK/kafka-proxy.log" 2>&1 &
    EMBEDDED_PID=$!
    pids+=($!)
    wait_for 20 test -s "$WORK/bootstrap-proxy" || die "the embedded Kafka for the proxy case did not start"
    BROKERS=$(cat "$WORK/bootstrap-proxy")
    start_proxy "$CONF_PROXY"
}
embedded_proxy_afresh() {
    stop_pid "$PROXY_PID"
    stop_pid "$EMBEDDED_PID"
    forget_pids "$PROXY_PID" "$EMBEDDED_PID" # not signalled again at exit (their pids may be reused)
    embedded_proxy_stack
    proxy_warm_up
}
embedded_proxy_stack
note "stack C: the proxy alone, embedded Kafka (a new one each run), $PROXY_SHARDS shards"
proxy_runs embedded embedded_proxy_afresh

# proxy-pages-N: the same proxy's accepted ops/s (protobuf, PAGES_CLIENTS clients) with N
# pages of the SRE page open in headless chromium (test/browser/pages.mjs: polling every
# 3 s, one with a shard open, two on the jobs view) against none, on a fresh stack each
# run. A window sends PAGES_OPS ops (about 2 s: each page polls about once in it); which
# side goes first alternates by run, as the second window of a stack runs warmer. The
# browser shares the two cores with the clients, the proxy and Kafka.
PAGES=${BENCH_PAGES:-5} PAGES_CLIENTS=${BENCH_PAGES_CLIENTS:-4} PAGES_OPS=${BENCH_PAGES_OPS:-$((PROXY_OPS * 10 / 3))}
pages_open() {
    NODE_PATH=$NODE_MODULES BW_UI_URL="http://127.0.0.1:$PROXY/ui/" BW_PAGES=$PAGES node test/browser/pages.mjs >"$WORK/pages.log" 2>&1 &
    pages_pid=$!
    pids+=($!)
    wait_for 90 grep -q "^pages: $PAGES open" "$WORK/pages.log" || { cat "$WORK/pages.log" >&2; die "the pages did not open"; }
    sleep 3 # every page in its polling rhythm
}
pages_close() { stop_pid "$pages_pid"; forget_pids "$pages_pid"; }
# idle_cpu SECONDS: the proxy's CPU ms per second while nothing is sent (what polls cost it)
idle_cpu() {
    local t0 t1
    t0=$(proc_ticks "$PROXY_PID")
    sleep "$1"
    t1=$(proc_ticks "$PROXY_PID")
    calc "($t1 - $t0) * 1000 / $TICK / $1" 1
}
PAGES_IDLE_S=10
[ "$SMOKE" = 1 ] && PAGES_IDLE_S=2
if [ "$PAGES" -gt 0 ] && [ "$(runs_of C)" -gt 0 ]; then
    NODE_MODULES=$(scripts/install-browser.sh) || die "the browser for the proxy-pages case is not installed"
    note "stack C: the proxy alone, embedded Kafka, with $PAGES pages of /ui/ open and without, $PAGES_OPS ops a window"
    proxy_ops=$PROXY_OPS PROXY_OPS=$PAGES_OPS
    for run in $(seq 1 "$(runs_of C)"); do
        embedded_proxy_afresh
        if [ $((run % 2)) = 1 ]; then
            none=$(proxy_case "$PAGES_CLIENTS" protobuf)
            idle_none=$(idle_cpu "$PAGES_IDLE_S")
            pages_open
            open=$(proxy_case "$PAGES_CLIENTS" protobuf)
            idle_open=$(idle_cpu "$PAGES_IDLE_S")
            pages_close
        else
            pages_open
            open=$(proxy_case "$PAGES_CLIENTS" protobuf)
            idle_open=$(idle_cpu "$PAGES_IDLE_S")
            pages_close
            none=$(proxy_case "$PAGES_CLIENTS" protobuf)
            idle_none=$(idle_cpu "$PAGES_IDLE_S")
        fi
        record "proxy-pages-$PAGES" "$run" "proxy alone, embedded Kafka, protobuf, $PAGES_CLIENTS clients, $PAGES pages open: accepted ops/s" \
            "$open" "the same, no page open" "$none" "≥ 0.95" \
            "$([ $((run % 2)) = 1 ] && echo 'none first' || echo 'pages first'); the idle proxy's CPU: $idle_open ms/s with the pages, $idle_none without"
    done
    PROXY_OPS=$proxy_ops
fi
stop_pid "$PROXY_PID"
stop_pid "$EMBEDDED_PID"

if [ "$KAFKA_CASE" = 1 ]; then
    note "stack C: the proxy alone, real broker (scripts/kafka.sh)"
    if [ "$A_MODE" != kafka ]; then # else stack A's broker is still up (its own topic here)
        KAFKA_UP=1
        scripts/kafka.sh start "$WORK/kafka" "$KAFKA" >"$WORK/kafka-start.log" 2>&1 ||
            { cat "$WORK/kafka-start.log" >&2; die "the real broker did not start"; }
    fi
    BROKERS=127.0.0.1:$KAFKA
    start_proxy "$CONF_PROXY"
    proxy_runs real :
    stop_pid "$PROXY_PID"
fi

# ---- the table ------------------------------------------------------------------------------------------

# per case, in the order measured: medians of measured and baseline, min / median / max of the ratios
table() {
    awk -F'\t' 'NR > 1 {
        if (!($1 in n)) { order[++cases] = $1; mw[$1] = $3; bw[$1] = $5; tg[$1] = $7 }
        k = ++n[$1]; m[$1, k] = $4; b[$1, k] = $6; r[$1, k] = ($6 > 0 ? $4 / $6 : 0)
    }
    function med(a, c, k,   i, j, t, v) {
        for (i = 1; i <= k; i++) v[i] = a[c, i]
        for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        if (which == "min") return v[1]
        if (which == "max") return v[k]
        return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
    }
    function num(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.3g", x) }
    BEGIN {
        print "| case | measured | baseline | ratio min / median / max | target |"
        print "| --- | --- | --- | --- | --- |"
    }
    END {
        for (i = 1; i <= cases; i++) {
            c = order[i]; k = n[c]
            which = "med"; mm = med(m, c, k); bm = med(b, c, k); rmed = med(r, c, k)
            which = "min"; rmin = med(r, c, k)
            which = "max"; rmax = med(r, c, k)
            printf "| %s | %s: %s | %s: %s | %.3f / %.3f / %.3f | %s |\n", c, mw[c], num(mm), bw[c], num(bm), rmin, rmed, rmax, tg[c]
        }
    }' "$RAW"
}
{
    echo "# make bench results"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $RUNS run(s)$([ "$SMOKE" = 1 ] && echo ', SMOKE sizes: not a measurement'); $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), Linux $(uname -r), MariaDB $(/usr/sbin/mariadbd --version 2>/dev/null | awk '{print $3}')"
    echo
    echo "Measured and baseline are medians over the runs; each run's ratio is measured / baseline from the same run."
    echo
    table
    echo
    echo "## Raw numbers"
    echo
    echo '```'
    column -t -s $'\t' "$RAW" 2>/dev/null || cat "$RAW"
    echo '```'
} >"$OUT/results.md"
echo
table
echo
echo "bench: $(($(wc -l <"$RAW") - 1)) measurements; table and raw numbers in $OUT/results.md"
