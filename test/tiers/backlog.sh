#!/usr/bin/env bash
# Backlog tests: "accepted" means durable until applied. Each scenario ends by comparing
# every shard with the expected state row by row.
#
#   test/tiers/backlog.sh embedded|kafka
#
# embedded  a 1,000,000-row feed (BW_BACKLOG_FEED) on one shard with the consumer started 10 s late: the
#           proxy answers 429 with Retry-After once the shard's backlog reaches the bound
#           (capped below the mock cluster's 5 MiB per partition), the client resends,
#           every row lands, nothing was deleted unapplied; then 2,000 creates with
#           60 KB images on one shard land exactly (statements bounded in bytes); a shard
#           paused after applying, then flooded straight in Kafka past the mock's ~5 MiB
#           per partition (bw-workload flood, around the proxy's bound), stops on resume with
#           BulkwriteShardDataLost naming the lost range, its lost gauge set, the flooded
#           job reported lost, and nothing after the gap applied
# kafka     the batches topic bulkwrite creates has no retention that can delete unapplied
#           data; a shard paused while 200,000 ops arrive loses nothing and resumes exactly;
#           applied records are deleted (the log start offset moves up to what each shard
#           applied, and no further); a log truncated on purpose past what a shard applied
#           fires BulkwriteShardDataLost in a real Alertmanager with the offset range, and
#           the job reports its ops lost; the runbook's recovery (the job sent again under
#           its request_id, the shard's ledger moved past the gap) applies it once; a
#           topic given a retention.ms is refused at
#           startup, accepted with kafka.allow_retention (warned), and a shard whose
#           unapplied messages near that retention raises BulkwriteShardBacklogAging
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/backlog.sh embedded|kafka}
. test/lib.sh
bw_stack_start backlog "$MODE"
# applied records are freed quickly, so the test can see it
"$BIN/bwctl" config-set "$CONF" consumer.delete_applied_interval_ms=1000 consumer.keep_applied_ms=0 || exit 1
start_alertmanager

metric() { bw_metric_sum "$2" "${3:-}" "$1"; } # metric URL NAME [SHARD]: sum of a series
shard_json() { curl -sf "http://127.0.0.1:$PROXY/v1/shards" | jq ".shards[] | select(.shard == $1)"; }
no_loss_logged() { ! grep -h "deleted from Kafka before" "$WORK"/consumer-*.log; }
alert_named() { # alert_named NAME SHARD: the active alert's error annotation, or nothing
    alerts_json | jq -r --arg n "$1" --arg s "$2" \
        '.[] | select(.labels.alertname == $n and .labels.shard == $s) | .annotations.error'
}
submit() { "$BIN/bw-workload" -c "$CONF" submit --url "$URL" "$@"; }
answers() { # answers CODE: how many requests the proxy answered with CODE
    curl -sf "http://127.0.0.1:$PROXY/metrics" | awk -v c="bulkwrite_proxy_requests_total{code=\"$1\"}" '$1 == c {n = $2} END {print n + 0}'
}

