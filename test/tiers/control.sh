#!/usr/bin/env bash
# test/tiers/control.sh embedded|kafka: shard control from two proxies at the same moment.
# Two proxies (A on proxy.port, B on a port of its own) share one Kafka; for $ROUNDS
# rounds, a pause of shard $S sent to A and a rate of the same shard sent to B leave at
# the same moment (two background requests, then wait). Both changes must stand, as both
# proxies read them back: a change writes only the fields it sets (shard/N/pause,
# shard/N/rate, ...; docs/operations.md), so neither undoes the other. Every fifth round
# A pauses the whole server (mysql-a, shards 0 to 3) instead. Between rounds the shard
# is resumed and its rate reset. After the last round the consumer obeys the merged
# setting: the paused shard applies nothing while another shard applies its job, its
# status shows the rate; resumed, every shard holds exactly the rows sent, row by row.
# Then a budget for the whole of mysql-b (bwctl set-budget): both proxies show it, the
# consumer's gauge shows its share, and the statements its shards apply over a window
# stay within a generous bound of it; cleared, every row of that work is compared.
# GET /v1/check/{shard} answers 200 before the pause, 429 while paused, 200 after. Last, a
# SIGHUP to proxy A and the consumer with a rate, the log level and restart-only keys
# changed: the rate and level applied in both (GET /v1/shards and the consumer agree),
# the restart-only keys named in the log and kept.
#
# On a version whose control record was one whole record per shard (read, modified and
# written back by each proxy), some rounds lose one of the two changes.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/control.sh embedded|kafka}
. test/lib.sh
ROUNDS=${BW_CONTROL_ROUNDS:-20} S=2 OTHER=6

bw_stack_conf() { # a like is one statement (an update batch of one): the server budget's test counts them
    "$BIN/bwctl" config-set "$1" 'object_types[0].batch_size.update=1' || exit 1
}
bw_stack_start control "$MODE"
A=http://127.0.0.1:$PROXY
"$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" -p 0 --port-file "$WORK/b.port" >"$WORK/proxy-b.log" 2>&1 &
pids+=($!)
check "a second proxy starts on a port of its own" wait_for 60 test -s "$WORK/b.port"
B=http://127.0.0.1:$(cat "$WORK/b.port")
check "... and answers" wait_for 60 curl -sf "$B/healthz"
check "GET / redirects (302) to the page, /ui/" \
    eval '[ "$(curl -s -o /dev/null -w "%{http_code} %{redirect_url}" "$A/")" = "302 $A/ui/" ]'
start_consumer $C1
C1_PID=$LAST_PID C1_START=$(date +%s)
check "the consumer joins" wait_for 60 curl -sf "http://127.0.0.1:$C1/readyz"
rows_of() { # rows_of SHARD [EXPR]: COUNT(*) (or EXPR) of the pins in the shard's database
    local port=$DB_A
    [ "$1" -ge 4 ] && port=$DB_B
    mariadb -h127.0.0.1 -P"$port" -uroot -N -e "SELECT ${2:-COUNT(*)} FROM db0000$1.pins"
}
# shard S applies something first, so that its applied count has moved once
check "a feed of 100 pins for shard $S is accepted" "$BIN/bw-workload" -c "$CONF" submit --url "$A/v1/batches" feed:100:$S
check "... and applied" wait_for 60 eval '[ "$(rows_of $S)" = 100 ]'
# GET /v1/check/{shard}: 200 while the shard takes writes, 429 while paused (freno's
# convention: `curl -f` fails), with the body saying why either way
check_code() { curl -s -o "$WORK/check-$1.json" -w '%{http_code}' "$A/v1/check/$1"; }
check "GET /v1/check/$S answers 200 before any pause (curl -f succeeds)" \
    eval 'curl -sf -o /dev/null "$A/v1/check/$S" && [ "$(check_code $S)" = 200 ] && jq -e ".paused == false" "$WORK/check-$S.json" >/dev/null'

