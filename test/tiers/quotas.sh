#!/usr/bin/env bash
# test/tiers/quotas.sh kafka: one client's quota held across the fleet's proxies, measured.
#
# A real broker, two MariaDB servers, one consumer, and proxies with one clients file in
# which the client "feed" has ops_per_second = QUOTA (2,000). The client offers four times its
# quota (OFFER requests of OPS creates per second from 4 paced curl processes) and counts the ops
# accepted (202) over a window after a warm-up:
#   1. alternating over two proxies                        within 10 % of the quota
#   2. a third proxy started, alternating over all three   within 10 %
#   3. the same three, the client on one of them only      at least 90 % after a few s
#   4. the two others stopped: one proxy alone             within 10 %
# Then every accepted op is applied exactly once and nothing refused reached MariaDB,
# request by request. The measured rates are printed; about 2.5 minutes in all.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/quotas.sh kafka}
[ "$MODE" = kafka ] || { echo "usage: test/tiers/quotas.sh kafka (proxies share quotas through a real broker)" >&2; exit 2; }
. test/lib.sh
P2=$((28085 + off)) P3=$((28086 + off))
QUOTA=2000 OPS=200 OFFER=40 WARM=${BW_QUOTAS_WARM:-6} WINDOW=${BW_QUOTAS_WINDOW:-20} SHORT=15

digest() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
bw_stack_conf() {
    cat >"$WORK/clients.conf" <<EOF
clients = (
  { name = "sre"; token_sha256 = "$(digest admin-token)"; roles = ["admin"]; },
  { name = "feed"; token_sha256 = "$(digest feed-token)"; roles = ["submit", "read"]; scopes = ["pin:create"];
    ops_per_second = $QUOTA; }
);
EOF
    "$BIN/bwctl" config-set "$1" proxy.auth.clients_file=clients.conf proxy.auth.job_id_secret=quotas-test-secret || exit 1
}
bw_stack_start quotas "$MODE"
start_consumer $C1
start_proxy() { # start_proxy PORT: another proxy of the same deployment; its pid in LAST_PID
    "$BIN/bw-proxy" -c "$CONF" -b "$BROKERS" -p "$1" >"$WORK/proxy-$1.log" 2>&1 &
    LAST_PID=$!
    pids+=($LAST_PID)
}
ready() { # ready PORT...: each proxy's /readyz (the read role's)
    local p
    for p in "$@"; do curl -sf -H 'Authorization: Bearer admin-token' "http://127.0.0.1:$p/readyz" >/dev/null || return 1; done
}
start_proxy $P2; PID2=$LAST_PID
check "two proxies ready, one clients file" wait_for 60 ready $PROXY $P2

# Request i creates pins i*OPS .. i*OPS+OPS-1 of shard 2: a request's rows say whether it
# was applied. send NAME FIRST COUNT PORT...: requests FIRST.. at OFFER per second from
# SENDERS curl processes (connections) each at OFFER/SENDERS, one request after the other,
# each sender to the ports in turn; "i code" lines into $WORK/NAME.codes.
SHARD=2
BASE_ID=$(((SHARD << 46) | (1 << 36)))
OWNER=$(((SHARD << 46) | 4242))
# each sender waits for its answer before the next request: enough of them that a slow 202
# (Kafka's acknowledgement on a loaded machine) never brings the offer under the quota
SENDERS=20 # OFFER / SENDERS requests per second each
send() {
    local name=$1 first=$2 count=$3 j
    shift 3
    for ((j = 0; j < SENDERS; j++)); do
        awk -v first="$first" -v count="$count" -v j=$j -v k=$SENDERS -v ops=$OPS -v base=$BASE_ID -v owner=$OWNER \
            -v ports="$*" 'BEGIN {
            n = split(ports, port, " ")
            for (m = 0; first + j + m * k < first + count; m++) {
                i = first + j + m * k
                if (m) print "next"
                printf "url = \"http://127.0.0.1:%s/v1/batches\"\n", port[(m + j) % n + 1]
                print "header = \"Authorization: Bearer feed-token\"\nheader = \"Content-Type: application/json\""
                printf "data-binary = \"{\\\"ops\\\":["
                for (o = 0; o < ops; o++)
                    printf "%s{\\\"op\\\":\\\"create\\\",\\\"object_type\\\":\\\"pin\\\",\\\"id\\\":%.0f,\\\"shard_key\\\":\\\"%.0f\\\",\\\"fields\\\":{\\\"owner_id\\\":%.0f,\\\"title\\\":\\\"q%d\\\"}}", o ? "," : "", base + i * ops + o, owner, owner, i
                print "]}\""
                print "output = \"/dev/null\"\nwrite-out = \"%{http_code}\\n\""
            }
        }' >"$WORK/$name.$j.curl"
    done
    for ((j = 0; j < SENDERS; j++)); do
        curl -s --rate "$((OFFER / SENDERS))/s" -K "$WORK/$name.$j.curl" |
            awk -v first="$first" -v j=$j -v k=$SENDERS '{print first + j + (NR - 1) * k, $1}' >"$WORK/$name.$j.out" &
    done
    wait
    sort -n "$WORK/$name".*.out >"$WORK/$name.codes"
}
# measure NAME FIRST WINDOW PORT...: requests from FIRST on: a warm-up of WARM s, then
# WINDOW s counted; prints the ops/s accepted
measure() {
    local name=$1 first=$2 window=$3
    shift 3
    send "$name-warm" "$first" $((OFFER * WARM)) "$@"
    local t0 t1 ok
    t0=$(date +%s.%N)
    send "$name" $((first + OFFER * WARM)) $((OFFER * window)) "$@"
    t1=$(date +%s.%N)
    ok=$(awk '$2 == 202' "$WORK/$name.codes" | wc -l)
    echo "$ok $OPS $t0 $t1" | awk '{printf "%.0f\n", $1 * $2 / ($4 - $3)}'
}
within() { # within RATE LOW HIGH (fractions of the quota)
    echo "$1 $QUOTA $2 $3" | awk '{exit !($1 >= $2 * $3 && $1 <= $2 * $4)}'
}
codes_ok() { # every answer of these runs is 202 or 429, and both occur
    cat "$@" >"$WORK/answers"
    ! awk '$2 != 202 && $2 != 429' "$WORK/answers" | grep -q . &&
        grep -q ' 202$' "$WORK/answers" && grep -q ' 429$' "$WORK/answers" ||
        { awk '{print $2}' "$WORK/answers" | sort | uniq -c; return 1; }
}

