#!/usr/bin/env bash
# test/tiers/client-go.sh embedded|kafka: the Go client (clients/go, docs/clients.md) against a
# real stack, through the Connect endpoint alone, with both of connect-go's codecs. bwgo (the
# client's small CLI, built here from the module proxy's pinned modules):
#  - sends a 30,000-op file as one named job, 4 parts in flight (each part of increments
#    follows the part creating its pins: the client must hold it back), is killed -9 after
#    100 of its 300 parts, and the same command again (as JSON this time) resumes it: the
#    job ends with every op applied once, and every row is compared with the expected state;
#  - the generated client alone (no package of ours around it), application/json and
#    application/proto: WriteBatch, then GetJob until finished; rows compared;
#  - cancels a job waiting behind a paused shard: none of its ops is in the table;
#  - sends creates of ids that exist and one too long a title: the title refused at
#    submission, the duplicates failed by the shard and read back page by page;
#  - a full backlog (a paused shard, proxy.backlog_max_messages = 10): parts answered 429
#    are resent after Retry-After until the shard drains; every row compared.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/client-go.sh embedded|kafka}
. test/lib.sh

bw_stack_conf() { # a small backlog, answered at once: the 429 part of the tier
    "$BIN/bwctl" config-set "$1" proxy.backlog_max_messages=10 proxy.backlog_wait_ms=200 proxy.backlog_retry_after_s=1 \
        'shards.rate_overrides=()' || exit 1
}
bw_stack_start client-go "$MODE"
start_consumer $C1
BWCTL=("$BIN/bwctl" -c "$CONF" --url "http://127.0.0.1:$PROXY")
check "bwgo builds from clients/go (modules from the Go module proxy)" scripts/go-client.sh build "$WORK/bwgo"
BWGO=("$WORK/bwgo" -url "http://127.0.0.1:$PROXY")
SQL=(mariadb -h127.0.0.1 -P$DB_A -uroot -N)
pin() { echo $(((1 << 36) + $1)); } # shard 0's pin with local id N
rows() { # rows FIRST LAST: "id title like_count" of shard 0's pins with local ids FIRST..LAST
    "${SQL[@]}" -e "SELECT id, title, IFNULL(like_count, 0) FROM db00000.pins
                    WHERE id BETWEEN $(pin "$1") AND $(pin "$2") ORDER BY id" | tr '\t' ' '
}
same_rows() { # same_rows FIRST LAST EXPECTED_FILE: the table holds exactly the file's rows
    rows "$1" "$2" >"$WORK/actual.txt"
    diff "$3" "$WORK/actual.txt" >"$WORK/rows.diff" && return 0
    echo "$(grep -c '^<' "$WORK/rows.diff") rows missing or wrong, $(grep -c '^>' "$WORK/rows.diff") unexpected:"
    head -n 10 "$WORK/rows.diff"
    return 1
}
job_is() { curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$1" | jq -e "$2" >/dev/null; }
is_paused0() { [ "$(bw_metric_sum bulkwrite_consumer_paused 0 $C1)" = 1 ]; }

# -- a 300-part job killed -9 and resumed ------------------------------------------------
# 150 blocks: 100 creates of pins (local ids 40,000,000 + 100b + j, title go-N, like_count
# 0), then 100 increments, two for each of the block's first 50 pins. Parts of 100: part
# 2b creates, part 2b + 1 increments them. An increment applied twice, or before its
# create (a no-op), and a create applied twice (a duplicate), all show in the rows.
BASE=40000000
awk -v base=$BASE -v first=$(pin $BASE) 'BEGIN { for (b = 0; b < 150; b++) {
        for (j = 0; j < 100; j++) printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"go-%d\",\"like_count\":0}}\n", first + 100 * b + j, 100 * b + j
        for (j = 0; j < 100; j++) printf "{\"op\":\"update\",\"object_type\":\"pin\",\"id\":%d,\"fields\":{\"like_count\":{\"increment\":1}}}\n", first + 100 * b + int(j / 2) } }' \
    >"$WORK/ingest.jsonl"