post() { # post BASE PATH BODY OUT: the reply's status code into OUT.code
    curl -s -o "$4" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$3" "$1$2" >"$4.code"
}
# every shard in "$1" (jq array) paused on both proxies, and shard S at rate $2 (null: none)
both_read() { # both_read SHARDS RATE
    local base
    for base in "$A" "$B"; do
        curl -sf "$base/v1/shards" | jq -e --argjson shards "$1" --argjson rate "$2" --argjson s $S '
            ([.shards[] | select(.shard as $n | $shards | index($n)) | .paused] | all) and
            (.shards[$s].operator_rate == $rate)' >/dev/null || return 1
    done
}
settled() { # nothing paused anywhere, shard S at the configured rate, on both proxies
    local base
    for base in "$A" "$B"; do
        curl -sf "$base/v1/shards" | jq -e --argjson s $S \
            '([.shards[] | .paused] | any | not) and .shards[$s].operator_rate == null' >/dev/null || return 1
    done
}

lost=0 lost_rounds="" bad_codes=0
for r in $(seq 1 "$ROUNDS"); do
    rate=$((10 + r))
    if [ $((r % 5)) = 0 ]; then target=/v1/servers/mysql-a/pause shards='[0,1,2,3]'; else target=/v1/shards/$S/pause shards="[$S]"; fi
    post "$A" "$target" "{\"reason\":\"round $r\"}" "$WORK/a.json" &
    pa=$!
    post "$B" "/v1/shards/$S/rate" "{\"rate\": $rate, \"reason\": \"round $r\"}" "$WORK/b.json" &
    pb=$!
    wait $pa $pb
    if [ "$(cat "$WORK/a.json.code") $(cat "$WORK/b.json.code")" != "200 200" ]; then
        bad_codes=$((bad_codes + 1))
        echo "# round $r: answers $(cat "$WORK/a.json.code") $(cat "$WORK/b.json.code"): $(cat "$WORK/a.json" "$WORK/b.json")"
    fi
    # a short sync: each proxy reads the other's record within well under a second
    if ! wait_for 3 both_read "$shards" $rate; then
        lost=$((lost + 1)) lost_rounds="$lost_rounds $r"
        echo "# round $r ($target + rate $rate): A sees $(curl -sf "$A/v1/shards" | jq -c ".shards[$S] | {paused, operator_rate}")," \
            "B sees $(curl -sf "$B/v1/shards" | jq -c ".shards[$S] | {paused, operator_rate}")"
    fi
    [ "$r" = "$ROUNDS" ] && break # the last round's setting stays, for the consumer below
    if [ $((r % 5)) = 0 ]; then post "$A" /v1/servers/mysql-a/resume '' "$WORK/a.json"; else post "$A" "/v1/shards/$S/resume" '' "$WORK/a.json"; fi
    post "$B" "/v1/shards/$S/rate" '{"rate": null}' "$WORK/b.json"
    wait_for 5 settled || { echo "# round $r: not reset: $(curl -sf "$A/v1/shards" | jq -c ".shards[$S]")"; lost=$((lost + 1)); }
done
echo "# $lost of $ROUNDS rounds lost a change:${lost_rounds:- none}"
check "every request of the $ROUNDS rounds answered 200" test "$bad_codes" = 0
check "in every one of $ROUNDS rounds both changes stand, as both proxies read them" test "$lost" = 0

# The history on either proxy names both of the last round's changes, newest first.
last_history() {
    local base
    for base in "$A" "$B"; do
        curl -sf "$base/v1/shards" | jq -e --argjson s $S --arg why "round $ROUNDS" '.shards[$s] |
            ([.history[] | select(.reason | endswith($why)) | .action] | sort) == ["pause", "rate"] and
            ([.history[].at_ms] | . == (sort | reverse)) and (.history | length) <= 20' >/dev/null || return 1
    done
}
check "shard $S's history on both proxies holds the last round's pause and rate, newest first" last_history

# ---- the consumer obeys the merged setting ----------------------------------------------------
last_rate=$((10 + ROUNDS))
metric_of() { bw_metric $C1 "$1{shard=\"$2\"}"; }
obeys() { [ "$(metric_of bulkwrite_consumer_paused $S)" = 1 ] &&
    [ "$(metric_of bulkwrite_consumer_rate_batches_per_second $S)" = "$last_rate" ]; }
check "the consumer holds shard $S paused at $last_rate statements/s" wait_for 10 obeys
status_shows() { curl -sf "$A/v1/shards" | jq -e --argjson s $S --argjson rate $last_rate \
    '.shards[$s].consumer | .paused and .rate == $rate and (.reasons | index("paused") != null)' >/dev/null; }
