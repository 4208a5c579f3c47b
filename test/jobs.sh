# jobs.sh — jobs as client teams run them (docs/jobs.md): one named job across many
# requests, resumed after a kill; a job cancelled half-way. Sourced by e2e.sh (check,
# wait_for, paused_sum, WORK, PROXY, DB_A, C1, C2, BWCTL), so it runs with both Kafka modes.

job_json() { curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$1"; }
# the sum of a metric over both consumers
consumers_metric() {
    for port in $C1 $C2; do curl -sf "http://127.0.0.1:$port/metrics"; done |
        awk -v name="$1" '$1 ~ "^" name "[{]" {s += $2} END {print s + 0}'
}
pins_in() { # pins_in FIRST LAST: pins of shard 0 with local ids FIRST..LAST in the database
    mariadb -h127.0.0.1 -P$DB_A -uroot -N -e \
        "SELECT COUNT(*) FROM db00000.pins WHERE id BETWEEN $(( (1 << 36) | $1 )) AND $(( (1 << 36) | $2 ))"
}

jobs_tests() {
    # -- one job across 300 requests, bwctl killed -9 half-way and run again ---------------
    # 300,000 creates of new pins (BW_JOB_OPS: 30,000 in the sanitizer lanes, in parts of
    # 100): an op applied twice would fail as a duplicate key, one never sent would be
    # missing from the table.
    local ops=${BW_JOB_OPS:-300000}
    local batch=$((ops / 300)) last=$((20000000 + ops - 1))
    awk -v n="$ops" 'BEGIN { for (i = 0; i < n; i++)
        printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"job\"}}\n",
            68719476736 + 20000000 + i }' >"$WORK/job-300k.jsonl"
    job_first_run() {
        "${BWCTL[@]}" submit --batch $batch --job ingest-300k "$WORK/job-300k.jsonl" >"$WORK/job-1.out" 2>"$WORK/job-1.err" &
        local pid=$! id
        wait_for 60 test -s "$WORK/job-1.out" || { kill -9 $pid; return 1; }
        id=$(head -n 1 "$WORK/job-1.out")
        # killed once at least 100 of the 300 parts are in, before the last
        wait_for 300 sh -c "curl -sf 'http://127.0.0.1:$PROXY/v1/jobs/$id' | jq -e '.parts >= 100' >/dev/null"
        local got=$?
        kill -9 $pid
        wait $pid 2>/dev/null
        job_json "$id" | tee "$WORK/job-killed.json" | jq -e '.sealed == false and .parts < 300' >/dev/null && [ $got = 0 ]
    }
    check "bwctl submit of a $ops-op file as one job, killed -9 after 100 of its 300 parts" job_first_run
    local job
    job=$(head -n 1 "$WORK/job-1.out")
    check "... the job is not finished while it is not sealed" \
        sh -c "jq -e '.finished == false and .job == \"ingest-300k\"' '$WORK/job-killed.json'"
    job_second_run() {
        "${BWCTL[@]}" submit --batch $batch --job ingest-300k "$WORK/job-300k.jsonl" >"$WORK/job-2.out" 2>"$WORK/job-2.err" || return 1
        tail -n 1 "$WORK/job-2.err"
        [ "$(cat "$WORK/job-2.out")" = "$job" ] &&
            grep -Eq "job [0-9a-f]{32} \\(\"ingest-300k\"\\): 300 parts, .*, $ops accepted, 0 rejected, .*, [1-9][0-9]* parts held before" \
                "$WORK/job-2.err"
    }
    check "... the same command again resumes the same job, skipping the parts the proxy holds, and exits 0" job_second_run
    check "... bwctl watch follows the one job to its end" "${BWCTL[@]}" watch --timeout 300 "$job"
    job_exact() {
        job_json "$job" | tee "$WORK/job-done.json" |
            jq -e --argjson n "$ops" '.submitted == $n and .applied == $n and .failed == 0 and .pending == 0 and .sealed
                   and .parts == 300 and .next_part == 300 and .last_part == 299 and .finished' >/dev/null
    }
    check "... its status is exact: $ops submitted and applied, none failed, 300 parts, sealed" job_exact
    check "... and the table holds each of the $ops pins once" test "$(pins_in 20000000 $last)" = "$ops"
    job_part_past_end() {
        local code
        code=$(curl -s -o "$WORK/job-past.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary \
            '{"job":"ingest-300k","job_part":300,"ops":[{"op":"delete","object_type":"pin","id":68719476737}]}' \
            "http://127.0.0.1:$PROXY/v1/batches")
        cat "$WORK/job-past.json"
        [ "$code" = 409 ] && grep -q 'sealed with part 299 as its last' "$WORK/job-past.json"
    }
    check "a part past a sealed job's last is refused (409)" job_part_past_end
    job_rid_and_name() {
        local code
        code=$(curl -s -o "$WORK/job-rid.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary \
            '{"job":"x","request_id":"y","ops":[{"op":"delete","object_type":"pin","id":68719476737}]}' \
            "http://127.0.0.1:$PROXY/v1/batches")
        cat "$WORK/job-rid.json"
        [ "$code" = 400 ] && grep -q 'leave request_id empty' "$WORK/job-rid.json"
    }
    check "a named job's part with a request_id too is refused, saying why (400)" job_rid_and_name

    # -- cancel half-way -----------------------------------------------------------------
    # Part 0 (100 creates) is applied; shard 0 is paused and parts 1 and 2 (200 creates)
    # wait in Kafka; the job is cancelled, the shard resumed: the 200 are skipped.
    local p
    for p in 0 1 2; do
        awk -v p=$p 'BEGIN { printf "{\"job\":\"cleanup-cancel\",\"job_part\":%d,\"job_last\":%s,\"ops\":[", p, p == 2 ? "true" : "false"
            for (i = 0; i < 100; i++)
                printf "%s{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42}}",
                    i ? "," : "", 68719476736 + 21000000 + p * 100 + i
            printf "]}\n" }' >"$WORK/cancel-part-$p.json"
    done
    post_part() { curl -sf -o "$WORK/cancel-reply-$1.json" -H 'Content-Type: application/json' \
        --data-binary @"$WORK/cancel-part-$1.json" "http://127.0.0.1:$PROXY/v1/batches"; }
    check "part 0 of a job to cancel is accepted" post_part 0
    local cjob
    cjob=$(jq -r .job_id "$WORK/cancel-reply-0.json")
    check "... and applied" wait_for 60 sh -c "[ \$(curl -sf 'http://127.0.0.1:$PROXY/v1/jobs/$cjob' | jq .applied) = 100 ]"
    check "shard 0 paused, so the next parts wait in Kafka" "${BWCTL[@]}" pause 0 --reason "cancel test"
    is_paused0() { [ "$(paused_sum bulkwrite_consumer_paused 0)" = 1 ]; }
    check "... the consumer owning shard 0 pauses it" wait_for 10 is_paused0
    post_parts_1_2() { post_part 1 && post_part 2; }
    check "parts 1 and 2 (the last) are accepted" post_parts_1_2
    cancelled_before=$(consumers_metric bulkwrite_consumer_ops_cancelled_total)
    cancel_job() {
        "${BWCTL[@]}" cancel --reason "wrong spammer list" "$cjob" >"$WORK/cancel.out" || return 1
        cat "$WORK/cancel.out"
        jq -e '.cancelled_by == "(open)" and .cancel_reason == "wrong spammer list" and .applied == 100
               and .pending == 200 and .finished == false' "$WORK/cancel.out" >/dev/null
    }
    check "bwctl cancel: the reply says who cancelled it and why, 100 applied, 200 pending" cancel_job
    check "shard 0 resumed" "${BWCTL[@]}" resume 0
    cancel_done() {
        job_json "$cjob" | tee "$WORK/cancel-done.json" |
            jq -e '.finished and .submitted == 300 and .applied == 100 and .cancelled == 200 and .pending == 0
                   and .applied + .cancelled == .submitted' >/dev/null
    }
    check "... once the shard passes them the 200 are reported cancelled: applied + cancelled = accepted" \
        wait_for 60 cancel_done
    check "... none of the cancelled ops is in the database, every applied one is" \
        test "$(pins_in 21000000 21000099),$(pins_in 21000100 21000299)" = "100,0"
    check "... the consumers counted 200 cancelled ops" \
        test "$(( $(consumers_metric bulkwrite_consumer_ops_cancelled_total) - cancelled_before ))" = 200
    cancelled_takes_nothing() {
        local code
        code=$(curl -s -o "$WORK/cancel-more.json" -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary @"$WORK/cancel-part-1.json" "http://127.0.0.1:$PROXY/v1/batches")
        cat "$WORK/cancel-more.json"
        [ "$code" = 409 ] && grep -q 'was cancelled' "$WORK/cancel-more.json"
    }
    check "a cancelled job takes no more parts (409)" cancelled_takes_nothing
    watch_cancelled() { "${BWCTL[@]}" watch --timeout 30 "$cjob"; [ $? = 1 ]; }
    check "bwctl watch of the cancelled job ends with exit 1 (ops cancelled)" watch_cancelled
}
