#!/usr/bin/env bash
# bwctl as a client team runs it (docs/jobs.md): `bwctl submit` sends parts in flight by
# default yet keeps each object's ops in the file's order; --lane puts the job in a lane;
# watch and job show the lane, and the shards' "waits" when the status has them.
#
#   test/tiers/bwctl.sh embedded|kafka
#
# 1. Order: $NGROUPS + 1 groups of $GROUP pins spread over every shard, in parts of
#    2 x $GROUP ops: part p creates group p and updates group p - 1 (order_file), so
#    every pin's create and update are in adjacent parts,
#    which the default sends together unless it holds the second back. Every pin must
#    end with the update's title: compared row by row with MariaDB. Run $ROUNDS times,
#    each as a new job on new pins. (Sent with the hold-back switched off, the same file
#    left some pins with the create's title: checked by hand, not here, as it is chance.)
# 2. Lanes "urgent" and "bulk": --lane urgent lands the job there (GET /v1/jobs/{id},
#    bwctl job, bwctl watch), the same file in another lane is another job, an unknown
#    lane is refused.
# 3. watch and job against a status with shards' "waits" (served by node from a file):
#    a line per distinct reason with its count of shards, at most three; and with no
#    "waits" (the live job above) no such line.
# 4. A part the proxy does not take (a fake proxy answers 409 to part 2): no later part is
#    sent, so none overtakes its ops; bwctl says so and exits 1.
# 5. A line whose text is not valid UTF-8 as the proxy reads it (an overlong form) is
#    refused alone, the others sent; a job's derived name does not depend on --batch (a
#    run with the default part size after one with --batch 1000 is the same job, refused
#    409 for a part 0 of another size, not sent again as another job).
# 6. A job an older bwctl began (parts sent as JSON), resumed by this one, which sends
#    protobuf: a resent part refused 409 goes again as JSON and counts once.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/bwctl.sh embedded|kafka}
. test/lib.sh
NGROUPS=${BW_ORDER_GROUPS:-240} GROUP=5 ROUNDS=${BW_ORDER_ROUNDS:-3}

bw_stack_conf() { # no rate limit (lib.sh limits shard $HOT); two lanes besides the default
    "$BIN/bwctl" config-set "$1" 'shards.rate_overrides=( )' \
        'lanes=( { name = "urgent"; weight = 4; }, { name = "bulk"; weight = 1; } )' || exit 1
}
bw_stack_start bwctl "$MODE"
start_consumer $C1
BWCTL=("$BIN/bwctl" -c "$CONF" --url "http://127.0.0.1:$PROXY")
sql() { # sql PORT QUERY: the rows, tab-separated
    mariadb -h127.0.0.1 -P"$1" -uroot -N -e "$2"
}

# ---- 1. each object's ops in the file's order, parts in flight -------------------------------