awk -v first=$(pin $BASE) 'BEGIN { for (n = 0; n < 15000; n++) printf "%d go-%d %d\n", first + n, n, (n % 100 < 50) ? 2 : 0 }' \
    >"$WORK/ingest-expected.txt"
# exec: the caller's $! is bwgo itself, so kill -9 hits the client and not a shell around it
send_ingest() { exec "${BWGO[@]}" "$@" send -job go-ingest -part-size 100 -in-flight 4 "$WORK/ingest.jsonl"; }
first_run() {
    send_ingest >"$WORK/ingest-1.out" 2>"$WORK/ingest-1.err" &
    local pid=$! id
    wait_for 60 test -s "$WORK/ingest-1.out" || { kill -9 $pid; cat "$WORK/ingest-1.err"; return 1; }
    id=$(head -n 1 "$WORK/ingest-1.out")
    wait_for 300 job_is "$id" '.parts >= 100'
    local got=$? running=0
    kill -0 $pid && running=1
    kill -9 $pid
    wait $pid 2>/dev/null
    curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$id" | tee "$WORK/ingest-killed.json" | jq -c '{parts, next_part, sealed}'
    # killed while it sent: no summary line (now or later), the job not sealed
    sleep 1
    [ $got = 0 ] && [ $running = 1 ] && ! grep -q 'parts, .* sent' "$WORK/ingest-1.err" &&
        jq -e '.sealed == false and .parts < 300' "$WORK/ingest-killed.json" >/dev/null
}
# shard 0 at 30 statements/s for the job (a part is a statement or two): about 10 s for the
# 300 parts, so the kill lands half-way; the small backlog answers 429 meanwhile
check "shard 0 at 30 statements/s" "${BWCTL[@]}" set-rate 0 30 --reason "client-go resume"

check "bwgo send (application/proto) of 30,000 ops as one job, 4 parts in flight, killed -9 after 100 of its 300 parts" first_run
JOB=$(head -n 1 "$WORK/ingest-1.out")
second_run() {
    (send_ingest -json) >"$WORK/ingest-2.out" 2>"$WORK/ingest-2.err" || { cat "$WORK/ingest-2.err"; return 1; }
    tail -n 1 "$WORK/ingest-2.err"
    local skipped
    skipped=$(sed -nE 's/.*, ([0-9]+) skipped, .*/\1/p' "$WORK/ingest-2.err" | tail -n 1)
    # part 0 is sent again (it names the job), the parts below next_part are not
    [ "$(cat "$WORK/ingest-2.out")" = "$JOB" ] && [ "${skipped:-0}" -ge 99 ] &&
        grep -Eq "\"go-ingest\"\\): 300 parts, [0-9]+ sent, $skipped skipped, [0-9]+ accepted, 0 rejected" "$WORK/ingest-2.err"
}
check "... the same command again (application/json) resumes the same job, skipping the parts the proxy holds" second_run
follow_ingest() {
    "${BWGO[@]}" follow -interval 200ms -timeout 300s "$JOB" >"$WORK/ingest-done.json" 2>/dev/null || return 1
    jq -e '.submitted == 30000 and .applied == 30000 and .failed == 0 and .pending == 0 and .sealed
           and .parts == 300 and .next_part == 300 and .last_part == 299 and .finished' "$WORK/ingest-done.json"
}
check "bwgo follow: the job finishes with 30,000 submitted and applied, 300 parts, sealed" follow_ingest
check "shard 0 back to the default rate" "${BWCTL[@]}" set-rate 0 default --reason "client-go resume"
check "... every row as expected: each create once, each increment once and after its create" \
    same_rows $BASE $((BASE + 14999)) "$WORK/ingest-expected.txt"