check "its status record (GET /v1/shards) shows shard $S paused at $last_rate statements/s" wait_for 15 status_shows
applied() { curl -sf "http://127.0.0.1:$C1/metrics" |
    awk -v m="bulkwrite_consumer_batches_applied_total{shard=\"$S\"}" '$1 == m {print $2 + 0; f = 1} END {if (!f) print 0}'; }
before=$(rows_of $S 'COALESCE(SUM(like_count), 0)') before_applied=$(applied) other_rows=$(rows_of $OTHER)
check "shard $S has applied batches before ($before_applied)" test "$before_applied" -gt 0
check "a small job (likes on shard $S, creates on shard $OTHER) is accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$A/v1/batches" --jobs-out "$WORK/waits.jobs" like:100:$S feed:200:$OTHER
check "shard $OTHER applies its 200 creates meanwhile" wait_for 60 eval '[ "$(rows_of $OTHER)" = $((other_rows + 200)) ]'
sleep 2
now_s() { echo "$(rows_of $S 'COALESCE(SUM(like_count), 0)') $(applied)"; }
check "paused shard $S applied nothing (likes $before, $before_applied batches before; $(now_s) now)" \
    test "$(now_s)" = "$before $before_applied"
check "GET /v1/check/$S answers 429 while it is paused, the body saying so (curl -f fails)" \
    eval '! curl -sf -o /dev/null "$A/v1/check/$S" && [ "$(check_code $S)" = 429 ] &&
        jq -e ".paused and .paused_by_operator and (.throttled | not)" "$WORK/check-$S.json" >/dev/null'

# ---- a job says why it waits (GET /v1/jobs/{id}: shards[].waits) ------------------------------
# The last round paused shard S (or its whole server) with a reason: the likes' job names,
# for S, the pause, who paused it and why, on either proxy, in JSON and in protobuf; the
# creates' job on shard OTHER, done, has no wait.
job_on() { # job_on SHARD: the job of waits.jobs with ops on SHARD
    local id
    for id in $(awk '{print $1}' "$WORK/waits.jobs"); do
        curl -sf "$A/v1/jobs/$id" | jq -e --argjson s "$1" '[.shards[].shard] | index($s) != null' >/dev/null && echo "$id" && return
    done
}
job=$(job_on $S) other_job=$(job_on $OTHER)
why="round $ROUNDS"
[ $((ROUNDS % 5)) = 0 ] && why="server mysql-a: round $ROUNDS"
names_pause() { # names_pause BASE
    curl -sf "$1/v1/jobs/$job" | tee "$WORK/waits-paused.json" | jq -e --argjson s $S --arg why "$why" '
        .finished == false and (.shards | length) == 1 and (.shards[0] | .shard == $s and .pending > 0 and
            .waits == {"kind": "paused", "detail": ("shard \($s) is paused by (open): " + $why), "by": "(open)",
                       "reason": $why})' >/dev/null &&
        curl -sf "$1/v1/jobs/$other_job" | jq -e '.finished and ([.shards[] | has("waits")] | any | not)' >/dev/null
}
check "the likes' job names shard $S's pause: kind paused, by (open), reason \"$why\"; the creates' job (done) no wait (proxy A)" \
    names_pause "$A"
check "... and proxy B says the same" names_pause "$B"
pb_names_pause() {
    curl -sf -H 'Accept: application/x-protobuf' "$A/v1/jobs/$job" |
        protoc --decode=bulkwrite.v1.JobStatus --proto_path=proto proto/bulkwrite/v1/bulkwrite.proto >"$WORK/waits-paused.pb.txt" &&
        grep -q 'kind: WAIT_KIND_PAUSED' "$WORK/waits-paused.pb.txt" && grep -qF "reason: \"$why\"" "$WORK/waits-paused.pb.txt" &&
        grep -qF 'by: "(open)"' "$WORK/waits-paused.pb.txt" && [ "$(grep -c 'waits {' "$WORK/waits-paused.pb.txt")" = 1 ]
}
check "... and so does its protobuf JobStatus (JobShard.waits, on shard $S only)" pb_names_pause
connect_names_pause() { # Connect GetJob, proto3 JSON: the same JobStatus
    curl -sf -H 'Content-Type: application/json' -d "{\"jobId\": \"$job\"}" \
        "$A/bulkwrite.v1.BulkwriteService/GetJob" | tee "$WORK/waits-connect.json" |
        jq -e --arg why "$why" '.shards[0].waits | .kind == "WAIT_KIND_PAUSED" and .by == "(open)" and .reason == $why' >/dev/null
}
check "... and so does Connect's GetJob (kind WAIT_KIND_PAUSED)" connect_names_pause

