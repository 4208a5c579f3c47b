#!/usr/bin/env bash
# The adaptive throttle against real MariaDB: mysql-b has a replica (replication on
# loopback, scripts/mariadb.sh start-replica), the consumer writes the heartbeat on
# mysql-b and reads it on the replica every 500 ms; Threads_running is read on both.
#
#   test/tiers/throttle.sh embedded|kafka
#
#   1. the replica's SQL thread stopped during a job: shard 6's rate falls within seconds,
#      GET /v1/check/6 (429 while throttled, 200 after) and the log name replication lag
#      with its value; a shard of mysql-a runs on; pinned by hand (bwctl set-rate --pin)
#      it runs at its cap, unpinned it is throttled again; the SQL thread started: the
#      rate climbs back to its cap;
#   2. 6 sessions on mysql-a busy half the time: threads_running reads a fraction (the
#      mean of its reads an interval); 12 sessions of SELECT SLEEP(): its shards throttled
#      for threads_running, then over the critical level for critical_ms: paused, a job
#      for shard 2 waits in Kafka; they end: every shard resumes by itself and the job is
#      applied;
#   3. the heartbeat unreadable on the replica (its SELECT revoked): shard 6 "unknown" at
#      the floor, BulkwriteThrottleSignalUnknown fires; the grant back: it resolves; with
#      REPLICA MONITOR granted the lag comes from Seconds_Behind_Master instead, and its
#      NULL (SQL thread stopped) is unknown again;
#   4. dry_run (SIGHUP): the SQL thread stopped again: throttled in GET /v1/check and the
#      metrics, the rate in force unchanged;
# then every row of every job is compared, row by row.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/throttle.sh embedded|kafka}
. test/lib.sh
CAP=100 # shard 6's rate: the throttle's cap there

BW_STACK_PRIMARY=1 # mysql-a and mysql-b keep a binlog from their first statement
bw_stack_conf() {
    "$BIN/bwctl" config-set "$1" throttle.mode=on throttle.interval_ms=500 throttle.stale_ms=3000 throttle.quiet_ms=1000 \
        throttle.threads_running=8.0 throttle.threads_running_critical=11.0 throttle.critical_ms=2000 \
        "shards.rate_overrides=( { shard = $HOT; rate = $HOT_RATE.0; }, { shard = 6; rate = $CAP.0; } )" \
        "shards.servers[1].replicas=[ \"127.0.0.1:$DB_R\" ]" || exit 1
}
bw_stack_start throttle "$MODE"
check "a replica of mysql-b replicates from its first binlog (shards and users included)" \
    start_replica mysql-b-replica $DB_R $DB_B
check "... and has caught up with the users (the consumer reads it as bw_consumer)" wait_for 20 eval \
    '[ "$(mariadb -h127.0.0.1 -P$DB_R -uroot -N -e "SELECT COUNT(*) FROM mysql.user WHERE user = \"bw_consumer\"")" -ge 1 ]'
start_consumer $C1
check "the consumer joins" wait_for 60 curl -sf "http://127.0.0.1:$C1/readyz"
check "its heartbeat reaches the replica" wait_for 10 eval \
    '[ "$(mariadb -h127.0.0.1 -P$DB_R -uroot -N -e "SELECT COUNT(*) FROM db00004.bw_heartbeat" 2>/dev/null)" = 1 ]'