# order_file ROUND: the JSON lines, and the pins' expected "id<TAB>title" in $WORK/order-ROUND.want.
# Groups 0 to N of $GROUP pins; part 0 creates groups 0 and N, part p (1 to N - 1) creates
# group p and updates group p - 1, part N updates groups N - 1 and N.
order_file() {
    awk -v n="$NGROUPS" -v g="$GROUP" -v round="$1" -v want="$WORK/order-$1.want" '
    function pin(k) { return (k % 8) * 2^46 + 2^36 + 30000000 + round * 100000 + k } # shard k % 8
    function create(grp,  k) {
        for (k = grp * g; k < (grp + 1) * g; k++)
            printf "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":%.0f,\"shard_key\":\"%.0f\",\"fields\":{\"owner_id\":%.0f,\"title\":\"created\"}}\n", pin(k), pin(k), pin(k)
    }
    function update(grp,  k) {
        for (k = grp * g; k < (grp + 1) * g; k++) {
            printf "{\"op\":\"update\",\"object_type\":\"pin\",\"id\":\"%.0f\",\"fields\":{\"title\":\"updated %d\"}}\n", pin(k), k
            printf "%.0f\tupdated %d\n", pin(k), k >>want
        }
    }
    BEGIN {
        create(0); create(n)
        for (p = 1; p < n; p++) { create(p); update(p - 1) }
        update(n - 1); update(n)
    }'
}
# the round's pins as MariaDB has them, every shard of both servers
order_rows() {
    local lo=$((30000000 + $1 * 100000)) hi=$((30000000 + $1 * 100000 + 99999)) s port
    for s in 0 1 2 3 4 5 6 7; do
        port=$DB_A
        [ $s -ge 4 ] && port=$DB_B
        sql $port "SELECT id, title FROM db0000$s.pins WHERE (id & 68719476735) BETWEEN $lo AND $hi"
    done | sort
}
order_round() {
    local r=$1 job
    order_file "$r" >"$WORK/order-$r.jsonl"
    sort -o "$WORK/order-$r.want" "$WORK/order-$r.want"
    "${BWCTL[@]}" submit --batch $((2 * GROUP)) --job "order-$r" "$WORK/order-$r.jsonl" \
        >"$WORK/order-$r.out" 2>"$WORK/order-$r.err" || { tail -3 "$WORK/order-$r.err"; return 1; }
    tail -n 1 "$WORK/order-$r.err"
    job=$(head -n 1 "$WORK/order-$r.out")
    # the default sent parts together and held some back: else this round proved nothing
    grep -Eq "\\): $((NGROUPS + 1)) parts, $((2 * (NGROUPS + 1) * GROUP)) ops sent, .*, [1-9][0-9]* parts held back" \
        "$WORK/order-$r.err" || return 1
    "${BWCTL[@]}" watch --timeout 120 "$job" 2>"$WORK/order-$r.watch" || { cat "$WORK/order-$r.watch"; return 1; }
    order_rows "$r" >"$WORK/order-$r.got"
    diff "$WORK/order-$r.want" "$WORK/order-$r.got" >"$WORK/order-$r.diff" ||
        { echo "$(grep -c '^>' "$WORK/order-$r.diff") pins differ:"; head -5 "$WORK/order-$r.diff"; return 1; }
}
for r in $(seq 1 "$ROUNDS"); do
    check "bwctl submit, defaults: $(((NGROUPS + 1) * GROUP)) pins over 8 shards, each created in one part and updated in the next ($((NGROUPS + 1)) parts), round $r: every pin holds the update" \
        order_round "$r"
done
no_waits_line() { ! grep -q 'held back' "$WORK/order-1.watch" && grep -q '(lane default): ' "$WORK/order-1.watch"; }
check "bwctl watch of a job no shard holds back names its lane and prints no reason" no_waits_line
in_flight_usage() { # (a grep -q on a pipe would cut the help short: pipefail)
    "${BWCTL[@]}" submit --in-flight 17 "$WORK/order-1.jsonl" >/dev/null 2>"$WORK/usage.err"
    [ $? = 2 ] && grep -q -- '--in-flight: 1 to 16 parts' "$WORK/usage.err" &&
        "${BWCTL[@]}" submit --help >"$WORK/usage.out" && grep -q -- '--in-flight 1 sends' "$WORK/usage.out"
}
check "--in-flight takes 1 to 16 (usage otherwise), and the help says what it does" in_flight_usage

# ---- 2. --lane ---------------------------------------------------------------------------------

lo=$(( (1 << 36) | 31000000 ))
for k in 0 1 2; do
    printf '{"op":"create","object_type":"pin","id":%d,"shard_key":"42","fields":{"owner_id":42,"title":"urgent"}}\n' $((lo + k))