# -- the generated client alone, both codecs -------------------------------------------------
raw_job() { # raw_job CODEC_FLAG FIRST: 2 creates and an update of the first, one request
    local p=$(pin "$2") q=$(pin $(($2 + 1)))
    printf '%s\n' "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":$p,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"raw-a\"}}" \
        "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":$q,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"raw-b\"}}" \
        "{\"op\":\"update\",\"object_type\":\"pin\",\"id\":$p,\"fields\":{\"title\":\"raw-a2\",\"like_count\":{\"increment\":5}}}" \
        >"$WORK/raw-$2.jsonl"
    "${BWGO[@]}" $1 raw -request-id "go-raw-$2" "$WORK/raw-$2.jsonl" >"$WORK/raw-$2.json" || return 1
    jq -e '.finished and .applied == 3 and .submitted == 3' "$WORK/raw-$2.json" >/dev/null &&
        [ "$(rows "$2" $(($2 + 1)))" = "$p raw-a2 5
$q raw-b 0" ]
}
check "the generated client (connect.WithProtoJSON): WriteBatch, GetJob until finished, the rows" raw_job -json 41000000
check "the generated client (application/proto): the same" raw_job "" 41000010

# -- cancel ------------------------------------------------------------------------------------
awk -v first=$(pin 42000000) 'BEGIN { for (i = 0; i < 300; i++)
    printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"c\"}}\n", first + i }' \
    >"$WORK/cancel.jsonl"
check "shard 0 paused" "${BWCTL[@]}" pause 0 --reason "client-go cancel"
check "... its consumer pauses it" wait_for 20 is_paused0
send_cancel() { "${BWGO[@]}" send -job go-cancel -part-size 100 "$WORK/cancel.jsonl" >"$WORK/cancel.out"; }
check "bwgo send: a job of 3 parts waits behind the pause" send_cancel
CJOB=$(head -n 1 "$WORK/cancel.out")
cancel_it() {
    "${BWGO[@]}" -json cancel -reason "wrong list" "$CJOB" >"$WORK/cancel.json" || return 1
    cat "$WORK/cancel.json"
    jq -e '.cancel_reason == "wrong list" and .submitted == 300 and .applied == 0' "$WORK/cancel.json" >/dev/null
}
check "bwgo cancel (JSON): the status says why, 300 submitted, none applied" cancel_it
check "shard 0 resumed" "${BWCTL[@]}" resume 0
follow_cancelled() {
    "${BWGO[@]}" follow -interval 200ms -timeout 300s "$CJOB" >"$WORK/cancel-done.json" 2>"$WORK/cancel-follow.err"
    [ $? = 1 ] && jq -e '.finished and .cancelled == 300 and .applied == 0' "$WORK/cancel-done.json" >/dev/null
}
check "... bwgo follow sees it finished cancelled: 300 cancelled, 0 applied (exit 1)" follow_cancelled
check "... none of its pins is in the table" test "$(rows 42000000 42000299 | wc -l)" = 0

# -- failures ---------------------------------------------------------------------------------
# 200 creates of pins the ingest job made (duplicates: 1062 on the shard) and a 300-byte
# title (over max_length: refused by the proxy at submission)
awk -v first=$(pin $BASE) 'BEGIN { for (i = 0; i < 200; i++)
        printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"dup\"}}\n", first + i
    printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"%0300d\"}}\n", first + 20000, 0 }' \
    >"$WORK/fail.jsonl"