# A part refused for the paused shard's full backlog says the shard is paused, by whom and
# why: proxy C admits one unapplied message per shard and waits for none.
cp "$CONF" "$WORK/c.conf"
"$BIN/bwctl" config-set "$WORK/c.conf" proxy.backlog_max_messages=1 proxy.backlog_wait_ms=0 || exit 1
"$BIN/bw-proxy" -c "$WORK/c.conf" -b "$BROKERS" -p 0 --port-file "$WORK/c.port" >"$WORK/proxy-c.log" 2>&1 &
pids+=($!)
check "a third proxy, with a backlog bound of one message, answers" \
    eval 'wait_for 60 test -s "$WORK/c.port" && wait_for 60 curl -sf "http://127.0.0.1:$(cat "$WORK/c.port")/healthz"'
full_names_pause() {
    local pin=$(( (S << 46) | (1 << 36) | 987654321 )) # no such pin: applied by mistake, it would change nothing
    curl -s -o "$WORK/waits-429.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "{\"ops\":[{\"op\":\"update\",\"object_type\":\"pin\",\"id\":$pin,\"fields\":{\"title\":\"x\"}}]}" \
        "http://127.0.0.1:$(cat "$WORK/c.port")/v1/batches" >"$WORK/waits-429.code"
    cat "$WORK/waits-429.json"; echo
    [ "$(cat "$WORK/waits-429.code")" = 429 ] &&
        grep -qF "not accepted now: shard $S's backlog is full" "$WORK/waits-429.json" &&
        grep -qF "), because shard $S is paused by (open): $why; resend after Retry-After" "$WORK/waits-429.json"
}
check "... a part for shard $S it refuses (429) names the pause: \"…, because shard $S is paused by (open): $why\"" \
    wait_for 20 full_names_pause

# A job held an hour ahead (on shard 0, paused too): it waits for its time first; cancelled,
# it waits for nothing (and none of it is ever applied: the rows below are compared).
held_job() {
    local at
    at=$(date -u -d '+1 hour' +%FT%TZ)
    curl -sf -o "$WORK/waits-held.reply" -H 'Content-Type: application/json' "$A/v1/batches" \
        -d "{\"not_before\":\"$at\",\"ops\":[{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":$(( (1 << 36) | 999999 ))}]}" || return 1
    curl -sf "$A/v1/jobs/$(jq -r .job_id "$WORK/waits-held.reply")" | tee "$WORK/waits-held.json" | jq -e --arg at "$at" '
        .not_before == $at and .not_before_ms as $nb | .shards[0] | .shard == 0 and .scheduled == 1 and
            .waits == {"kind": "held", "detail": ("shard 0 holds 1 op of the job until " + $at + " (not_before)"),
                       "until_ms": $nb}' >/dev/null
}
check "a job held an hour ahead on paused shard 0 waits for its time: kind held, until_ms its not_before_ms" held_job
held_cancelled() {
    local id
    id=$(jq -r .job_id "$WORK/waits-held.reply")
    curl -sf -X DELETE "$A/v1/jobs/$id?reason=waits" >/dev/null &&
        curl -sf "$A/v1/jobs/$id" | jq -e '.finished and .cancelled == 1 and (.shards[0] | has("waits") | not)' >/dev/null
}
check "... cancelled, it waits for nothing" held_cancelled

resume_all() { post "$B" /v1/servers/mysql-a/resume '' "$WORK/b.json" && [ "$(cat "$WORK/b.json.code")" = 200 ]; }
check "resume mysql-a's shards (on proxy B)" resume_all
check "every shard holds exactly the rows sent, row by row" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:100:$S like:100:$S feed:200:$OTHER
check "shard $S's applied count moved after the resume" eval '[ "$(applied)" -gt "$before_applied" ]'
check "GET /v1/check/$S answers 200 again after the resume" \
    wait_for 10 eval '[ "$(check_code $S)" = 200 ] && jq -e ".paused == false" "$WORK/check-$S.json" >/dev/null'