done >"$WORK/lane.jsonl"
lane_job() {
    "${BWCTL[@]}" submit --lane urgent "$WORK/lane.jsonl" >"$WORK/lane.out" 2>"$WORK/lane.err" || { cat "$WORK/lane.err"; return 1; }
    curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$(cat "$WORK/lane.out")" | tee "$WORK/lane.json" | jq -e '.lane == "urgent"' >/dev/null &&
        "${BWCTL[@]}" job "$(cat "$WORK/lane.out")" 2>/dev/null | jq -e '.lane == "urgent"' >/dev/null &&
        "${BWCTL[@]}" watch --timeout 60 "$(cat "$WORK/lane.out")" 2>&1 | grep -q '(lane urgent): 3 submitted, 3 applied' &&
        [ "$(sql $DB_A "SELECT COUNT(*) FROM db00000.pins WHERE id BETWEEN $lo AND $((lo + 2)) AND title = 'urgent'")" = 3 ]
}
check "bwctl submit --lane urgent: the job is in the urgent lane (GET /v1/jobs/{id}, bwctl job, bwctl watch), its 3 pins applied" lane_job
other_lane() { # the lane is part of the derived name: another job, not a 409 for another lane
    "${BWCTL[@]}" submit --lane bulk "$WORK/lane.jsonl" >"$WORK/lane-bulk.out" 2>"$WORK/lane-bulk.err" || return 1
    [ "$(cat "$WORK/lane-bulk.out")" != "$(cat "$WORK/lane.out")" ] &&
        curl -sf "http://127.0.0.1:$PROXY/v1/jobs/$(cat "$WORK/lane-bulk.out")" | jq -e '.lane == "bulk"' >/dev/null
}
check "the same file with --lane bulk is another job, in the bulk lane" other_lane
bad_lane() {
    "${BWCTL[@]}" submit --lane nosuch "$WORK/lane.jsonl" >/dev/null 2>"$WORK/nosuch.err"
    [ $? = 1 ] && grep -q 'unknown lane' "$WORK/nosuch.err"
}
check "bwctl submit --lane nosuch: refused, naming the unknown lane (exit 1)" bad_lane

# ---- 3. the shards' "waits" in watch and job ---------------------------------------------------

FAKE=$((PROXY + 90))
waits_id=0123456789abcdef0123456789abcdef
cat >"$WORK/waits.json" <<JSON
{"job_id": "$waits_id", "lane": "bulk", "submitted": 700, "applied": 100, "failed": 0, "pending": 600,
 "finished": false, "sealed": true,
 "shards": [{"shard": 0, "pending": 100, "waits": {"kind": "paused", "detail": "shard 0 paused by alice: reindex"}},
            {"shard": 1, "pending": 100, "waits": {"kind": "error", "detail": "server mysql-a is down"}},
            {"shard": 2, "pending": 100, "waits": {"kind": "error", "detail": "server mysql-a is down"}},
            {"shard": 3, "pending": 100},
            {"shard": 4, "pending": 100, "waits": {"kind": "throttled", "detail": "shard 4 throttled"}},
            {"shard": 5, "pending": 100, "waits": {"kind": "held", "detail": "held until 2026-12-08T02:00:00Z"}},
            {"shard": 6, "pending": 0, "applied": 100}]}
JSON
node -e 'const fs = require("fs"); require("http").createServer((q, r) => {
    r.writeHead(200, {"Content-Type": "application/json"}); r.end(fs.readFileSync(process.argv[1])); }).listen(+process.argv[2], "127.0.0.1")' \
    "$WORK/waits.json" $FAKE >"$WORK/node.log" 2>&1 &