send_failing() {
    "${BWGO[@]}" send -job go-fail -part-size 100 "$WORK/fail.jsonl" >"$WORK/fail.out" 2>"$WORK/fail.err"
    local rc=$?
    cat "$WORK/fail.err"
    [ $rc = 1 ] && grep -q 'rejected: part 2 op 0 (id .*): field "title": 300 bytes, longer than its max_length 255' "$WORK/fail.err" &&
        grep -q '"go-fail"): 3 parts, 3 sent, 0 skipped, 200 accepted, 1 rejected' "$WORK/fail.err"
}
check "bwgo send: the too-long title is rejected at submission, named with its part and op (exit 1)" send_failing
FJOB=$(head -n 1 "$WORK/fail.out")
follow_failed() {
    "${BWGO[@]}" follow -interval 200ms -timeout 300s "$FJOB" >"$WORK/fail-done.json" 2>/dev/null
    [ $? = 1 ] && jq -e '.finished and .submitted == 200 and .failed == 200 and .rejected == 1' "$WORK/fail-done.json" >/dev/null
}
check "... the job finishes with the 200 duplicates failed" follow_failed
failures_pages() { # pages of 30 over JSON: 200 failures, each once, each with its op
    "${BWGO[@]}" -json failures -page-size 30 "$FJOB" >"$WORK/failures.jsonl" || return 1
    [ "$(wc -l <"$WORK/failures.jsonl")" = 200 ] &&
        [ "$(jq -r '"\(.job_part)-\(.op_index)"' "$WORK/failures.jsonl" | sort -u | wc -l)" = 200 ] &&
        jq -e -s 'all(.[]; .error_code == 1062 and .shard == 0 and (.reason | startswith("Duplicate entry"))
                       and (.op_json | fromjson | .fields.title) == "dup")' "$WORK/failures.jsonl" >/dev/null
}
check "bwgo failures: ListFailures page by page (30 a page): the 200 once each, with their ops" failures_pages
check "... filtered by error code: none for 1406" test "$("${BWGO[@]}" failures -code 1406 "$FJOB" | wc -l)" = 0
check "... the rows of the ingest job are untouched by the failed creates" \
    same_rows $BASE $((BASE + 14999)) "$WORK/ingest-expected.txt"
unknown_job() {
    "${BWGO[@]}" follow 0123456789abcdef0123456789abcdef >"$WORK/unknown.out" 2>&1
    local rc=$?
    cat "$WORK/unknown.out"
    [ $rc = 1 ] && grep -q '^bwgo: not_found: no job' "$WORK/unknown.out"
}
check "a job that does not exist: not_found" unknown_job

# -- a full backlog: 429 and Retry-After --------------------------------------------------------
awk -v first=$(pin 43000000) 'BEGIN { for (i = 0; i < 400; i++)
    printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%d,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42,\"title\":\"busy-%d\"}}\n", first + i, i }' \
    >"$WORK/busy.jsonl"
awk -v first=$(pin 43000000) 'BEGIN { for (i = 0; i < 400; i++) printf "%d busy-%d 0\n", first + i, i }' >"$WORK/busy-expected.txt"
check "shard 0 paused again" "${BWCTL[@]}" pause 0 --reason "client-go backlog"
check "... its consumer pauses it" wait_for 20 is_paused0
"${BWGO[@]}" send -job go-busy -part-size 10 "$WORK/busy.jsonl" >"$WORK/busy.out" 2>"$WORK/busy.err" &
BUSY_PID=$!
pids+=($BUSY_PID)
held_back() { # the backlog's 10 messages are in; the client keeps resending the next part
    wait_for 60 test -s "$WORK/busy.out" || return 1
    local id
    id=$(head -n 1 "$WORK/busy.out")
    wait_for 60 job_is "$id" '.parts >= 5' || return 1
    sleep 4
    job_is "$id" '.parts < 40 and .sealed == false' && kill -0 $BUSY_PID
}
check "bwgo send of 40 parts behind a paused shard: the backlog fills, the client waits (429)" held_back
check "shard 0 resumed" "${BWCTL[@]}" resume 0
busy_done() {
    wait $BUSY_PID
    local rc=$?
    tail -n 3 "$WORK/busy.err"
    # the wait is the proxy's Retry-After (1 s), read from the Connect error's metadata
    [ $rc = 0 ] && grep -Eq '^part [0-9]+: taken after [1-9][0-9]* resends' "$WORK/busy.err" &&
        grep -q "^waiting 1s (Retry-After: true): resource_exhausted: .*shard 0's backlog is full" "$WORK/busy.err" &&
        grep -q '"go-busy"): 40 parts, 40 sent, 0 skipped, 400 accepted, 0 rejected' "$WORK/busy.err"
}
check "... the client resends after Retry-After (1 s, as the proxy said) until the shard drains: 400 accepted, exit 0" busy_done
check "... bwgo follow: every op applied" "${BWGO[@]}" follow -interval 200ms -timeout 300s "$(head -n 1 "$WORK/busy.out")"
check "... every row as expected" same_rows 43000000 43000399 "$WORK/busy-expected.txt"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
