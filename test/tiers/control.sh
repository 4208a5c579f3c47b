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

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