pids+=($!)
wait_for 20 curl -sf "http://127.0.0.1:$FAKE/v1/jobs/$waits_id"
waits_shown() {
    "$BIN/bwctl" -c "$CONF" --url "http://127.0.0.1:$FAKE" watch --timeout 1 "$waits_id" 2>"$WORK/waits-watch.err"
    [ $? = 3 ] || return 1
    cat "$WORK/waits-watch.err"
    grep -qx "job $waits_id (lane bulk) is held back:" "$WORK/waits-watch.err" &&
        grep -qx '  2 shards waiting: server mysql-a is down' "$WORK/waits-watch.err" &&
        grep -qx '  1 shard waiting: shard 0 paused by alice: reindex' "$WORK/waits-watch.err" &&
        grep -qx '  1 shard waiting: shard 4 throttled' "$WORK/waits-watch.err" &&
        grep -qx '  1 more shard waiting for other reasons' "$WORK/waits-watch.err" &&
        [ "$(grep -c 'held back:' "$WORK/waits-watch.err")" = 1 ] # printed once while it does not change
}
check "bwctl watch: a line per reason shards hold the job back, most shards first, at most 3, then the rest counted" waits_shown
job_waits() {
    "$BIN/bwctl" -c "$CONF" --url "http://127.0.0.1:$FAKE" job "$waits_id" >"$WORK/waits-job.out" 2>"$WORK/waits-job.err" &&
        jq -e '.shards[0].waits.kind == "paused"' "$WORK/waits-job.out" >/dev/null &&
        grep -qx '  2 shards waiting: server mysql-a is down' "$WORK/waits-job.err" &&
        ! grep -q waiting "$WORK/waits-job.out"
}
check "bwctl job: the status as JSON on stdout, the same reasons on stderr" job_waits

# ---- 4. a part not taken stops the parts after it ------------------------------------------------

HALT=$((PROXY + 91))
# a proxy that takes parts 0 and 1 and refuses part 2 with a 409; bwctl sends protobuf
# (a 409 once more as JSON: a part an older bwctl may have sent), read here by hand: the
# request's job_part (field 5) and its ops (field 2); its answer a BatchWriteResponse
node -e 'const fs = require("fs");
    const varint = (b, i) => { let v = 0, m = 1; for (;;) { const x = b[i++]; v += (x & 127) * m; m *= 128; if (x < 128) return [v, i]; } };
    const request = b => { let part = 0, ops = 0, i = 0; while (i < b.length) { let t, v; [t, i] = varint(b, i);
        if ((t & 7) === 0) { [v, i] = varint(b, i); if (t >> 3 === 5) part = v; }
        else if ((t & 7) === 2) { [v, i] = varint(b, i); i += v; if (t >> 3 === 2) ops++; }
        else if ((t & 7) === 1) i += 8; else i += 4; } return {job_part: part, ops: ops}; };
    const id = "ab".repeat(16);
    require("http").createServer((q, r) => {
    const chunks = []; q.on("data", c => chunks.push(c)); q.on("end", () => {
        const body = Buffer.concat(chunks), pb = q.headers["content-type"] === "application/x-protobuf";
        if (q.method === "GET") { r.setHeader("Content-Type", "application/json");
            return r.end(JSON.stringify({job_id: id, next_part: 1, parts: 1})); }
        const b = pb ? request(body) : (j => ({job_part: j.job_part, ops: j.ops.length}))(JSON.parse(body));
        fs.appendFileSync(process.argv[1], b.job_part + (pb ? "" : " json") + "\n");
        if (b.job_part === 2) { r.statusCode = 409; r.setHeader("Content-Type", "application/json");
            return r.end(JSON.stringify({error: "part 2 refused by the test"})); }
        r.statusCode = 202;
        if (!pb) { r.setHeader("Content-Type", "application/json");
            return r.end(JSON.stringify({job_id: id, accepted: b.ops, rejected: []})); }
        r.setHeader("Content-Type", "application/x-protobuf");
        r.end(Buffer.concat([Buffer.from([10, 32]), Buffer.from(id), Buffer.from([16, b.ops])]));
    }); }).listen(+process.argv[2], "127.0.0.1")' "$WORK/halt-parts.log" $HALT >"$WORK/halt-node.log" 2>&1 &
