#!/usr/bin/env bash
# Fault tests: faults injected while real jobs run; each ends by comparing every shard
# with the expected state row by row (nothing lost, nothing applied twice).
#
#   test/fault.sh embedded|kafka
#
# (a) kill -9 of a consumer at random moments, 10 times, during a 222,000-op job that
#     includes non-idempotent increments.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: test/fault.sh embedded|kafka}
. test/lib.sh
bw_stack_start fault "$MODE"

# Slow every shard to 3 batches/s so the job is still being applied while consumers die,
# and let the group notice a dead member quickly.
sed -i -e "s/default_rate = 0.0;/default_rate = 3.0;/" -e "s/session.timeout.ms=10000/session.timeout.ms=6000/" "$CONF"

declare -A consumer_pid
for port in $C1 $C2; do start_consumer $port; consumer_pid[$port]=$LAST_PID; done
check "two consumers join the group" wait_for 60 curl -sf "http://127.0.0.1:$C1/readyz"

JOBS=(spread:200000 feed:20000:$HOT like:20000:$HOT)
# the increments go in small requests: many small messages, coalesced or replayed
( "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --protobuf --per-request 2000 spread:200000 feed:20000:$HOT &&
  "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --per-request 20 like:20000:$HOT ) >"$WORK/submit.log" 2>&1 &
submitter=$!

rows_now() {
    local n=0
    for port in $DB_A $DB_B; do
        for db in $(mariadb -h127.0.0.1 -P$port -uroot -N -e "SHOW DATABASES LIKE 'db0%'"); do
            n=$((n + $(mariadb -h127.0.0.1 -P$port -uroot -N -e "SELECT COUNT(*) FROM $db.pins")))
        done
    done
    echo $n
}

# Each kill waits until the shards are making progress again (the group has rebalanced
# after the last one), then strikes at a random moment, so that it lands mid-batch.
kills=0 mid_job=0 last=0
progressed() { [ "$(rows_now)" -ge $((last + 1500)) ]; }
for i in $(seq 1 10); do
    wait_for 60 progressed
    sleep "$(awk -v s=$RANDOM 'BEGIN {printf "%.2f", (s % 1000) / 1000}')"
    port=$([ $((i % 2)) = 0 ] && echo $C1 || echo $C2)
    rows=$(rows_now) last=$rows
    kill -9 "${consumer_pid[$port]}" && kills=$((kills + 1))
    wait "${consumer_pid[$port]}" 2>/dev/null
    [ "$rows" -lt 220000 ] && mid_job=$((mid_job + 1))
    echo "# kill -9 consumer on $port with $rows rows in place"
    start_consumer $port
    consumer_pid[$port]=$LAST_PID
done
check "the job was submitted in full" wait "$submitter"
check "10 consumers were killed with kill -9, at least 5 of them mid-job ($kills, $mid_job)" \
    test "$kills" -eq 10 -a "$mid_job" -ge 5
check "after the kills every shard equals the expected state row by row" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 400 "${JOBS[@]}"
replayed=$(for port in $C1 $C2; do curl -sf "http://127.0.0.1:$port/metrics"; done |
    awk '/^bulkwrite_consumer_messages_replayed_total/ {s += $2} END {print s + 0}')
echo "# messages read again and skipped by the restarted consumers: $replayed"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