# ---- 1. two proxies ------------------------------------------------------------------------
shared() { grep -q "client \"feed\": its quota is shared by $1 live proxies" "$WORK/$2"; }
R2=$(measure two 0 $WINDOW $PROXY $P2)
echo "# 2 proxies, round robin, $((OFFER * OPS)) ops/s offered: $R2 ops/s accepted (quota $QUOTA)"
check "2 proxies: the client gets its quota within 10 % ($R2 ops/s of $QUOTA)" within "$R2" 0.9 1.1
check "each proxy logged the quota shared by 2" sh -c "grep -q 'shared by 2 live proxies' '$WORK/proxy.log' &&
    grep -q 'shared by 2 live proxies' '$WORK/proxy-$P2.log'"
check "every answer is 202 or 429 (over quota), and both occur" codes_ok "$WORK"/two*.codes
share_of() { # share_of PORT: this proxy's bulkwrite_proxy_client_quota_share of feed's ops quota
    curl -sf "http://127.0.0.1:$1/metrics" |
        awk '$1 == "bulkwrite_proxy_client_quota_share{client=\"feed\",quota=\"ops_per_second\"}" { print $2 }'
}
halves() { for p in $PROXY $P2; do echo "$(share_of $p)" | awk '{ exit !($1 >= 0.3 && $1 <= 0.7) }' || return 1; done; }
check "each proxy's quota share gauge reads about a half ($(share_of $PROXY), $(share_of $P2))" halves

# ---- 2. a third proxy ------------------------------------------------------------------------
start_proxy $P3; PID3=$LAST_PID
check "a third proxy ready" wait_for 60 ready $P3
R3=$(measure three 10000 $WINDOW $PROXY $P2 $P3)
echo "# 3 proxies, round robin: $R3 ops/s accepted (quota $QUOTA)"
check "3 proxies: the client gets its quota within 10 % ($R3 ops/s of $QUOTA)" within "$R3" 0.9 1.1
check "the first proxy logged the quota shared by 3" shared 3 proxy.log

# ---- 3. one of three ---------------------------------------------------------------------------
R1=$(measure one 20000 $SHORT $P2)
echo "# 1 of 3 proxies used: $R1 ops/s accepted (quota $QUOTA; the 2 idle keep ${QUOTA}x0.05x2/3 ≈ 67)"
check "the client on one proxy of 3 gets at least 90 % of its quota after a few s ($R1 ops/s)" within "$R1" 0.9 1.1
check "every answer is 202 or 429, and both occur" codes_ok "$WORK"/three*.codes "$WORK"/one*.codes

# ---- 4. alone --------------------------------------------------------------------------------
kill $PID2 $PID3
wait $PID2 $PID3 2>/dev/null
alone() { grep -q 'client "feed": its quota is shared by 1 live proxy' "$WORK/proxy.log"; }
check "the proxies stopped leave the fleet at once: the first takes the whole quota" wait_for 10 alone
RA=$(measure alone 30000 $SHORT $PROXY)
echo "# 1 proxy alone: $RA ops/s accepted (quota $QUOTA)"
check "one proxy alone: its quota within 10 % ($RA ops/s)" within "$RA" 0.9 1.1

# ---- rows: each accepted request applied whole, once; none refused ---------------------------
cat "$WORK"/{two,three,one,alone}{-warm,}.codes | awk '$2 == 202 {print $1, '$OPS'}' | sort -n >"$WORK/accepted"
ACCEPTED=$(awk '{s += $2} END {print s}' "$WORK/accepted")
applied_count() { [ "$(mariadb -h127.0.0.1 -P"$DB_A" -uroot -N -e "SELECT COUNT(*) FROM db0000$SHARD.pins")" = "$ACCEPTED" ]; }
check "the consumer applied the $ACCEPTED accepted ops" wait_for 120 applied_count
by_request() {
    mariadb -h127.0.0.1 -P"$DB_A" -uroot -N -e "SELECT ((id - $BASE_ID) DIV $OPS) AS r, COUNT(*) FROM db0000$SHARD.pins
        GROUP BY r ORDER BY r" | tr '\t' ' ' >"$WORK/applied"
    diff "$WORK/accepted" "$WORK/applied" >"$WORK/rows.diff" || { head "$WORK/rows.diff"; return 1; }
}
check "request by request: every accepted one whole, no refused one" by_request

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