pids+=($!)
wait_for 20 curl -sf "http://127.0.0.1:$HALT/v1/jobs/x"
halted() { # 8 parts of 5 pins, each part updating the pins the part before created
    local p k
    for p in 0 1 2 3 4 5 6 7; do for k in 1 2 3 4 5; do
        echo "{\"op\":\"create\",\"object_type\":\"pin\",\"id\":$((68719476736 + 40000000 + p * 10 + k)),\"shard_key\":\"42\",\"fields\":{\"owner_id\":42}}"
        [ $p = 0 ] || echo "{\"op\":\"update\",\"object_type\":\"pin\",\"id\":$((68719476736 + 40000000 + (p - 1) * 10 + k)),\"fields\":{\"title\":\"u\"}}"
    done; done >"$WORK/halt.jsonl"
    : >"$WORK/halt-parts.log"
    "$BIN/bwctl" -c "$CONF" --url "http://127.0.0.1:$HALT" submit --batch 10 --job halt "$WORK/halt.jsonl" \
        >"$WORK/halt.out" 2>"$WORK/halt.err"
    local rc=$?
    cat "$WORK/halt.err"
    [ $rc != 0 ] && grep -q "were not sent, so that none overtakes one of its ops: run the same command again" "$WORK/halt.err" &&
        [ "$(sort -n "$WORK/halt-parts.log" | tr '\n' ' ')" = "0 1 2 2 json " ]
}
check "a part not taken (409 for part 2): the parts after it, each sharing pins with the one before, are not sent; bwctl says so, exit 1" halted

# ---- 5. a line the proxy would refuse, refused alone; a derived name whatever --batch ----------

names() {
    { printf '{"op":"create","object_type":"pin","id":%d,"shard_key":"42","fields":{"owner_id":42,"title":"ok"}}\n' $((68719476736 + 41000001))
      printf '{"op":"create","object_type":"pin","id":%d,"shard_key":"42","fields":{"owner_id":42,"title":"bad \xc0\x80"}}\n' $((68719476736 + 41000002))
      for k in $(seq 3 1500); do
          printf '{"op":"create","object_type":"pin","id":%d,"shard_key":"42","fields":{"owner_id":42,"title":"ok"}}\n' $((68719476736 + 41000000 + k))
      done; } >"$WORK/names.jsonl"
    "${BWCTL[@]}" submit --batch 1000 "$WORK/names.jsonl" >"$WORK/names-1.out" 2>"$WORK/names-1.err"
    grep -q "^line 2: malformed JSON at column 110: invalid UTF-8 in a string" "$WORK/names-1.err" &&
        grep -q ", 1499 accepted, 0 rejected, 1 unreadable lines," "$WORK/names-1.err" || { cat "$WORK/names-1.err"; return 1; }
    "${BWCTL[@]}" submit "$WORK/names.jsonl" >"$WORK/names-2.out" 2>"$WORK/names-2.err" && { echo "the second run took it"; return 1; }
    cat "$WORK/names-2.err"
    local n1 n2 # the derived name, from each run's summary
    n1=$(sed -n 's/^submit: job .* ("\(bwctl-[0-9a-f]*\)").*/\1/p' "$WORK/names-1.err")
    n2=$(sed -n 's/^submit: job .* ("\(bwctl-[0-9a-f]*\)").*/\1/p' "$WORK/names-2.err")
    [ -n "$n1" ] && [ "$n1" = "$n2" ] && grep -q "HTTP 409" "$WORK/names-2.err"
}
check "a line of invalid UTF-8 is refused alone; the same file with the default part size is the same job (409), not sent again" names
names_once() {
    [ "$(sql $DB_A "SELECT COUNT(*) FROM db00000.pins WHERE id BETWEEN $((68719476736 + 41000001)) AND $((68719476736 + 41001500))")" = 1499 ]
}
check "... its 1,499 pins applied once" wait_for 60 names_once


