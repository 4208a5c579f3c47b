# jobs.sh — jobs as client teams run them (docs/jobs.md): one named job across many
# requests, resumed after a kill; a job cancelled half-way; a job's failures read page by
# page and its dead letters sent again, after a fix, as a job linked to it; scheduled
# jobs (not_before) across restarts, and jobs that run after others (after). Sourced by e2e.sh (check,
# wait_for, paused_sum, WORK, PROXY, DB_A, C1, C2, BWCTL), so it runs with both Kafka modes.

job_json() { curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$1"; }
# post_refused CODE TEXT BODY: POST /v1/batches with BODY (JSON, or @FILE) gets HTTP CODE
# and a reply that contains TEXT
post_refused() {
    local code
    code=$(curl -s -o "$WORK/refused.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$3" \
        "http://127.0.0.1:$PROXY/v1/batches")
    cat "$WORK/refused.json"
    [ "$code" = "$1" ] && grep -qF -- "$2" "$WORK/refused.json"
}
# the sum of a metric over both consumers
consumers_metric() { bw_metric_sum "$1" "" $C1 $C2; }
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
        post_refused 409 'sealed with part 299 as its last' \
            '{"job":"ingest-300k","job_part":300,"ops":[{"op":"delete","object_type":"pin","id":68719476737}]}'
    }
    check "a part past a sealed job's last is refused (409)" job_part_past_end
    job_rid_and_name() {
        post_refused 400 'leave request_id empty' \
            '{"job":"x","request_id":"y","ops":[{"op":"delete","object_type":"pin","id":68719476737}]}'
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
    cancelled_takes_nothing() { post_refused 409 'was cancelled' @"$WORK/cancel-part-1.json"; }
    check "a cancelled job takes no more parts (409)" cancelled_takes_nothing
    watch_cancelled() { "${BWCTL[@]}" watch --timeout 30 "$cjob"; [ $? = 1 ]; }
    check "bwctl watch of the cancelled job ends with exit 1 (ops cancelled)" watch_cancelled
    cancel_free_tests
    replay_tests
    schedule_tests
}

# -- a cancelled backlog costs the shard's rate nothing -----------------------------------
# Shard 0 at 2 statements/s, paused; a job of 40 parts (40 messages) waits in Kafka and is
# cancelled; a job of one op sent after it applies within seconds once the shard resumes.
# Paid for, the 40 skipped messages would hold it 20 s (one rate token each).
cancel_free_tests() {
    pins_file "$WORK/cfree.jsonl" 23007000 40 create
    pins_file "$WORK/cfree-after.jsonl" 23007100 1 create
    check "shard 0 at 2 statements/s" "${BWCTL[@]}" set-rate 0 2 --reason "cancel cost test"
    check "... and paused" "${BWCTL[@]}" pause 0 --reason "cancel cost test"
    check "... its consumer pauses it" wait_for 10 eval '[ "$(paused_sum bulkwrite_consumer_paused 0)" = 1 ]'
    local fjob
    cfree_cancel() {
        "${BWCTL[@]}" submit --batch 1 --job cancel-free "$WORK/cfree.jsonl" >"$WORK/cfree.out" 2>/dev/null || return 1
        fjob=$(head -n 1 "$WORK/cfree.out")
        "${BWCTL[@]}" cancel --reason "cancel cost test" "$fjob" >/dev/null
    }
    check "a job of 40 parts waits behind the pause and is cancelled" cfree_cancel
    fjob=$(head -n 1 "$WORK/cfree.out")
    "${BWCTL[@]}" submit "$WORK/cfree-after.jsonl" >"$WORK/cfree-after.out" 2>/dev/null
    local t0 t1
    t0=$(date +%s)
    "${BWCTL[@]}" resume 0 >/dev/null
    check "a job sent after it applies within 10 s of the resume (the 40 cancelled messages cost no rate)" \
        wait_for 10 eval '[ "$(pins_in 23007100 23007100)" = 1 ]'
    t1=$(date +%s)
    echo "# applied $((t1 - t0)) s after the resume"
    check "... none of the cancelled job's ops is in the database; it reports 40 cancelled" \
        eval '[ "$(pins_in 23007000 23007039)" = 0 ] && wait_for 20 sh -c "curl -sf http://127.0.0.1:$PROXY/v1/jobs/$fjob | jq -e \".cancelled == 40\" >/dev/null"'
    check "shard 0's rate back to its default" "${BWCTL[@]}" set-rate 0 default --reason "cancel cost test done"
}