no_wait() {
    curl -sf "$A/v1/jobs/$job" | tee "$WORK/waits-done.json" |
        jq -e '.finished and .applied > 0 and .pending == 0 and ([.shards[] | has("waits")] | any | not)' >/dev/null
}
check "the job finished, and no shard of it waits any more" wait_for 30 no_wait

# ---- the page's data: history, compressed and conditional replies, job numbers ---------------
# GET /v1/shards/{n}/history: a point every 10 s from the consumer's status, and the last
# round's pause and its resume as events; a second request (a page reload) serves the same
# points again, on each proxy (each keeps its own, from the same status topic).
history_ok() { # history_ok BASE
    curl -sf "$1/v1/shards/$S/history" >"$WORK/history.json" && jq -e --arg why "$why" '
        .shard == '$S' and .step_s == 10 and .window_s == 3600 and (.points | length) >= 2 and
        ([.points[].at_ms] | . == sort) and ([.events[].at_ms] | . == sort) and
        (.points[-1] | has("lag") and has("oldest_unapplied_ms") and has("rows_per_s") and (.rate | type) == "number"
            and (.paused | type) == "boolean") and
        ([.events[] | select(.kind == "pause" and .detail == $why and .by == "(open)")] | length) >= 1 and
        ([.events[] | select(.kind == "resume")] | length) >= 1' "$WORK/history.json" >/dev/null
}
check "GET /v1/shards/$S/history (proxy A): points every 10 s, oldest first, and the pause (\"$why\") and resume as events" \
    wait_for 40 history_ok "$A"
first_point=$(jq -c '.points[0]' "$WORK/history.json")
check "... served again on a second request (a reload): the same oldest point" \
    eval 'curl -sf "$A/v1/shards/$S/history" | jq -e --argjson p "$first_point" ".points[0] == \$p" >/dev/null'
check "... and proxy B keeps its own" wait_for 20 history_ok "$B"
check "GET /v1/shards/99/history answers 404 (shard out of range)" \
    eval '[ "$(curl -s -o /dev/null -w "%{http_code}" "$A/v1/shards/99/history")" = 404 ]'
# gzip and ETag: the reply is gzip'd when asked for, and a matching If-None-Match is a 304
# without a body (asked again until nothing moved between two requests)
gzip_etag() { # gzip_etag PATH
    curl -s -H 'Accept-Encoding: gzip' -D "$WORK/gz.h" -o "$WORK/gz.body" "$A$1" &&
        grep -qi '^content-encoding: gzip' "$WORK/gz.h" && gunzip -c "$WORK/gz.body" | jq -e . >/dev/null || return 1
    local etag
    etag=$(awk 'tolower($1) == "etag:" {print $2}' "$WORK/gz.h" | tr -d '\r')
    rm -f "$WORK/gz.304" # curl writes no file for an empty body: an earlier try's would stay
    [ -n "$etag" ] && [ "$(curl -s -H "If-None-Match: $etag" -o "$WORK/gz.304" -w '%{http_code}' "$A$1")" = 304 ] &&
        [ ! -s "$WORK/gz.304" ] && return 0
    # what moved between the two (printed if it never stops moving)
    diff <(gunzip -c "$WORK/gz.body" | jq -S .) <(jq -S . "$WORK/gz.304") | head -20 >"$WORK/gz.diff"
    return 1
}
# On the real broker a busy lane may never be still for a minute (a job's numbers, a rate's
# window sliding): there a 200 for the ETag sent must at least carry a new ETag (what it
# answers moved), for every path but GET /v1/shards, whose 304 is asked for in both modes.
moved_etag() { # moved_etag PATH: a matching If-None-Match is a 304, or a 200 with another ETag
    local etag code new
    curl -s -D "$WORK/mv.h" -o /dev/null "$A$1" || return 1
    etag=$(awk 'tolower($1) == "etag:" {print $2}' "$WORK/mv.h" | tr -d '\r')
    [ -n "$etag" ] || return 1
    code=$(curl -s -H "If-None-Match: $etag" -D "$WORK/mv2.h" -o /dev/null -w '%{http_code}' "$A$1")
    new=$(awk 'tolower($1) == "etag:" {print $2}' "$WORK/mv2.h" | tr -d '\r')
    [ "$code" = 304 ] || { [ "$code" = 200 ] && [ -n "$new" ] && [ "$new" != "$etag" ] &&
        echo "# $1 never still for 60 s here: its answer moved, with a new ETag"; }
}
etag_checked() { # etag_checked PATH
    wait_for 60 gzip_etag "$1" && return 0
    echo "# the last two answers differed in:"
    cat "$WORK/gz.diff"
    [ "$MODE" = kafka ] && [ "$1" != /v1/shards ] && moved_etag "$1"
}
for path in /v1/shards '/v1/shards?view=summary' /v1/jobs /v1/fleet; do
    check "GET $path answers gzip (Content-Encoding) with an ETag, and 304 with no body for If-None-Match" \
        etag_checked "$path"
