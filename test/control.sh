#!/usr/bin/env bash
# test/control.sh embedded|kafka: shard control from two proxies at the same moment.
# Two proxies (A on proxy.port, B on a port of its own) share one Kafka; for $ROUNDS
# rounds, a pause of shard $S sent to A and a rate of the same shard sent to B leave at
# the same moment (two background requests, then wait). Both changes must stand, as both
# proxies read them back: a change writes only the fields it sets (shard/N/pause,
# shard/N/rate, ...; docs/operations.md), so neither undoes the other. Every fifth round
# A pauses the whole server (mysql-a, shards 0 to 3) instead. Between rounds the shard
# is resumed and its rate reset. After the last round the consumer obeys the merged
# setting: the paused shard applies nothing while another shard applies its job, its
# status shows the rate; resumed, every shard holds exactly the rows sent, row by row.
#
# On a version whose control record was one whole record per shard (read, modified and
# written back by each proxy), some rounds lose one of the two changes.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: test/control.sh embedded|kafka}
. test/lib.sh
ROUNDS=${BW_CONTROL_ROUNDS:-20} S=2 OTHER=6

bw_stack_start control "$MODE"
A=http://127.0.0.1:$PROXY
"$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" -p 0 --port-file "$WORK/b.port" >"$WORK/proxy-b.log" 2>&1 &
pids+=($!)
check "a second proxy starts on a port of its own" wait_for 60 test -s "$WORK/b.port"
B=http://127.0.0.1:$(cat "$WORK/b.port")
check "... and answers" wait_for 60 curl -sf "$B/healthz"
start_consumer $C1
check "the consumer joins" wait_for 60 curl -sf "http://127.0.0.1:$C1/readyz"
rows_of() { # rows_of SHARD [EXPR]: COUNT(*) (or EXPR) of the pins in the shard's database
    local port=$DB_A
    [ "$1" -ge 4 ] && port=$DB_B
    mariadb -h127.0.0.1 -P"$port" -uroot -N -e "SELECT ${2:-COUNT(*)} FROM db0000$1.pins"
}
# shard S applies something first, so that its applied count has moved once
check "a feed of 100 pins for shard $S is accepted" "$BIN/bw-workload" -c "$CONF" submit --url "$A/v1/batches" feed:100:$S
check "... and applied" wait_for 60 eval '[ "$(rows_of $S)" = 100 ]'

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
metric_of() { curl -sf "http://127.0.0.1:$C1/metrics" | awk -v m="$1{shard=\"$2\"}" '$1 == m {print $2}'; }
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
    "$BIN/bw-workload" -c "$CONF" submit --url "$A/v1/batches" like:100:$S feed:200:$OTHER
check "shard $OTHER applies its 200 creates meanwhile" wait_for 60 eval '[ "$(rows_of $OTHER)" = $((other_rows + 200)) ]'
sleep 2
now_s() { echo "$(rows_of $S 'COALESCE(SUM(like_count), 0)') $(applied)"; }
check "paused shard $S applied nothing (likes $before, $before_applied batches before; $(now_s) now)" \
    test "$(now_s)" = "$before $before_applied"
resume_all() { post "$B" /v1/servers/mysql-a/resume '' "$WORK/b.json" && [ "$(cat "$WORK/b.json.code")" = 200 ]; }
check "resume mysql-a's shards (on proxy B)" resume_all
check "every shard holds exactly the rows sent, row by row" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:100:$S like:100:$S feed:200:$OTHER
check "shard $S's applied count moved after the resume" eval '[ "$(applied)" -gt "$before_applied" ]'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