URL=http://127.0.0.1:$PROXY/v1/batches
metric() { bw_metric $C1 "$1"; }
rate_of() { metric "bulkwrite_consumer_rate_batches_per_second{shard=\"$1\"}"; }
state_is() { [ "$(metric "bulkwrite_consumer_throttle_state{shard=\"$1\",state=\"$2\"}")" = 1 ]; }
check_json() { # check_json SHARD JQ: GET /v1/check/SHARD's body passes JQ, its status 429 if paused or throttled, else 200
    local code
    code=$(curl -s -o "$WORK/check-$1.json" -w '%{http_code}' "http://127.0.0.1:$PROXY/v1/check/$1") &&
        jq -e --argjson code "$code" "($2) and \$code == (if .paused or .throttled then 429 else 200 end)" \
            "$WORK/check-$1.json" >/dev/null
}
check_code() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PROXY/v1/check/$1"; }
rate_at_most() { local r; r=$(rate_of "$1"); [ -n "$r" ] && awk -v r="$r" -v m="$2" 'BEGIN {exit !(r > 0 && r <= m)}'; }
lag_signal() { metric 'bulkwrite_consumer_signal{server="mysql-b",signal="replication_lag_ms"}'; }

check "every shard starts running, shard 6 at its cap ($CAP)" wait_for 20 eval 'state_is 6 running && state_is 1 running && [ "$(rate_of 6)" = $CAP ]'
check "... and none was unknown on the way (the first reads are waited for), no alert" \
    bash -c "! grep -q -e 'throttle: .* -> unknown' -e 'ALERT BulkwriteThrottleSignalUnknown' '$WORK/consumer-$C1.log'"
check "the lag reads under 250 ms while the replica keeps up" \
    wait_for 10 eval 'awk -v l="$(lag_signal)" "BEGIN {exit !(l != \"\" && l >= 0 && l < 250)}"'
echo "# lag while the replica keeps up: $(lag_signal) ms"
check "a job for shard 6 and one for shard 1 are accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" feed:4000:6 feed:4000:1

# ---- 1. replication lag ---------------------------------------------------------------------
scripts/mariadb.sh replica-sql "$WORK/mysql-b-replica" stop >/dev/null
t0=$(date +%s.%N)
check "the replica's SQL thread stopped: shard 6 is throttled for replication lag within 10 s" \
    wait_for 10 check_json 6 '.throttled and .throttle.signal.name == "replication_lag_ms" and .throttle.signal.value > 1000'
check "... and its rate falls to a quarter of its cap or less within 10 s more" wait_for 10 rate_at_most 6 $((CAP / 4))
check "... GET /v1/check/6 answers 429 (curl -f fails) while it is throttled" \
    eval '[ "$(check_code 6)" = 429 ] && ! curl -sf -o /dev/null "http://127.0.0.1:$PROXY/v1/check/6"'
echo "# after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s: rate $(rate_of 6), $(jq -c .throttle.reason "$WORK/check-6.json")"
check "the log says why, with the value" grep -q 'throttle: running -> throttled: replication_lag_ms [0-9.]* over its threshold 1000' "$WORK/consumer-$C1.log"
check "GET /v1/shards and bwctl shards show it" bash -c "
    curl -sf http://127.0.0.1:$PROXY/v1/shards | jq -e '.shards[6].consumer.throttle.state == \"throttled\"' >/dev/null &&
    '$BIN/bwctl' -c '$CONF' shards | awk '\$1 == 6 && \$11 ~ /^throttled\\(replication_lag_ms=/ {ok = 1} END {exit !ok}'"
check "shard 1 (mysql-a, no replica) runs on, unthrottled" state_is 1 running
check "a job for shard 7 (mysql-b too) is accepted while shard 6 is throttled" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" feed:2000:7
check "bwctl set-rate --pin: shard 6 held at $CAP by hand while the lag lasts" \
    "$BIN/bwctl" -c "$CONF" set-rate 6 $CAP --pin --reason "throttle test: pinned"
check "... it runs at its cap within 10 s, the reason says pinned" wait_for 10 eval \
    '[ "$(rate_of 6)" = $CAP ] && check_json 6 ".throttle.state == \"running\" and (.throttle.reason | test(\"pinned by an operator\"))"'
check "... bwctl shards shows it pinned" bash -c "'$BIN/bwctl' -c '$CONF' shards | awk '\$1 == 6 && \$11 == \"pinned@$CAP\" {ok = 1} END {exit !ok}'"
check "... and the lag is still over its threshold" awk -v l="$(lag_signal)" 'BEGIN {exit !(l > 1000)}'
check "bwctl set-rate --unpin: the throttle takes shard 6 back down within 10 s" \
    "$BIN/bwctl" -c "$CONF" set-rate 6 --unpin --reason "throttle test: unpinned"
check "... throttled for replication lag again" wait_for 10 eval \
    'check_json 6 ".throttle.state == \"throttled\"" && rate_at_most 6 $((CAP / 2))'
scripts/mariadb.sh replica-sql "$WORK/mysql-b-replica" start >/dev/null
check "the SQL thread started: shard 6 runs at its cap again within 30 s" \
    wait_for 30 eval 'state_is 6 running && [ "$(rate_of 6)" = $CAP ]'
check "the log shows the climb back" grep -q 'throttle: throttled -> running' "$WORK/consumer-$C1.log"
check "... GET /v1/check/6 answers 200 again once it runs" wait_for 10 eval '[ "$(check_code 6)" = 200 ]'

# ---- 2. Threads_running ---------------------------------------------------------------------
# sessions busy half the time: the signal is the mean of threads_running_samples (4) reads
# an interval, so it reads fractions, where one read an interval would read whole numbers
running_signal() { metric 'bulkwrite_consumer_signal{server="mysql-a",signal="threads_running"}'; }
fractional() { awk -v v="$(running_signal)" 'BEGIN {exit !(v + 0 > 0 && v + 0 < 12 && v + 0 != int(v + 0))}'; }
part_timers=()
for i in $(seq 1 6); do
    (for _ in $(seq 1 60); do echo "SELECT SLEEP(0.05);"; sleep 0.1; done |
        mariadb -h127.0.0.1 -P$DB_A -uroot -N >/dev/null 2>&1) &
    part_timers+=($!)
done
check "6 sessions on mysql-a busy half the time: threads_running reads a fraction (the mean of its reads)" \
    wait_for 5 fractional
echo "# threads_running then: $(running_signal)"
wait "${part_timers[@]}"
sleepers=()
for i in $(seq 1 12); do
    mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT SLEEP(20)" >/dev/null 2>&1 &
    sleepers+=($!)
done
check "12 sessions in SELECT SLEEP on mysql-a: its shards throttled for threads_running" \
    wait_for 8 check_json 1 '.throttled and .throttle.signal.name == "threads_running" and .throttle.signal.value > 8'
# (waited for: the proxy's view comes from the status topic, the rate from the consumer's
# metrics page, read a moment apart; on a loaded 2-core host one CI run read it too early)
check "... shard 1's rate is limited now (it was unlimited)" wait_for 5 rate_at_most 1 1000
check "... and mysql-b's shard 6 is not throttled" state_is 6 running
check "over the critical level (11) for critical_ms (2 s): shard 2 critical, paused by the throttle" \
    wait_for 8 eval 'state_is 2 critical && check_json 2 ".throttle.state == \"critical\" and (.throttle.reason | test(\"threads_running [0-9.]+ over its critical level 11: paused since\"))"'
statements() { metric "bulkwrite_consumer_statements_total{shard=\"$1\"}"; }
before=$(statements 2)
check "a job for shard 2 is accepted while it is paused" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" --jobs-out "$WORK/critical.jobs" feed:1000:2
throttle_named() { # the job's status says why shard 2 holds it back: the throttle, its signal and reason
    curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$(awk 'NR == 1 {print $1}' "$WORK/critical.jobs")" | tee "$WORK/critical-job.json" |
        jq -e '.shards[0] | .shard == 2 and .pending > 0 and .waits.kind == "throttled" and .waits.signal == "threads_running"
            and (.waits.reason | test("threads_running [0-9.]+ over its critical level 11: paused since"))
            and (.waits.detail | startswith("shard 2 is paused by the adaptive throttle: threads_running"))' >/dev/null
}
check "... its status says why it waits: kind throttled, signal threads_running, the throttle's reason" wait_for 5 throttle_named
check "... and waits in Kafka: shard 2's lag shows it within 10 s (the watermarks are read every second)" wait_for 10 eval \
    '[ "$(metric "bulkwrite_consumer_lag_messages{shard=\"2\"}")" -gt 0 ]'
check "... while shard 2 applies nothing" eval '[ "$(statements 2)" = "$before" ] && state_is 2 critical'
wait "${sleepers[@]}" 2>/dev/null
check "the sessions ended: shards 1 and 2 resume by themselves, running (unlimited) again within 30 s" \
    wait_for 30 eval 'state_is 1 running && [ "$(rate_of 1)" = 0 ] && state_is 2 running'
check "... and shard 2's job is applied (its lag back to 0)" \
    wait_for 30 eval '[ "$(metric "bulkwrite_consumer_lag_messages{shard=\"2\"}")" = 0 ]'
check "the log says why it paused and that it resumed" bash -c "grep -q 'shard=2 throttle: throttled -> critical: threads_running' '$WORK/consumer-$C1.log' && grep -q 'shard=2 throttle: critical -> throttled' '$WORK/consumer-$C1.log'"

# ---- 3. an unreadable heartbeat ----------------------------------------------------------------
ACCOUNT=$(mariadb -h127.0.0.1 -P$DB_R -uroot -N -e "SELECT CONCAT(\"'\", user, \"'@'\", host, \"'\") FROM mysql.user WHERE user = 'bw_consumer'")
mariadb -h127.0.0.1 -P$DB_R -uroot -e "REVOKE SELECT ON db00004.bw_heartbeat FROM $ACCOUNT"
check "the heartbeat unreadable on the replica: shard 6 unknown, at the floor (1), within 10 s" \
    wait_for 10 eval 'check_json 6 ".throttle.state == \"unknown\"" && [ "$(rate_of 6)" = 1 ]'
check "the reason says which signal and why" jq -e '.throttle.reason | test("replication_lag_ms unknown since .*denied")' "$WORK/check-6.json"
check "BulkwriteThrottleSignalUnknown fires for mysql-b" \
    wait_for 10 grep -q 'ALERT BulkwriteThrottleSignalUnknown firing for server mysql-b: replication_lag_ms: heartbeat on' "$WORK/consumer-$C1.log"
check "the signal reads NaN in the metrics" test "$(lag_signal)" = NaN
mariadb -h127.0.0.1 -P$DB_R -uroot -e "GRANT SELECT ON db00004.bw_heartbeat TO $ACCOUNT"
check "the grant back: the alert resolves and shard 6 climbs back to its cap" \
    wait_for 30 eval 'grep -q "ALERT BulkwriteThrottleSignalUnknown resolved for server mysql-b" "$WORK/consumer-$C1.log" && state_is 6 running && [ "$(rate_of 6)" = $CAP ]'

# ---- 3b. the Seconds_Behind_Master fallback ----------------------------------------------------
# with REPLICA MONITOR the consumer reads the replica's own lag when the heartbeat is gone:
# a number (running), and NULL once the SQL thread stops (unknown, never 0)
mariadb -h127.0.0.1 -P$DB_R -uroot -e "GRANT REPLICA MONITOR ON *.* TO $ACCOUNT; REVOKE SELECT ON db00004.bw_heartbeat FROM $ACCOUNT"
check "the heartbeat unreadable, REPLICA MONITOR granted: the lag comes from Seconds_Behind_Master (logged)" \
    wait_for 10 grep -q 'server mysql-b: the heartbeat on replica 127.0.0.1:'$DB_R' cannot be read (.*denied.*); replication lag from its Seconds_Behind_Master' "$WORK/consumer-$C1.log"
check "... a number, and shard 6 runs at its cap" wait_for 10 eval \
    'awk -v l="$(lag_signal)" "BEGIN {exit !(l != \"\" && l != \"NaN\" && l >= 0 && l < 1000)}" && state_is 6 running && [ "$(rate_of 6)" = $CAP ]'
scripts/mariadb.sh replica-sql "$WORK/mysql-b-replica" stop >/dev/null
check "the SQL thread stopped: Seconds_Behind_Master is NULL, so shard 6 is unknown (never 0) at the floor" wait_for 10 eval \
    'check_json 6 ".throttle.state == \"unknown\" and (.throttle.reason | test(\"Seconds_Behind_Master is NULL\"))" && [ "$(rate_of 6)" = 1 ]'
mariadb -h127.0.0.1 -P$DB_R -uroot -e "GRANT SELECT ON db00004.bw_heartbeat TO $ACCOUNT; REVOKE REPLICA MONITOR ON *.* FROM $ACCOUNT"
scripts/mariadb.sh replica-sql "$WORK/mysql-b-replica" start >/dev/null
check "the heartbeat readable again (logged) and the SQL thread started: shard 6 back at its cap" wait_for 30 eval \
    'grep -q "server mysql-b: the heartbeat on replica 127.0.0.1:$DB_R is read again" "$WORK/consumer-$C1.log" && state_is 6 running && [ "$(rate_of 6)" = $CAP ]'

# ---- 4. dry run -----------------------------------------------------------------------------------
"$BIN/bwctl" config-set "$CONF" throttle.mode=dry_run || exit 1
kill -HUP "$LAST_PID"
scripts/mariadb.sh replica-sql "$WORK/mysql-b-replica" stop >/dev/null
check "dry_run: shard 6's decision is reported (state throttled, dry_run) within 10 s, and to clients it is not throttled" \
    wait_for 10 check_json 6 '.throttle.state == "throttled" and .throttle.dry_run and (.throttled | not) and .throttle.signal.name == "replication_lag_ms"'
check "... its decided rate falls in the metrics" wait_for 10 eval 'awk -v r="$(metric "bulkwrite_consumer_throttle_rate{shard=\"6\"}")" "BEGIN {exit !(r != \"\" && r <= 25)}"'
check "... and the rate in force stays at its cap" test "$(rate_of 6)" = $CAP
check "... the log marks the decision as not applied" grep -q 'throttle: running -> throttled: .*(dry run: not applied)' "$WORK/consumer-$C1.log"
scripts/mariadb.sh replica-sql "$WORK/mysql-b-replica" start >/dev/null

check "every row of every job is in place" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:4000:6 feed:4000:1 feed:2000:7 feed:1000:2
check "the replica caught up with every row of mysql-b" wait_for 30 eval \
    '[ "$(mariadb -h127.0.0.1 -P$DB_R -uroot -N -e "SELECT COUNT(*) FROM db00006.pins")" = "$(mariadb -h127.0.0.1 -P$DB_B -uroot -N -e "SELECT COUNT(*) FROM db00006.pins")" ]'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