# ---- 6. a job an older bwctl began (its parts in JSON), resumed by this one -------------------

# 10 pins, each liked twice over 20 lines and a line with an id protobuf cannot carry, in
# parts of 5: an older bwctl sent parts 0, 1 and 3 as JSON (the bytes it built, by curl
# here) and was killed; this bwctl's run sends part 0 again (as JSON: the line its reader
# refuses is in it, as before), skips part 1 (below next_part), sends 2 and 4, and part 3
# as protobuf, refused 409 (a resent part must be the same bytes), then as its JSON, which
# the proxy answers as the resend it is; the odd line is rejected alone by the proxy.
# Every pin's like_count must be 2: a part applied twice, not at all, or cut otherwise
# than before would show.
older_job() {
    local lo=$(( (1 << 36) | 42000000 )) k part line body
    for k in $(seq 0 9); do
        printf '{"op":"create","object_type":"pin","id":%d,"shard_key":"42","fields":{"owner_id":42,"title":"liked"}}\n' $((lo + k))
    done >"$WORK/older-pins.jsonl"
    "${BWCTL[@]}" submit --job older-pins "$WORK/older-pins.jsonl" >"$WORK/older-pins.out" 2>"$WORK/older-pins.err" &&
        "${BWCTL[@]}" watch --timeout 60 "$(cat "$WORK/older-pins.out")" 2>/dev/null || { cat "$WORK/older-pins.err"; return 1; }
    { for k in 0 1; do
          printf '{"op":"update","object_type":"pin","id":%d,"fields":{"like_count":{"increment":1}}}\n' $((lo + k))
      done
      # an id protobuf cannot carry: bwctl sent it and the proxy rejected it alone; its part goes as JSON
      echo '{"op":"update","object_type":"pin","id":-1,"fields":{"like_count":{"increment":1}}}'
      for k in $(seq 2 9) $(seq 9 -1 0); do
          printf '{"op":"update","object_type":"pin","id":%d,"fields":{"like_count":{"increment":1}}}\n' $((lo + k))
      done; } >"$WORK/older.jsonl"
    for part in 0 1 3; do # 8 parts on their way: they may be taken in any order
        body="{\"job\":\"older\",\"job_part\":$part,\"job_last\":false,\"ops\":[$(sed -n "$((part * 5 + 1)),$((part * 5 + 5))p" "$WORK/older.jsonl" | paste -sd,)]}"
        curl -sf -H 'Content-Type: application/json' --data-binary "$body" "http://127.0.0.1:$PROXY/v1/batches" >/dev/null ||
            { echo "part $part as JSON was not taken"; return 1; }
    done
    "${BWCTL[@]}" submit --batch 5 --job older "$WORK/older.jsonl" >"$WORK/older.out" 2>"$WORK/older.err"
    [ $? = 1 ] || { cat "$WORK/older.err"; return 1; } # 1: an op was not accepted
    tail -n 1 "$WORK/older.err"
    grep -q "^line 3: .*id -1 is not" "$WORK/older.err" &&
        grep -q ", 20 accepted, 1 rejected, 0 unreadable lines, 1 parts held before (not sent)," "$WORK/older.err" || return 1
    # watch would exit 1 for the rejected op: the job's end is its rows
    for k in $(seq 0 9); do printf '%d\t2\n' $((lo + k)); done >"$WORK/older.want"
    wait_for 60 older_rows_are "$lo"
    diff "$WORK/older.want" "$WORK/older.got"
}
older_rows_are() {
    sql $DB_A "SELECT id, like_count FROM db00000.pins WHERE id BETWEEN $1 AND $(($1 + 9)) ORDER BY id" >"$WORK/older.got"
    cmp -s "$WORK/older.want" "$WORK/older.got"
}
check "a job an older bwctl began with JSON parts (one with a line its reader refuses), resumed: the same parts, each once; every pin liked exactly twice" older_job

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