# -- failures page by page, dead letters replayed after a fix ----------------------------
# 300 creates of shard 0 as one job of 3 parts; 200 of their ids are taken by stale rows
# (a half-done earlier load), so those 200 fail as duplicates (1062). Their pages are read
# with the cursor, bwctl dead-letters writes them as a file, the stale rows are deleted
# (the fix), and the file sent back applies all 200: the table ends with the 300 rows as
# the source file gives them.
replay_tests() {
    local base=22000000 lo hi
    lo=$(( (1 << 36) | base )) hi=$(( (1 << 36) | (base + 299) ))
    awk -v n=300 -v lo=$lo 'BEGIN { for (i = 0; i < n; i++)
        printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"feed-%d\"}}\n",
            lo + i, i }' >"$WORK/replay-src.jsonl"
    awk -v lo=$lo 'BEGIN { for (i = 0; i < 300; i++) printf "%d\tfeed-%d\n", lo + i, i }' >"$WORK/replay-expected.tsv"
    local sql=(mariadb -h127.0.0.1 -P$DB_A -uroot -N)
    check "200 of the job's ids are taken by stale rows on shard 0" \
        "${sql[@]}" -D db00000 -e "INSERT INTO db00000.pins (id, owner_id, title) SELECT $lo + seq, 42, 'stale' FROM seq_0_to_299 WHERE seq % 3 <> 0"
    local rjob
    replay_first() {
        "${BWCTL[@]}" submit --batch 100 "$WORK/replay-src.jsonl" >"$WORK/replay-1.out" 2>"$WORK/replay-1.err" || return 1
        rjob=$(head -n 1 "$WORK/replay-1.out")
        "${BWCTL[@]}" watch --timeout 120 "$rjob" 2>"$WORK/replay-1-watch.err"
        [ $? = 1 ] && job_json "$rjob" | tee "$WORK/replay-1.json" |
            jq -e '.finished and .applied == 100 and .failed == 200 and .parts == 3' >/dev/null
    }
    check "a job of 300 creates over 3 parts: 100 applied, 200 refused as duplicates" replay_first
    rjob=$(head -n 1 "$WORK/replay-1.out")
    pages_of_50() { # every page of 50 by the cursor: 200 distinct failures, each with its op
        local after="" n=0
        : >"$WORK/replay-pages.jsonl"
        while :; do
            curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$rjob/failures?limit=50${after:+&after=$after}" >"$WORK/replay-page.json" || return 1
            jq -c '.failures[]' "$WORK/replay-page.json" >>"$WORK/replay-pages.jsonl"
            after=$(jq -r '.next // empty' "$WORK/replay-page.json")
            n=$((n + 1))
            [ -n "$after" ] || break
            [ $n -lt 10 ] || return 1
        done
        echo "# $n pages"
        [ "$(wc -l <"$WORK/replay-pages.jsonl")" = 200 ] &&
            [ "$(jq -r '"\(.job_part)-\(.op_index)"' "$WORK/replay-pages.jsonl" | sort -u | wc -l)" = 200 ] &&
            jq -e -s 'all(.[]; .error_code == 1062 and .shard == 0 and (.reason | startswith("Duplicate entry"))
                           and .op.fields.title != null and .op.shard_key != null and .op_truncated == false)' \
                "$WORK/replay-pages.jsonl" >/dev/null
    }
    check "GET /v1/jobs/{id}/failures, 50 a page with the cursor: the 200 failures once each, with their ops" pages_of_50
    filters() {
        local long dup
        long=$(curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$rjob/failures?code=1406" | jq '.failures | length')
        dup=$(curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$rjob/failures?limit=1000&code=1062&reason=Duplicate%20entry" |
            jq '.failures | length')
        echo "# code=1406: $long, code=1062 and reason 'Duplicate entry': $dup"
        [ "$long" = 0 ] && [ "$dup" = 200 ]
    }
    check "... filtered by error code and by reason" filters
    bad_cursor() {
        local code
        code=$(curl -s -o "$WORK/replay-bad.json" -w '%{http_code}' "http://127.0.0.1:$PROXY/v1/jobs/$rjob/failures?after=x")
        cat "$WORK/replay-bad.json"
        [ "$code" = 400 ] && grep -q 'after: a cursor' "$WORK/replay-bad.json"
    }
    check "... a malformed cursor is refused, saying what a cursor is (400)" bad_cursor
    dead_letters_file() {
        "${BWCTL[@]}" dead-letters "$rjob" >"$WORK/replay-fix.jsonl" 2>"$WORK/replay-dl.err" || return 1
        cat "$WORK/replay-dl.err"
        [ "$(head -n 1 "$WORK/replay-fix.jsonl")" = "{\"replay_of\":\"$rjob\"}" ] &&
            [ "$(wc -l <"$WORK/replay-fix.jsonl")" = 201 ]
    }
    check "bwctl dead-letters prints the 200 ops after a replay_of line" dead_letters_file
    long_reason() { # a filter of 400 bytes: the URL is never cut (a cut one dropped the cursor: page 1 for ever)
        timeout 30 "${BWCTL[@]}" dead-letters --reason "$(printf 'x%.0s' $(seq 400))" "$rjob" >"$WORK/replay-long.jsonl" &&
            [ "$(cat "$WORK/replay-long.jsonl")" = "{\"replay_of\":\"$rjob\"}" ]
    }
    check "... with a --reason of 400 bytes that no failure has: the link line alone, and it ends" long_reason
    check "the fix: the stale rows are deleted" \
        "${sql[@]}" -e "DELETE FROM db00000.pins WHERE id BETWEEN $lo AND $hi AND title = 'stale'"
    replay_second() {
        "${BWCTL[@]}" submit "$WORK/replay-fix.jsonl" >"$WORK/replay-2.out" 2>"$WORK/replay-2.err" || return 1
        local njob
        njob=$(head -n 1 "$WORK/replay-2.out")
        "${BWCTL[@]}" watch --timeout 120 "$njob" 2>/dev/null &&
            job_json "$njob" | tee "$WORK/replay-2.json" |
            jq -e --arg old "$rjob" '.finished and .applied == 200 and .failed == 0 and .replay_of == $old' >/dev/null &&
            [ "$njob" != "$rjob" ]
    }
    check "bwctl submit of that file: a new job, linked to the old one (replay_of), applies all 200" replay_second
    replay_rows() {
        "${sql[@]}" -e "SELECT id, title FROM db00000.pins WHERE id BETWEEN $lo AND $hi ORDER BY id" >"$WORK/replay-rows.tsv"
        diff "$WORK/replay-expected.tsv" "$WORK/replay-rows.tsv" >/dev/null
    }
    check "... the table holds the 300 rows as the file gave them (row by row)" replay_rows
    replay_unknown() {
        post_refused 400 'replay_of: no job' \
            '{"replay_of":"0123456789abcdef0123456789abcdef","ops":[{"op":"delete","object_type":"pin","id":68719476737}]}'
    }
    check "a replay_of naming no job is refused (400)" replay_unknown
}