done
check "GET /v1/shards without Accept-Encoding is plain JSON with rate_window_s and per-shard consumer.rows_per_s" \
    eval 'curl -s -D "$WORK/plain.h" "$A/v1/shards" | jq -e ".rate_window_s == 60 and
        ([.shards[] | select(.consumer != null) | .consumer | has(\"rows_per_s\")] | all)" >/dev/null &&
        ! grep -qi "^content-encoding" "$WORK/plain.h"'
# GET /v1/jobs: every job with its numbers, the same as GET /v1/jobs/{id}'s
jobs_numbers() {
    local one
    one=$(curl -sf "$A/v1/jobs/$job" | jq -c '{applied, failed, pending, finished}') &&
        curl -sf "$A/v1/jobs" | tee "$WORK/jobs.json" | jq -e --arg id "$job" --argjson one "$one" \
            --arg held "$(jq -r .job_id "$WORK/waits-held.reply")" '
            (.jobs[] | select(.job_id == $id) | {applied, failed, pending, finished}) == $one and
            (.jobs[] | select(.job_id == $held) | .cancelled and .cancelled_ops == 1 and .finished) and
            ([.jobs[] | has("unknown") or (has("applied") and has("failed") and has("pending") and has("finished"))] | all)' \
            >/dev/null
}
check "GET /v1/jobs: each job carries applied, failed, pending, finished as GET /v1/jobs/{id} says (the cancelled held job: cancelled_ops 1, finished)" \
    jobs_numbers

# bwctl as the runbook writes it, its own options after the command, no BULKWRITE_CONF
paused_on() { curl -sf "$1/v1/shards" | jq -e --argjson p "$2" ".shards[$OTHER].paused == \$p" >/dev/null; }
check "bwctl pause $OTHER -c CONF --url A --reason …: proxy B shows it paused" eval 'env -u BULKWRITE_CONF \
    "$BIN/bwctl" pause $OTHER -c "$CONF" --url "$A" --reason "options after the command" >/dev/null &&
    wait_for 10 paused_on "$B" true'
check "bwctl resume $OTHER --config=CONF --url B: proxy A shows it running" eval 'env -u BULKWRITE_CONF \
    "$BIN/bwctl" resume $OTHER --config="$CONF" --url "$B" >/dev/null && wait_for 10 paused_on "$A" false'

# ---- a whole server's budget ------------------------------------------------------------------
# mysql-b (shards 4 to 7) gets $BUDGET statements/s for the whole server; shards 4 and 7
# then have ~200 increments to apply (one statement each), which the budget spreads over
# seconds. The statements applied over a window stay within a generous bound of it.
BUDGET=20
bwctl_a() { "$BIN/bwctl" -c "$CONF" --url "$A" "$@"; }
check "bwctl set-budget --server mysql-b $BUDGET" bwctl_a set-budget --server mysql-b $BUDGET --reason "e2e budget"
budget_read() { # budget_read SERVER RATE ROW_RATE: both proxies show it ("null": no record)
    local base
    for base in "$A" "$B"; do
        curl -sf "$base/v1/shards" | jq -e --arg sv "$1" --argjson rate "$2" --argjson rows "$3" '
            (.servers[] | select(.name == $sv) | .budget) as $b | (.shards | length) == 8 and
            (if $rate == null then $b == null else $b.rate == $rate and $b.row_rate == $rows and
                $b.changed_by == "(open)" and $b.history[0].action == "budget" end)' >/dev/null || return 1
    done
}
check "both proxies show mysql-b's budget in GET /v1/shards, and none for mysql-a" \
    eval 'wait_for 5 budget_read mysql-b $BUDGET 0 && budget_read mysql-a null null'
check "bwctl shards prints mysql-b's budget on a line of its own" \
    eval 'bwctl_a shards | grep -Eq "^mysql-b +$BUDGET +- .*e2e budget"'
check "bwctl refuses a budget out of bounds before sending it (exit 2)" \
    eval 'bwctl_a set-budget --server mysql-b 1e-13 --reason x 2>/dev/null; [ $? = 2 ]'
post "$A" /v1/servers/mysql-b/budget '{"rate": 1e-13}' "$WORK/budget.json"
check "the proxy refuses it too (400)" test "$(cat "$WORK/budget.json.code")" = 400
budget_gauge() { bw_metric $C1 "bulkwrite_consumer_server_budget{server=\"mysql-b\",kind=\"$1\"}"; }
check "the consumer's gauge shows its share: all $BUDGET statements/s (it holds every shard), no rows kind" \
    eval 'wait_for 10 eval "[ \"\$(budget_gauge statements)\" = $BUDGET ]" && [ -z "$(budget_gauge rows)" ]'
statements_b() { curl -sf "http://127.0.0.1:$C1/metrics" | awk '
    $1 ~ /^bulkwrite_consumer_statements_total\{shard="[4-7]"\}$/ {n += $2} END {print n + 0}'; }
check "pins for shards 4 and 7 are accepted and applied" eval '"$BIN/bw-workload" -c "$CONF" submit --url "$A/v1/batches" \
    feed:2000:4 feed:2000:7 >/dev/null && wait_for 60 eval "[ \"\$(rows_of 4)\" = 2000 ] && [ \"\$(rows_of 7)\" = 2000 ]"'
# rows/s from the consumer's own counter over rate_window_s (60 s): the 2,000 rows shard 4
# applied just now (its first ever: the ledger holds exactly them) spread over a window of
# 60 to 75 s, not the burst two polls seconds apart would show
# (a window as long as the consumer has reported the shard, if that is less: its first
# report came a few seconds after its start)
rows_rate_plausible() {
    local span=$(( $(date +%s) - C1_START - 10 ))
    [ $span -gt 58 ] && span=58
    [ $span -lt 5 ] && span=5
    curl -sf "$A/v1/shards" | jq -c '.shards[4].consumer | {rows_applied, rows_per_s}' >"$WORK/rows-rate.json"
    jq -e --argjson span $span '.rows_applied == 2000 and .rows_per_s >= (2000 / 75) and
        .rows_per_s <= (2000 / $span)' "$WORK/rows-rate.json" >/dev/null
}
check "shard 4's consumer.rows_per_s is its 2,000 rows over the 60-s window (or the consumer's time, if less), rows_applied the ledger's 2,000" \
    wait_for 10 rows_rate_plausible
echo "# shard 4: $(cat "$WORK/rows-rate.json") (the consumer started $(( $(date +%s) - C1_START )) s ago)"
fleet_rows() { curl -sf "$A/v1/fleet" | jq -e '.rate_window_s == 60 and
    (.servers[] | select(.name == "mysql-b") | .rows_per_s >= (4000 / 75) and .shards_reporting == 4)' >/dev/null; }
check "GET /v1/fleet sums mysql-b's rows/s (shards 4 and 7: 4,000 rows over the window)" fleet_rows
lag_b() { curl -sf "http://127.0.0.1:$C1/metrics" | awk '
    $1 ~ /^bulkwrite_consumer_lag_messages\{shard="[4-7]"\}$/ {n += $2} END {print n + 0}'; }
check "400 likes for shards 4 and 7 (one statement each) are accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$A/v1/batches" like:2000:4 like:2000:7
sleep 1 # the budget's burst spent: the window measures the steady rate
t0=$(date +%s.%N) n0=$(statements_b)
sleep 5
t1=$(date +%s.%N) n1=$(statements_b) lag1=$(lag_b)
window=$(echo "$t1 - $t0" | bc -l) applied_b=$((n1 - n0))
bound=$(echo "1.5 * $BUDGET * $window + $BUDGET" | bc -l)
echo "# mysql-b applied $applied_b statements in ${window:0:5} s at a budget of $BUDGET/s (bound ${bound%.*})"
check "mysql-b's shards applied statements in the window, within 1.5 x budget + a second's burst" \
    eval '[ "$applied_b" -gt 0 ] && [ "$(echo "$applied_b <= $bound" | bc -l)" = 1 ]'
check "mysql-b's shards still had likes waiting at the window's end ($lag1 messages: the budget bound it, not the work)" \
    test "$lag1" -gt 0
check "clear the budget: bwctl set-budget --server mysql-b none --rows none" \
    bwctl_a set-budget --server mysql-b none --rows none --reason "e2e done"
check "both proxies show it cleared, with who cleared it" eval 'wait_for 5 budget_read mysql-b 0 0'
check "the consumer's gauge for mysql-b is gone" eval 'wait_for 10 eval "[ -z \"\$(budget_gauge statements)\" ]"'
check "every row of the budget's work, row by row" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:100:$S like:100:$S feed:200:$OTHER \
    feed:2000:4 feed:2000:7 like:2000:4 like:2000:7

# ---- SIGHUP: a reload applies what it can and names what needs a restart -------------------------
# shard 7's rate (shards.rate_overrides), log_level and a restart-only key of each daemon
# (proxy.max_ops, consumer.workers) change together; proxy A and the consumer reload. Proxy
# A shows the rate the consumer now runs; debug lines appear; each daemon names its
# restart-only key in its reload line and keeps the running value (proxy A still takes a
# request of more ops than the new proxy.max_ops).
"$BIN/bwctl" config-set "$CONF" log_level=debug proxy.max_ops=20 consumer.workers=2 \
    "shards.rate_overrides=( { shard = $HOT; rate = $HOT_RATE.0; }, { shard = 7; rate = 40.0; } )" || exit 1
proxy_lines=$(wc -l <"$WORK/proxy.log") consumer_lines=$(wc -l <"$WORK/consumer-$C1.log")
kill -HUP "$PROXY_PID" "$C1_PID"
since() { tail -n +"$(($2 + 1))" "$1"; } # since LOG LINES: what LOG got after its first LINES lines
reloaded() { # reloaded LOG LINES KEY: one WARN line applies the two keys and names KEY as needing a restart
    since "$1" "$2" | grep -F ' WARN ' | grep -qF "SIGHUP: reloaded $CONF: applied log_level, shards.rate_overrides; NOT applied, needs a restart (the running value stays until then): $3"
}
check "proxy A's reload applies log_level and shards.rate_overrides, and names proxy.max_ops as needing a restart, in one line" \
    wait_for 10 reloaded "$WORK/proxy.log" "$proxy_lines" proxy.max_ops
check "... the consumer's the same, naming consumer.workers" wait_for 10 reloaded "$WORK/consumer-$C1.log" "$consumer_lines" consumer.workers
check "GET /v1/shards (proxy A) shows shard 7's new configured and effective rate, 40" \
    eval 'curl -sf "$A/v1/shards" | jq -e ".shards[7] | .configured_rate == 40 and .effective_rate == 40" >/dev/null'
check "... and bwctl shards prints it" eval 'bwctl_a shards | awk "\$1 == 7 && \$4 == 40 && \$5 == 40 {ok = 1} END {exit !ok}"'
check "the consumer runs shard 7 at 40 statements/s" \
    wait_for 10 eval '[ "$(bw_metric $C1 "bulkwrite_consumer_rate_batches_per_second{shard=\"7\"}")" = 40 ]'
check "proxy.max_ops not applied: proxy A takes 50 ops in one request (the new value would refuse more than 20)" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$A/v1/batches" --per-request 50 feed:50:0
check "log_level applied: proxy A and the consumer log DEBUG lines for that request" wait_for 20 eval \
    'since "$WORK/proxy.log" $proxy_lines | grep -q " DEBUG .*accepted in" &&
     since "$WORK/consumer-$C1.log" $consumer_lines | grep -q " DEBUG .*applied [0-9]* messages"'
check "every row, row by row" "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:100:$S like:100:$S feed:200:$OTHER \
    feed:2000:4 feed:2000:7 like:2000:4 like:2000:7 feed:50:0

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