if [ "$MODE" = embedded ]; then
    FEED=${BW_BACKLOG_FEED:-1000000} SHARD=3
    # The feed arrives before any consumer runs: the shard's backlog fills up to the bound.
    submit --protobuf --request-id late feed:$FEED:$SHARD >"$WORK/submit.log" 2>&1 &
    submitter=$!
    # the largest backlog the proxy ever reports for the shard, sampled while it runs
    ( while kill -0 $submitter 2>/dev/null; do shard_json $SHARD | jq -r '.backlog.bytes // 0'; sleep 0.2; done ) \
        >"$WORK/backlog-bytes.log" 2>/dev/null &
    sampler=$!
    sleep 10
    check "the proxy pushed back before any consumer ran (429 answers)" test "$(answers 429)" -gt 0
    start_consumer $C1
    C1_PID=$LAST_PID
    check "the late feed was submitted in full despite the push-back" wait $submitter
    wait $sampler 2>/dev/null
    cat "$WORK/submit.log"
    check "every op of the feed was accepted" grep -q "$FEED ops sent, $FEED accepted, 0 not accepted" "$WORK/submit.log"
    check "the client waited on the shard's backlog (Retry-After)" grep -qE "[1-9][0-9]* backlog waits" "$WORK/submit.log"
    refused=$(metric "http://127.0.0.1:$PROXY/metrics" bulkwrite_proxy_backlog_refused_ops_total $SHARD)
    echo "# proxy: $(answers 429) answers 429, $refused ops refused for shard $SHARD's backlog"
    check "the proxy answered 429 for shard $SHARD (counted per shard)" test "$(answers 429)" -gt 0 -a "$refused" -gt 0
    max_bytes=$(sort -n "$WORK/backlog-bytes.log" | tail -1)
    echo "# largest backlog seen on shard $SHARD: ${max_bytes:-0} bytes"
    check "the backlog never passed the embedded cap of 4 MiB (mock: 5 MiB per partition)" \
        test "${max_bytes:-0}" -gt 0 -a "${max_bytes:-0}" -le 4194304
    check "every row of the late feed is in place (row by row)" \
        "$BIN/bw-workload" -c "$CONF" verify --wait 600 feed:$FEED:$SHARD
    check "nothing was deleted before it was applied (no loss logged, lost gauge 0)" \
        sh -c "$(declare -f no_loss_logged); no_loss_logged && \
            test \"\$(curl -sf http://127.0.0.1:$C1/metrics | grep -c '^bulkwrite_consumer_lost_messages{.*} [1-9]')\" = 0"

    # 2,000 creates of ~60 KB each on one shard: 120 MB through a 4 MiB backlog, and
    # statements bounded in bytes under max_allowed_packet
    check "2,000 pins with 60 KB images are accepted" \
        submit --per-request 50 --request-id big image:2000:2
    check "every image row is in place, byte for byte, and the feed still is" \
        "$BIN/bw-workload" -c "$CONF" verify --wait 300 feed:$FEED:$SHARD image:2000:2
    check "no gone-away errors (statements stay under max_allowed_packet)" \
        sh -c "! grep -q 'gone away' '$WORK'/consumer-*.log"

    # bwctl submit waits on a full backlog too, and says so: 30,000 boards of one partner
    # (one shard, by md5) while every shard is paused, then resumed.
    awk 'BEGIN { pad = sprintf("%240s", ""); gsub(/ /, "b", pad);
                 for (i = 0; i < 30000; i++)
                     printf "{\"op\":\"create\",\"object_type\":\"board\",\"shard_key\":\"acme-bulk\",\"fields\":{\"partner\":\"acme-bulk\",\"name\":\"%s%d\"}}\n", pad, i }' \
        >"$WORK/boards.jsonl"
    for s in 0 1 2 3 4 5 6 7; do "$BIN/bwctl" -c "$CONF" pause $s --reason "bwctl 429 test" >/dev/null; done
    all_paused() { [ "$(curl -sf "http://127.0.0.1:$C1/metrics" | grep -c '^bulkwrite_consumer_paused{shard="[0-7]"} 1$')" = 8 ]; }
    check "the consumer pauses every shard (nothing drains the backlog)" wait_for 30 all_paused
    "$BIN/bwctl" -c "$CONF" submit --batch 1000 "$WORK/boards.jsonl" >"$WORK/bwctl-submit.out" 2>"$WORK/bwctl-submit.err" &
    bwctl_pid=$!
    check "bwctl submit shows it waits on the full shard" \
        wait_for 60 grep -q "waiting [0-9]* s: shard [0-9]*'s backlog is full" "$WORK/bwctl-submit.err"
    # A request (request_id resend-probe) with one op for another shard, taken, and 8 pins
    # with 45 KB images (more than the room a refused bwctl part left) for the full shard,
    # answered 429: its job awaits the resend, and is not finished until it comes. A job
    # after it stays held until then, though the ops taken are applied.
    FULL=$(sed -n "s/.*waiting [0-9]* s: shard \([0-9]*\)'s backlog is full.*/\1/p" "$WORK/bwctl-submit.err" | head -n 1)
    pin_on() { echo $(( ($1 << 46) | (1 << 36) | $2 )); } # pin_on SHARD LOCAL: a pin's id
    image=$(head -c 45000 /dev/urandom | base64 -w 0)
    probe='{"request_id":"resend-probe","ops":[{"op":"delete","object_type":"pin","id":'$(pin_on $(( (FULL + 1) % 8 )) 77001)'}'
    for k in 1 2 3 4 5 6 7 8; do
        probe+=',{"op":"create","object_type":"pin","id":'$(pin_on "$FULL" $((77010 + k)))',"shard_key":"'$(( (FULL << 46) | 42 ))'",
            "fields":{"owner_id":42,"title":"probe","image":{"base64":"'$image'"}}}'
    done
    probe+=']}'
    printf '%s' "$probe" >"$WORK/probe-body.json" # 480 KB: past what one argument may hold
    post_json() { # post_json NAME BODY (JSON, or @FILE): the reply in $WORK/NAME.json, the code printed
        curl -s -o "$WORK/$1.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$2" "$URL"
    }
    probe_429() {
        [ "$(post_json probe-429 "@$WORK/probe-body.json")" = 429 ] && jq -e '.accepted >= 1 and (.rejected | any(.retryable))' "$WORK/probe-429.json" >/dev/null &&
            curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$(jq -r .job_id "$WORK/probe-429.json")" |
            jq -e '.resend_awaited and (.finished | not) and (.waiting | contains("sent again"))' >/dev/null
    }
    check "a request with 8 large creates for the full shard $FULL gets 429 for them: its job awaits the resend (resend_awaited)" probe_429
    PROBE_JOB=$(jq -r .job_id "$WORK/probe-429.json")
    # the same refusal as a Connect call (docs/clients.md): resource_exhausted with
    # Retry-After, and the BatchWriteResponse as its detail, each refused op retryable
    connect_probe='{"requestId":"resend-probe-connect","ops":['
    for k in 1 2 3 4 5 6 7 8; do
        connect_probe+="$([ $k = 1 ] || echo ,){\"op\":\"CREATE\",\"objectType\":\"pin\",\"id\":\"$(pin_on "$FULL" $((77100 + k)))\",
            \"shardKey\":\"$(( (FULL << 46) | 42 ))\",\"fields\":[{\"name\":\"owner_id\",\"value\":{\"intValue\":\"42\"}},
            {\"name\":\"title\",\"value\":{\"stringValue\":\"$(printf probe-connect | base64 -w0)\"}},
            {\"name\":\"image\",\"value\":{\"bytesValue\":\"$image\"}}]}"
    done
    printf '%s]}' "$connect_probe" >"$WORK/connect-probe.json"
    connect_write() { # the probe as a Connect WriteBatch; the reply in $WORK/connect.json, the code printed
        curl -s -o "$WORK/connect.json" -D "$WORK/connect.headers" -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary "@$WORK/connect-probe.json" "http://127.0.0.1:$PROXY/bulkwrite.v1.BulkwriteService/WriteBatch"
    }
    connect_429() {
        [ "$(connect_write)" = 429 ] && jq -c 'del(.details)' "$WORK/connect.json" &&
            jq -e '.code == "resource_exhausted" and .details[0].type == "bulkwrite.v1.BatchWriteResponse"' "$WORK/connect.json" >/dev/null &&
            grep -qi '^retry-after: [0-9]' "$WORK/connect.headers" &&
            jq -r '.details[0].value' "$WORK/connect.json" | awk '{ n = length($0) % 4; printf "%s%s", $0, (n ? substr("===", 1, 4 - n) : "") }' |
            base64 -d | protoc -Iproto --decode=bulkwrite.v1.BatchWriteResponse proto/bulkwrite/v1/bulkwrite.proto >"$WORK/connect-detail.txt" &&
            [ "$(grep -c 'retryable: true' "$WORK/connect-detail.txt")" = 8 ]
    }
    check "the same as a Connect WriteBatch: 429 resource_exhausted, Retry-After, its 8 ops retryable in the BatchWriteResponse detail" connect_429
    dep_held() { # the job after it deletes the 8 pins: run too early, it would find none
        local k ops=
        for k in 1 2 3 4 5 6 7 8; do ops+="${ops:+,}{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":$(pin_on "$FULL" $((77010 + k)))}"; done
        [ "$(post_json dep "{\"request_id\":\"resend-dep\",\"after\":[\"$PROBE_JOB\"],\"ops\":[$ops]}")" = 202 ] &&
            curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$(jq -r .job_id "$WORK/dep.json")" | jq -e '.scheduled == 8' >/dev/null
    }
    check "... a job after it (8 deletes of those pins) is accepted and held" dep_held
    DEP_JOB=$(jq -r .job_id "$WORK/dep.json")
    for s in 0 1 2 3 4 5 6 7; do "$BIN/bwctl" -c "$CONF" resume $s >/dev/null; done
    check "then every board is accepted (exit 0)" wait $bwctl_pid
    connect_pins() {
        mariadb -h127.0.0.1 -P$([ "$FULL" -ge 4 ] && echo $DB_B || echo $DB_A) -uroot -N -e \
            "SELECT COUNT(*) FROM db$(printf %05d "$FULL").pins WHERE title = 'probe-connect'"
    }
    connect_resent() { [ "$(connect_write)" = 200 ]; } # a 429 meanwhile is resent: nothing twice
    check "... the Connect call sent again is taken (200; again while the shard still refuses)" wait_for 60 connect_resent
    connect_applied() { [ "$(connect_pins)" = 8 ]; }
    check "... its 8 pins are in place, once" wait_for 60 connect_applied
    connect_delete() { # and deleted again, so the shards hold what the verification below expects
        local k ops=
        for k in 1 2 3 4 5 6 7 8; do ops+="${ops:+,}{\"op\":\"DELETE\",\"objectType\":\"pin\",\"id\":\"$(pin_on "$FULL" $((77100 + k)))\"}"; done
        [ "$(curl -s -o "$WORK/connect.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "{\"ops\":[$ops]}" \
            "http://127.0.0.1:$PROXY/bulkwrite.v1.BulkwriteService/WriteBatch")" = 200 ]
    }
    connect_gone() { [ "$(connect_pins)" = 0 ]; }
    check "... and deleted by a Connect WriteBatch of 8 deletes" connect_delete
    check "... none is left" wait_for 60 connect_gone
    boards() {
        for port in $DB_A $DB_B; do for db in $(mariadb -h127.0.0.1 -P$port -uroot -N -e "SHOW DATABASES LIKE 'db0%'"); do
            mariadb -h127.0.0.1 -P$port -uroot -N -e "SELECT COUNT(*) FROM $db.boards WHERE partner = 'acme-bulk'"
        done; done | awk '{s += $1} END {print s + 0}'
    }
    check "and applied once: 30,000 boards in place" wait_for 120 sh -c "$(declare -f boards); DB_A=$DB_A DB_B=$DB_B; test \"\$(boards)\" = 30000"
    job_is() { curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$1" | jq -e "$2" >/dev/null; }
    probe_waits() {
        sleep 3 # three turns of the release loop
        job_is "$PROBE_JOB" '.applied == .submitted and .pending == 0 and .resend_awaited and (.finished | not)' &&
            job_is "$DEP_JOB" '.scheduled == 8 and .applied == 0 and .prerequisites[0].finished == false'
    }
    check "... the probe's taken op is applied, and the job after it is still held: the resend has not come" probe_waits
    check "the probe sent again (same request_id) is taken whole (202)" test "$(post_json probe "@$WORK/probe-body.json")" = 202
    check "... its job no longer awaits a resend, and finishes with all 9 ops applied" \
        wait_for 60 job_is "$PROBE_JOB" '(.resend_awaited | not) and .finished and .applied == 9'
    probe_pins() {
        local port
        for port in $DB_A $DB_B; do
            mariadb -h127.0.0.1 -P$port -uroot -N -e "SELECT COUNT(*) FROM db$(printf %05d "$FULL").pins WHERE title = 'probe'" 2>/dev/null
        done | awk '{s += $1} END {print s + 0}'
    }
    dep_done() { job_is "$DEP_JOB" '.finished and .applied == 8' && [ "$(probe_pins)" = 0 ]; }
    check "... then the job after it is released and applied: its 8 deletes found the 8 pins, none is left" \
        wait_for 60 dep_done

    # What the embedded default acknowledged outlives its 5 MiB per partition: a held job,
    # a pause and a cancel, after 8 MiB of other records in the jobs topic (new jobs) and in
    # each partition of the status and control topics (64 settings changed again and again;
    # 1 MiB at a time, as traffic comes), and a restart of every process.
    KEEP=7 far=$(date -u -d '+1 hour' +%FT%TZ)
    "$BIN/bw-workload" -c "$CONF" jsonl feed:300:$KEEP >"$WORK/keep-held.jsonl"
    "$BIN/bw-workload" -c "$CONF" jsonl feed:100:1 >"$WORK/keep-cancel.jsonl"
    BWCTL=("$BIN/bwctl" -c "$CONF" --url "http://127.0.0.1:$PROXY")
    check "a job of 300 ops held an hour ahead is accepted" \
        sh -c "'${BWCTL[0]}' -c '$CONF' --url http://127.0.0.1:$PROXY submit --not-before $far '$WORK/keep-held.jsonl' >'$WORK/keep-held.out' 2>/dev/null"
    HELD_JOB=$(head -n 1 "$WORK/keep-held.out")
    check "shard 1 paused" "${BWCTL[@]}" pause 1 --reason "bound test"
    check "... its consumer pauses it" \
        wait_for 10 sh -c "curl -sf http://127.0.0.1:$C1/metrics | grep -q '^bulkwrite_consumer_paused{shard=\"1\"} 1$'"
    check "a job of 100 ops for the paused shard is accepted and cancelled" \
        sh -c "'${BWCTL[0]}' -c '$CONF' --url http://127.0.0.1:$PROXY submit '$WORK/keep-cancel.jsonl' >'$WORK/keep-cancel.out' 2>/dev/null &&
               '${BWCTL[0]}' -c '$CONF' --url http://127.0.0.1:$PROXY cancel --reason 'bound test' \$(head -n 1 '$WORK/keep-cancel.out') >/dev/null"
    CANCEL_JOB=$(head -n 1 "$WORK/keep-cancel.out")
    flood_topics() {
        local i t
        for i in 1 2 3 4 5 6 7 8; do
            "$BIN/bw-workload" -c "$CONF" flood-topic --brokers "$BROKERS" bulkwrite.jobs 1048576 >/dev/null 2>&1 || return 1
            for t in bulkwrite.status bulkwrite.control; do
                "$BIN/bw-workload" -c "$CONF" flood-topic --brokers "$BROKERS" $t 1048576 64 >/dev/null 2>&1 || return 1
            done
            sleep 2 # a release turn and the tails between megabytes, as with real traffic
        done
    }
    check "8 MiB of other records in the jobs topic and in each partition of the status and control topics" flood_topics
    check "... the embedded Kafka kept its tables whole (no table too big to compact)" \
        sh -c "! grep -q 'more than the embedded Kafka can keep' '$WORK/kafka.log'"
    kill "$C1_PID" "$PROXY_PID" && wait "$C1_PID" "$PROXY_PID" 2>/dev/null
    "$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >>"$WORK/proxy.log" 2>&1 &
    PROXY_PID=$!
    pids+=($PROXY_PID)
    start_consumer $C1
    C1_PID=$LAST_PID
    check "the proxy and the consumer restart" \
        wait_for 60 sh -c "curl -sf http://127.0.0.1:$PROXY/healthz && curl -sf http://127.0.0.1:$C1/readyz"
    check "... the held job is still held, all 300 ops of it" \
        wait_for 20 sh -c "curl -sf http://127.0.0.1:$PROXY/v1/jobs/$HELD_JOB | jq -e '.scheduled == 300 and .applied == 0' >/dev/null"
    check "... shard 1 is still paused (GET /v1/shards and its consumer)" \
        wait_for 20 sh -c "curl -sf http://127.0.0.1:$PROXY/v1/shards | jq -e '.shards[1].paused' >/dev/null &&
            curl -sf http://127.0.0.1:$C1/metrics | grep -q '^bulkwrite_consumer_paused{shard=\"1\"} 1$'"
    check "... the job is still cancelled" \
        sh -c "curl -sf http://127.0.0.1:$PROXY/v1/jobs/$CANCEL_JOB | jq -e '.cancelled_at_ms > 0' >/dev/null"
    check "shard 1 resumed: the cancelled job's 100 ops are skipped, none applied" \
        sh -c "'${BWCTL[0]}' -c '$CONF' --url http://127.0.0.1:$PROXY resume 1 >/dev/null && sleep 3 &&
            test \"\$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e 'SELECT COUNT(*) FROM db00001.pins')\" = 0"
    check "the held job cancelled (it is an hour ahead): none of it applied" \
        sh -c "'${BWCTL[0]}' -c '$CONF' --url http://127.0.0.1:$PROXY cancel --reason 'bound test done' $HELD_JOB >/dev/null &&
            test \"\$(mariadb -h127.0.0.1 -P$DB_B -uroot -N -e 'SELECT COUNT(*) FROM db00007.pins')\" = 0"

    # The embedded Kafka keeps ~5 MiB per partition and deletes the oldest beyond. The
    # proxy's bound keeps its own writes under that; a producer that goes around it (here
    # bw-workload flood) makes a paused shard lose its backlog. On resume the consumer
    # stops at the gap, loudly, and nothing after it is applied.
    OVER=6
    pins() { mariadb -h127.0.0.1 -P$DB_B -uroot -N -e "SELECT COUNT(*) FROM db0000$OVER.pins"; }
    check "shard $OVER applies 1,000 creates" sh -c "$(declare -f submit); BIN=$BIN CONF=$CONF URL=$URL; \
        submit --request-id over-before feed:1000:$OVER && \
        '$BIN/bw-workload' -c '$CONF' verify --wait 60 feed:$FEED:$SHARD image:2000:2 feed:1000:$OVER"
    APPLIED=$("$BIN/bw-workload" -c "$CONF" offsets --brokers "$BROKERS" $OVER | cut -d' ' -f2)
    "$BIN/bwctl" -c "$CONF" pause $OVER --reason "overflow test" >/dev/null
    check "the consumer pauses shard $OVER (applied up to offset $APPLIED)" \
        wait_for 10 sh -c "test \"\$(curl -sf http://127.0.0.1:$C1/metrics | grep -c '^bulkwrite_consumer_paused{shard=\"$OVER\"} 1$')\" = 1"
    check "20 pins with 60 KB images for the paused shard are accepted" \
        submit --per-request 20 --request-id over image:20:$OVER
    OVER_JOB=$(printf '%s' "bulkwrite.v1/over/0:image:20:$OVER/0" | md5sum | cut -c1-32) # request_id over/J:JOB/FIRST-OP
    check "6 MiB more for shard $OVER are written straight to Kafka (bw-workload flood)" \
        sh -c "'$BIN/bw-workload' -c '$CONF' flood --brokers $BROKERS $OVER 6291456 >'$WORK/flood.out'"
    read -r LOW HIGH < <("$BIN/bw-workload" -c "$CONF" offsets --brokers "$BROKERS" $OVER)
    echo "# shard $OVER: applied up to $APPLIED; the flood wrote offsets $(cat "$WORK/flood.out"); Kafka now holds $LOW to $((HIGH - 1))"
    check "the embedded Kafka deleted what the shard had not applied (log start $LOW > $APPLIED)" test "$LOW" -gt "$APPLIED"
    "$BIN/bwctl" -c "$CONF" resume $OVER >/dev/null
    LOST_RANGE="offsets $APPLIED to $((LOW - 1)) of partition $OVER ($((LOW - APPLIED)) messages)"
    check "BulkwriteShardDataLost fires in Alertmanager naming the lost range: $LOST_RANGE" \
        wait_for 30 sh -c "$(declare -f alerts_json alert_named); ALERTMANAGER=$ALERTMANAGER; \
            alert_named BulkwriteShardDataLost $OVER | grep -qF '$LOST_RANGE'"
    check "the consumer's lost gauge shows the $((LOW - APPLIED)) messages" \
        wait_for 10 sh -c "curl -sf http://127.0.0.1:$C1/metrics | grep -q '^bulkwrite_consumer_lost_messages{shard=\"$OVER\"} $((LOW - APPLIED))$'"
    check "the flooded job claims no success: its 20 ops lost, none applied" \
        wait_for 10 sh -c "curl -sf http://127.0.0.1:$PROXY/v1/jobs/$OVER_JOB >'$WORK/over-job.json' && \
            jq -e '.lost == 20 and .applied == 0' '$WORK/over-job.json'"
    echo "# the flooded job: $(jq -c '{submitted, applied, lost, pending}' "$WORK/over-job.json")"
    sleep 2 # the shard must stay stopped at the gap, not skip to what Kafka still holds
    check "the shard stays at the gap: still 1,000 rows, none of the job or the flood after it" test "$(pins)" = 1000
    check "every row before the gap in place, row by row, and nothing else" \
        "$BIN/bw-workload" -c "$CONF" verify feed:$FEED:$SHARD image:2000:2 feed:1000:$OVER
    # a shard stopped at a gap must not hold the consumer's shutdown (its watermarks are
    # queried on the dispatcher while it is stopped)
    kill "$C1_PID"
    check "the consumer stops on SIGTERM within 30 s" wait_for 30 sh -c "ps -o stat= -p $C1_PID | grep -qv Z; test \$? = 1"
    kill -9 "$C1_PID" 2>/dev/null # so the stack can stop even if it did not
else
    KAFKA_LIBS=${BW_KAFKA_HOME:-/var/cache/bulkwrite/kafka-4.1.1}/libs
    kafka_configs() { # kafka_configs ARGS...: the broker's own kafka-configs tool on the batches topic
        java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$KAFKA_LIBS/*" kafka.admin.ConfigCommand \
            --bootstrap-server "$BROKERS" --entity-type topics --entity-name bulkwrite.batches "$@"
    }
    kafka_configs --describe --all >"$WORK/topic-config.txt" 2>&1
    check "the batches topic keeps batches until applied (retention.ms=-1, retention.bytes=-1, cleanup.policy=delete)" \
        sh -c "grep -q 'retention.ms=-1 ' '$WORK/topic-config.txt' && grep -q 'retention.bytes=-1 ' '$WORK/topic-config.txt' \
               && grep -q 'cleanup.policy=delete ' '$WORK/topic-config.txt'"
    start_consumer $C1
    C1_PID=$LAST_PID
    check "the consumer joins the group" wait_for 60 curl -sf "http://127.0.0.1:$C1/readyz"

    # A shard paused while 200,000 ops arrive: nothing is deleted, it resumes exactly.
    SHARD=3
    "$BIN/bwctl" -c "$CONF" pause $SHARD --reason "backlog test" >/dev/null
    check "200,000 ops for a paused shard are accepted" submit --protobuf --request-id paused feed:200000:$SHARD
    check "the proxy reports the paused shard's backlog (400 messages)" \
        wait_for 20 sh -c "test \"\$(curl -sf http://127.0.0.1:$PROXY/v1/shards | jq '.shards[$SHARD].backlog.messages')\" = 400"
    sleep 3 # DeleteRecords runs every second: it must not touch the paused shard's backlog
    check "nothing unapplied was deleted from the paused shard (log start offset 0)" \
        sh -c "test \"\$('$BIN/bw-workload' -c '$CONF' offsets --brokers $BROKERS $SHARD)\" = '0 400'"
    "$BIN/bwctl" -c "$CONF" resume $SHARD >/dev/null
    check "the paused shard resumes and applies every row exactly once" \
        "$BIN/bw-workload" -c "$CONF" verify --wait 300 feed:200000:$SHARD
    check "applied records are deleted from Kafka: the log start offset reaches what the shard applied" \
        wait_for 30 sh -c "test \"\$('$BIN/bw-workload' -c '$CONF' offsets --brokers $BROKERS $SHARD)\" = '400 400'"

    # An operator's retention (here: DeleteRecords by hand) deletes what a paused shard has
    # not applied: the loss is loud, never skipped.
    LOST=6
    "$BIN/bwctl" -c "$CONF" pause $LOST --reason "truncation test" >/dev/null
    check "5,000 ops for shard $LOST are accepted" submit --request-id trunc feed:5000:$LOST
    LOST_JOB=$(printf '%s' "bulkwrite.v1/trunc/0:feed:5000:$LOST/0" | md5sum | cut -c1-32) # request_id trunc/J:JOB/FIRST-OP
    check "the log of shard $LOST is truncated past what it applied" \
        "$BIN/bw-workload" -c "$CONF" delete-records --brokers "$BROKERS" $LOST end
    "$BIN/bwctl" -c "$CONF" resume $LOST >/dev/null
    check "BulkwriteShardDataLost fires in Alertmanager for shard $LOST, naming the offsets" \
        wait_for 30 sh -c "$(declare -f alerts_json alert_named); ALERTMANAGER=$ALERTMANAGER; \
            alert_named BulkwriteShardDataLost $LOST | grep -q 'offsets 0 to 9 of partition $LOST (10 messages)'"
    check "the consumer's lag and lost gauges show the 10 messages" \
        wait_for 10 sh -c "test \"\$(curl -sf http://127.0.0.1:$C1/metrics | grep -c '^bulkwrite_consumer_\(lag\|lost\)_messages{shard=\"$LOST\"} 10$')\" = 2"
    check "the job reports its 5,000 ops lost in Kafka" \
        wait_for 10 sh -c "curl -sf http://127.0.0.1:$PROXY/v1/jobs/$LOST_JOB >'$WORK/lost-job.json' && jq -e '.lost == 5000 and .pending == 0 and (.shards[0].error | test(\"lost in Kafka\"))' '$WORK/lost-job.json'"
    check "bwctl shards shows the loss" sh -c "'$BIN/bwctl' -c '$CONF' shards | grep -E '^ *$LOST ' | grep -q lost"
    check "every other row is in place, and none of the lost job" \
        "$BIN/bw-workload" -c "$CONF" verify feed:200000:$SHARD
    # The runbook: the client sends the lost job again under its request_id (the proxy
    # produces its parts again, as they were lost), the operator moves the shard past the
    # gap in its ledger and restarts its consumer; the job is then applied once.
    check "the lost job, sent again under its request_id, is accepted" submit --request-id trunc feed:5000:$LOST
    check "and produced again (10 new messages after the gap)" \
        sh -c "test \"\$('$BIN/bw-workload' -c '$CONF' offsets --brokers $BROKERS $LOST)\" = '10 20'"
    mariadb -h127.0.0.1 -P$DB_B -uroot -e "INSERT INTO db0000$LOST.bw_offsets (topic, kafka_partition, next_offset)
        VALUES ('bulkwrite.batches', $LOST, 10) ON DUPLICATE KEY UPDATE next_offset = 10"
    kill $C1_PID && wait $C1_PID 2>/dev/null
    start_consumer $C1
    C1_PID=$LAST_PID
    check "the shard goes on past the gap: every row in place, the lost job applied once" \
        "$BIN/bw-workload" -c "$CONF" verify --wait 60 feed:200000:$SHARD feed:5000:$LOST
    check "the job now reports 5,000 applied, none lost" \
        wait_for 10 sh -c "curl -sf http://127.0.0.1:$PROXY/v1/jobs/$LOST_JOB >'$WORK/lost-job.json' && \
            jq -e '.applied == 5000 and .lost == 0' '$WORK/lost-job.json'"
    check "BulkwriteShardDataLost resolves" \
        wait_for 30 sh -c "$(declare -f alerts_json alert_named); ALERTMANAGER=$ALERTMANAGER; \
            test -z \"\$(alert_named BulkwriteShardDataLost $LOST)\""

    # A retention on the topic is refused at startup unless the operator accepts it.
    kill $PROXY_PID && wait $PROXY_PID 2>/dev/null
    kafka_configs --alter --add-config retention.ms=3600000 >/dev/null 2>&1
    "$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >"$WORK/proxy-refused.log" 2>&1
    rc=$?
    check "a proxy refuses a batches topic with retention.ms=3600000 (exit $rc)" \
        sh -c "test $rc -ne 0 && grep -q 'retention.ms=3600000' '$WORK/proxy-refused.log'"
    cp "$CONF" "$WORK/allow.conf"
    "$BIN/bwctl" config-set "$WORK/allow.conf" kafka.allow_retention=true consumer.backlog_age_warn_pct=10 || exit 1
    kafka_configs --alter --add-config retention.ms=60000 >/dev/null 2>&1
    "$BIN/bw-proxy" -c "$WORK/allow.conf" -b "$BROKERS" >"$WORK/proxy-allowed.log" 2>&1 &
    pids+=($!)
    check "with kafka.allow_retention it starts, warning of the bound" \
        sh -c "$(declare -f wait_for); wait_for 60 curl -sf http://127.0.0.1:$PROXY/healthz && grep -q 'WARN.*retention' '$WORK/proxy-allowed.log'"
    # the consumer with that config: a shard whose backlog waits past 10 % of 60 s warns
    kill $C1_PID && wait $C1_PID 2>/dev/null
    start_consumer $C2 "$WORK/allow.conf"
    AGING=7
    "$BIN/bwctl" -c "$WORK/allow.conf" pause $AGING --reason "aging test" >/dev/null
    check "ops for a paused shard are accepted" submit --request-id aging feed:100:$AGING
    check "BulkwriteShardBacklogAging (warning) fires for shard $AGING before the retention can delete" \
        wait_for 40 sh -c "$(declare -f alerts_json alert_named); ALERTMANAGER=$ALERTMANAGER; \
            alert_named BulkwriteShardBacklogAging $AGING | grep -q 'retention.ms deletes messages after 60 s'"
    "$BIN/bwctl" -c "$WORK/allow.conf" resume $AGING >/dev/null
    check "the aging shard drains; everything else still in place" \
        "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:200000:$SHARD feed:5000:$LOST feed:100:$AGING
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