# -- scheduled and dependent jobs --------------------------------------------------------
# pins_file FILE FIRST N OP: JSON lines of N ops (create: title "sched"; delete) on pins of
# shard 0 with local ids FIRST..FIRST+N-1
pins_file() {
    awk -v first="$2" -v n="$3" -v op="$4" 'BEGIN { for (i = 0; i < n; i++)
        if (op == "create")
            printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"sched\"}}\n",
                68719476736 + first + i
        else printf "{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":%d}\n", 68719476736 + first + i }' >"$1"
}
restart_proxy() {
    kill -9 "$PROXY_PID" && wait "$PROXY_PID" 2>/dev/null
    "$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" >>"$WORK/proxy.log" 2>&1 &
    PROXY_PID=$!
    pids+=($PROXY_PID)
    wait_for 60 curl -sf "http://127.0.0.1:$PROXY/readyz"
}
restart_consumers() { # kill -9 of every consumer of this stack, each started again as it ran
    local pid cmds=()
    for pid in $(pgrep -f "bw-consumer -c .* -b $BROKERS"); do
        cmds+=("$(tr '\0' ' ' <"/proc/$pid/cmdline")")
        kill -9 "$pid"
        wait "$pid" 2>/dev/null
    done
    [ ${#cmds[@]} -gt 0 ] || return 1
    local cmd port
    for cmd in "${cmds[@]}"; do
        port=${cmd##* -p }
        port=${port%% *}
        $cmd >>"$WORK/consumer-$port.log" 2>&1 &
        pids+=($!)
    done
    echo "# ${#cmds[@]} consumers restarted"
}

schedule_tests() {
    # -- a job scheduled 40 s ahead: nothing before, across kill -9 of both consumers and
    # the proxy; everything after
    local at sjob
    at=$(date -u -d '+40 seconds' +%FT%TZ)
    pins_file "$WORK/sched.jsonl" 23000000 300 create
    sched_submit() {
        "${BWCTL[@]}" submit --batch 100 --not-before "$at" "$WORK/sched.jsonl" >"$WORK/sched.out" 2>"$WORK/sched.err" || return 1
        sjob=$(head -n 1 "$WORK/sched.out")
        job_json "$sjob" | tee "$WORK/sched-held.json" |
            jq -e --arg at "$at" '.submitted == 300 and .scheduled == 300 and .pending == 300 and .applied == 0
                and .not_before == $at and (.waiting | contains("300 ops held until " + $at)) and .finished == false' >/dev/null
    }
    check "bwctl submit --not-before (40 s ahead): 300 ops accepted and held, the status says until when" sched_submit
    sjob=$(head -n 1 "$WORK/sched.out")
    check "... both consumers killed -9 and started again" restart_consumers
    check "... the proxy killed -9 and started again" restart_proxy
    sched_still_held() {
        job_json "$sjob" | jq -e '.scheduled == 300 and .applied == 0' >/dev/null && [ "$(pins_in 23000000 23000299)" = 0 ]
    }
    check "... the restarted proxy still holds all 300, and none is in the database before its time" sched_still_held
    sched_early() { [ "$(date +%s)" -lt "$(date -d "$at" +%s)" ]; }
    check "... (that was checked before the time came)" sched_early
    sched_done() {
        job_json "$sjob" | tee "$WORK/sched-done.json" |
            jq -e '.finished and .applied == 300 and .scheduled == 0 and .pending == 0 and .failed == 0' >/dev/null
    }
    check "... after its time every op is applied once: 300 applied, none held" wait_for 90 sched_done
    sched_not_early() { # the rows were written at or after the time
        local first
        first=$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT COUNT(*) FROM db00000.pins WHERE id BETWEEN
            $(( (1 << 36) | 23000000 )) AND $(( (1 << 36) | 23000299 )) AND title = 'sched'")
        [ "$first" = 300 ] && [ "$(date +%s)" -ge "$(date -d "$at" +%s)" ]
    }
    check "... the table holds the 300 rows" sched_not_early

    # -- order: one pin created, then updated twice, in three parts held for the same time:
    # released in the order they were sent, the pin ends with the last title
    local pin=$((68719476736 + 23004000)) ojob
    printf '%s\n' "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":$pin,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"a\"}}" \
        "{\"op\":\"update\",\"object_type\":\"pin\",\"id\":$pin,\"fields\":{\"title\":\"b\"}}" \
        "{\"op\":\"update\",\"object_type\":\"pin\",\"id\":$pin,\"fields\":{\"title\":\"c\"}}" >"$WORK/sched-order.jsonl"
    sched_order() { # as three parts of one job, then as three jobs: either way in the order sent
        local at k
        at=$(date -u -d '+5 seconds' +%FT%TZ)
        "${BWCTL[@]}" submit --batch 1 --not-before "$at" "$WORK/sched-order.jsonl" >"$WORK/sched-order.out" 2>/dev/null || return 1
        ojob=$(head -n 1 "$WORK/sched-order.out")
        "${BWCTL[@]}" watch --timeout 60 "$ojob" 2>/dev/null || return 1
        [ "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT title FROM db00000.pins WHERE id = $pin")" = c ] || return 1
        mariadb -h127.0.0.1 -P$DB_A -uroot -e "DELETE FROM db00000.pins WHERE id = $pin" || return 1
        at=$(date -u -d '+5 seconds' +%FT%TZ)
        for k in 1 2 3; do
            sed -n "${k}p" "$WORK/sched-order.jsonl" >"$WORK/sched-order-$k.jsonl"
            "${BWCTL[@]}" submit --job "order-$k" --not-before "$at" "$WORK/sched-order-$k.jsonl" >"$WORK/sched-order-$k.out" 2>/dev/null || return 1
        done
        "${BWCTL[@]}" watch --timeout 60 "$(cat "$WORK/sched-order-3.out")" 2>/dev/null &&
            [ "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT title FROM db00000.pins WHERE id = $pin")" = c ]
    }
    check "a create and two updates of one pin held for the same time, as parts and as jobs, go out in order: the last title stands" sched_order

    # -- a named job's part sent with no time while its part 0 is held for a time: held
    # too, and released after part 0. Sent straight to its shard, its update would apply
    # to nothing, before part 0's create, and the pin would keep title "a".
    local xpin=$((68719476736 + 23005000))
    sched_cross() {
        local at xjob
        at=$(date -u -d '+6 seconds' +%FT%TZ)
        curl -sf -o "$WORK/cross-0.json" -H 'Content-Type: application/json' "$URL" -d "{\"job\":\"cross\",\"job_part\":0,
            \"not_before\":\"$at\",\"ops\":[{\"op\":\"create\",\"object_type\":\"pin\",\"id\":$xpin,\"shard_key\":\"42\",
            \"fields\":{\"owner_id\":42,\"title\":\"a\"}}]}" || return 1
        curl -sf -o "$WORK/cross-1.json" -H 'Content-Type: application/json' "$URL" -d "{\"job\":\"cross\",\"job_part\":1,
            \"job_last\":true,\"ops\":[{\"op\":\"update\",\"object_type\":\"pin\",\"id\":$xpin,\"fields\":{\"title\":\"b\"}}]}" || return 1
        xjob=$(jq -r .job_id "$WORK/cross-0.json")
        job_json "$xjob" | tee "$WORK/cross-held.json" | jq -e '.scheduled == 2 and .applied == 0' >/dev/null || return 1
        "${BWCTL[@]}" watch --timeout 60 "$xjob" >/dev/null 2>&1 || return 1
        [ "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT title FROM db00000.pins WHERE id = $xpin")" = b ]
    }
    check "a part sent with no time while an earlier part of its job is held is held too, and goes out after it: title b" \
        sched_cross

    # -- the same, and the part sent again (a lost reply): the resend keeps its place behind
    # part 0. Sent straight to its shard, the update would apply to nothing first.
    local rpin=$((68719476736 + 23005100))
    sched_resend() {
        local at rjob
        at=$(date -u -d '+6 seconds' +%FT%TZ)
        curl -sf -o "$WORK/resend-0.json" -H 'Content-Type: application/json' "$URL" -d "{\"job\":\"resend\",\"job_part\":0,
            \"not_before\":\"$at\",\"ops\":[{\"op\":\"create\",\"object_type\":\"pin\",\"id\":$rpin,\"shard_key\":\"42\",
            \"fields\":{\"owner_id\":42,\"title\":\"original\"}}]}" || return 1
        printf '{"job":"resend","job_part":1,"job_last":true,"ops":[{"op":"update","object_type":"pin","id":%s,"fields":{"title":"edited"}}]}' \
            "$rpin" >"$WORK/resend-1.body"
        for _ in 1 2; do
            curl -sf -o /dev/null -H 'Content-Type: application/json' "$URL" --data-binary @"$WORK/resend-1.body" || return 1
        done
        rjob=$(jq -r .job_id "$WORK/resend-0.json")
        job_json "$rjob" | tee "$WORK/resend-held.json" | jq -e '.scheduled == 2 and .applied == 0' >/dev/null || return 1
        "${BWCTL[@]}" watch --timeout 60 "$rjob" >/dev/null 2>&1 || return 1
        [ "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT title FROM db00000.pins WHERE id = $rpin")" = edited ]
    }
    check "a part held behind its job's held part 0, sent again, stays behind it: title edited" sched_resend

    # -- a job ends at its highest part, and is finished only with every part up to it
    local gpin=$((68719476736 + 23005200))
    gap_part() { # gap_part PART [true]: a create of pin gpin + PART as part PART of job "gaps"
        printf '{"job":"gaps","job_part":%d,"job_last":%s,"ops":[{"op":"create","object_type":"pin","id":%d,"shard_key":"42","fields":{"owner_id":42,"title":"g"}}]}' \
            "$1" "${2:-false}" $((gpin + $1))
    }
    gaps() {
        local p gjob
        for p in 0 1 5; do curl -sf -o "$WORK/gaps-$p.json" -H 'Content-Type: application/json' "$URL" -d "$(gap_part $p)" || return 1; done
        post_refused 409 'has part 5 already: part 3 cannot be its last' "$(gap_part 3 true)" || return 1
        curl -sf -o /dev/null -H 'Content-Type: application/json' "$URL" -d "$(gap_part 6 true)" || return 1
        # the second proxy, asked right after the seal, reads it before it takes part 7
        local code
        code=$(curl -s -o "$WORK/gaps-7.json" -w '%{http_code}' -H 'Content-Type: application/json' "$FATAL/v1/batches" \
            -d "$(gap_part 7)")
        [ "$code" = 409 ] && grep -q 'sealed with part 6 as its last: part 7 is past its end' "$WORK/gaps-7.json" || return 1
        gjob=$(jq -r .job_id "$WORK/gaps-0.json")
        sleep 2
        job_json "$gjob" | tee "$WORK/gaps-open.json" |
            jq -e '.sealed and .last_part == 6 and .parts == 4 and .next_part == 2 and .finished == false' >/dev/null || return 1
        for p in 2 3 4; do curl -sf -o /dev/null -H 'Content-Type: application/json' "$URL" -d "$(gap_part $p)" || return 1; done
        "${BWCTL[@]}" watch --timeout 60 "$gjob" >/dev/null 2>&1 &&
            job_json "$gjob" | jq -e '.finished and .parts == 7 and .applied == 7' >/dev/null &&
            [ "$(pins_in 23005200 23005206)" = 7 ]
    }
    check "a seal below a part taken is refused (409), a part past the seal at the other proxy too; sealed at 6 with parts 2-4 missing it is not finished, then it is" gaps

    # -- part numbers are bounded; a far part costs the index a range, not a bitmap
    index_bytes() { curl -sf "http://127.0.0.1:$PROXY/metrics" | awk '$1 == "bulkwrite_proxy_jobs_index_bytes" {print $2}'; }
    part_bound() {
        post_refused 400 'job_part 4294967295 is over 999999' \
            '{"job":"far","job_part":4294967295,"ops":[{"op":"delete","object_type":"pin","id":68719476737,"fields":{"x":1}}]}' ||
            return 1
        local before after
        before=$(index_bytes)
        post_refused 422 'delete takes no fields' \
            '{"job":"far","job_part":999999,"ops":[{"op":"delete","object_type":"pin","id":68719476737,"fields":{"x":1}}]}' ||
            return 1
        after=$(index_bytes)
        echo "index bytes $before -> $after"
        [ -n "$before" ] && [ $((after - before)) -lt 65536 ]
    }
    check "job_part over 999,999 is refused (400); part 999,999 of a refused request costs the index under 64 KiB" part_bound

    # -- a scheduled job cancelled while held: nothing of it is ever applied
    local far cjob
    far=$(date -u -d '+1 hour' +%FT%TZ)
    pins_file "$WORK/sched-cancel.jsonl" 23001000 100 create
    sched_cancel() {
        "${BWCTL[@]}" submit --not-before "$far" "$WORK/sched-cancel.jsonl" >"$WORK/sched-cancel.out" 2>/dev/null || return 1
        cjob=$(head -n 1 "$WORK/sched-cancel.out")
        "${BWCTL[@]}" cancel --reason "not tonight" "$cjob" >/dev/null || return 1
        job_json "$cjob" | tee "$WORK/sched-cancel.json" |
            jq -e '.finished and .cancelled == 100 and .scheduled == 0 and .applied == 0 and .cancel_reason == "not tonight"' >/dev/null &&
            [ "$(pins_in 23001000 23001099)" = 0 ]
    }
    check "a job scheduled an hour ahead, cancelled: its 100 ops are reported cancelled, none applied" sched_cancel

    # -- soft then hard: deletes that run after the creates (after), shard 0 paused so the
    # creates wait in Kafka. Deletes applied first would find nothing and leave 100 rows.
    pins_file "$WORK/dep-a.jsonl" 23002000 100 create
    pins_file "$WORK/dep-b.jsonl" 23002000 100 delete
    local ajob bjob
    check "shard 0 paused" "${BWCTL[@]}" pause 0 --reason "dependent job test"
    shard0_paused() { [ "$(paused_sum bulkwrite_consumer_paused 0)" = 1 ]; }
    check "... its consumer pauses it" wait_for 10 shard0_paused
    dep_submit() {
        "${BWCTL[@]}" submit --job dep-a "$WORK/dep-a.jsonl" >"$WORK/dep-a.out" 2>/dev/null || return 1
        ajob=$(head -n 1 "$WORK/dep-a.out")
        "${BWCTL[@]}" submit --job dep-b --after "$ajob" "$WORK/dep-b.jsonl" >"$WORK/dep-b.out" 2>/dev/null || return 1
        bjob=$(head -n 1 "$WORK/dep-b.out")
        sleep 3 # three turns of the release loop: B must still be held
        job_json "$bjob" | tee "$WORK/dep-b-held.json" |
            jq -e --arg a "$ajob" '.scheduled == 100 and .applied == 0 and .after == [$a]
                and (.waiting | contains("until job " + $a))' >/dev/null
    }
    check "job B (100 deletes) after job A (100 creates on the paused shard): B is held, naming A" dep_submit
    # why each waits, per shard: A's ops for the pause (who, why), B's for A
    dep_waits() {
        job_json "$ajob" | tee "$WORK/dep-a-waits.json" | jq -e '.shards == [.shards[] | select(.shard == 0)] and
            .shards[0].waits == {"kind": "paused", "detail": "shard 0 is paused by (open): dependent job test",
                                 "by": "(open)", "reason": "dependent job test"}' >/dev/null &&
            job_json "$bjob" | jq -e --arg a "$ajob" '.shards[0].waits.kind == "prerequisite" and .shards[0].waits.reason == $a
                and (.shards[0].waits.detail | endswith("until job " + $a + " is finished on it"))' >/dev/null
    }
    check "... A's status says shard 0 is paused (by, reason); B's that it waits for A (kind prerequisite)" dep_waits
    ajob=$(head -n 1 "$WORK/dep-a.out") bjob=$(head -n 1 "$WORK/dep-b.out")
    check "shard 0 resumed" "${BWCTL[@]}" resume 0
    dep_done() {
        job_json "$bjob" | tee "$WORK/dep-b-done.json" |
            jq -e '.finished and .applied == 100 and .scheduled == 0 and ([.shards[] | has("waits")] | any | not)' >/dev/null
    }
    check "... A applies, then B is released and applies: B finished, 100 applied, no shard waits" wait_for 90 dep_done
    dep_rows() { job_json "$ajob" | jq -e '.finished and .applied == 100' >/dev/null && [ "$(pins_in 23002000 23002099)" = 0 ] &&
        jq -e --arg a "$ajob" '.prerequisites == [{"job_id": $a, "found": true, "finished": true, "submitted": 100,
            "applied": 100, "failed": 0, "cancelled": 0, "was_cancelled": false}]' "$WORK/dep-b-done.json" >/dev/null; }
    check "... in that order: A's 100 pins were created, then deleted (none left); B's status reports A finished" dep_rows

    # -- a prerequisite cancelled: the waiting job is cancelled too, naming it
    pins_file "$WORK/dep-c.jsonl" 23003000 50 create
    pins_file "$WORK/dep-d.jsonl" 23003000 50 delete
    local cj dj
    dep_cascade() {
        "${BWCTL[@]}" submit --not-before "$far" --job dep-c "$WORK/dep-c.jsonl" >"$WORK/dep-c.out" 2>/dev/null || return 1
        cj=$(head -n 1 "$WORK/dep-c.out")
        # D is also held an hour ahead: the cascade must not wait for its time
        "${BWCTL[@]}" submit --not-before "$far" --job dep-d --after "$cj" "$WORK/dep-d.jsonl" >"$WORK/dep-d.out" 2>/dev/null ||
            return 1
        dj=$(head -n 1 "$WORK/dep-d.out")
        "${BWCTL[@]}" cancel --reason "wrong list" "$cj" >/dev/null || return 1
        wait_for 20 sh -c "curl -sf 'http://127.0.0.1:$PROXY/v1/jobs/$dj' | jq -e '.cancelled == 50' >/dev/null" || return 1
        job_json "$dj" | tee "$WORK/dep-d.json" |
            jq -e --arg c "$cj" '.finished and .applied == 0 and .cancel_reason == "prerequisite job " + $c + " was cancelled"
                and .prerequisites[0].was_cancelled and .prerequisites[0].cancelled == 50' >/dev/null
    }
    check "a job after a job that is cancelled is cancelled too, at once (not at its own later time), with the prerequisite named" \
        dep_cascade

    # -- refused: a cycle, an unknown prerequisite, a malformed time
    dep_cycle() {
        curl -sf -o "$WORK/cyc-e.json" -H 'Content-Type: application/json' "$URL" \
            -d '{"job":"cyc-e","job_part":0,"ops":[{"op":"delete","object_type":"pin","id":68719476737}]}' || return 1
        local e f
        e=$(jq -r .job_id "$WORK/cyc-e.json")
        curl -sf -o "$WORK/cyc-f.json" -H 'Content-Type: application/json' "$URL" \
            -d "{\"job\":\"cyc-f\",\"after\":[\"$e\"],\"ops\":[{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":68719476737}]}" || return 1
        f=$(jq -r .job_id "$WORK/cyc-f.json")
        post_refused 409 'would wait for each other' \
            "{\"job\":\"cyc-e\",\"job_part\":1,\"job_last\":true,\"after\":[\"$f\"],\"ops\":[{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":68719476737}]}"
    }
    check "a part of job E after job F, which waits for E, is refused: a cycle (409)" dep_cycle
    check "... job F, which would wait for ever (E is never sealed), is cancelled" \
        "${BWCTL[@]}" cancel --reason "cycle test" "$(jq -r .job_id "$WORK/cyc-f.json")"
    dep_part() { # a part's own id: it would not see the job's other parts, nor its cancel
        local e
        e=$(jq -r .job_id "$WORK/cyc-e.json")
        post_refused 400 "after: ${e:0:20}000000000000 is part 0 of job $e; name the job's id" \
            "{\"after\":[\"${e:0:20}000000000000\"],\"ops\":[{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":68719476737}]}"
    }
    check "after naming a part of a named job (the part's own id) is refused, naming the job (400)" dep_part
    dep_unknown() {
        post_refused 400 'after: no job 0123456789abcdef0123456789abcdef' \
            '{"after":["0123456789abcdef0123456789abcdef"],"ops":[{"op":"delete","object_type":"pin","id":68719476737}]}'
    }
    check "after naming no job is refused (400)" dep_unknown
    bad_time() {
        post_refused 400 'not_before \"tomorrow\" is not a UTC time' \
            '{"not_before":"tomorrow","ops":[{"op":"delete","object_type":"pin","id":68719476737}]}'
    }
    check "a not_before that is not a time is refused, saying what a time is (400)" bad_time
    proxy_metric() { bw_metric $PROXY "$1"; }
    held_gone() { [ "$(proxy_metric bulkwrite_proxy_held_job_records)" = 0 ]; }
    check "the proxy holds no record now (all released or cancelled): bulkwrite_proxy_held_job_records 0" wait_for 10 held_gone
    # e2e runs a second proxy too ($FATAL), whose loop may release any of the batches first
    # (in one CI run it released every one): the proxies' counts together
    released_sum() {
        local n sum=0 url
        for url in "http://127.0.0.1:$PROXY" ${FATAL:+"$FATAL"}; do
            n=$(curl -sf "$url/metrics" | awk '$1 == "bulkwrite_proxy_held_batches_released_total" {print $2}')
            sum=$((sum + ${n:-0}))
        done
        echo "released by the proxies: $sum"
        [ "$sum" -ge 6 ]
    }
    check "... and the proxies counted the batches they released (bulkwrite_proxy_held_batches_released_total, summed: >= 6)" \
        released_sum
}
