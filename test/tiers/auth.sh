#!/usr/bin/env bash
# Authentication and roles on the proxy's HTTP API, tried as hostile and as ordinary
# clients: real MariaDB servers, one consumer, the proxy with a clients file
# (proxy.auth.clients_file), and the embedded Kafka (or a real broker).
#
#   test/tiers/auth.sh embedded|kafka
#
# The clients (tokens for this test only): sre (admin), feed (submit pin:create and
# board:*, read), spam-cleanup (submit pin:delete), dash (read). Each check prints
# "ok - …" or "not ok - …"; the last line is "N passed, N failed".
#
# Then a second proxy on the same Kafka and MariaDB speaks HTTPS with an admin listener
# of its own (proxy.tls, proxy.admin_port): a throwaway CA made here with openssl signs
# its certificate and the clients' (feed.internal, ops.internal; one unknown to the
# clients file; one for servers only); a self-signed one plays the stranger.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/auth.sh embedded|kafka}
. test/lib.sh

rotated() { # rotated NAME OLD_TOKEN NEW_TOKEN ROLES [SCOPES]: a rotation, the old token expired in 2020
    printf '  { name = "%s"; roles = [%s];%s tokens = ( { sha256 = "%s"; expires = "2020-01-01T00:00:00Z"; }, { sha256 = "%s"; } ); }' \
        "$1" "$4" "${5:+ scopes = [$5];}" "$(digest "$2")" "$(digest "$3")"
}
bw_stack_conf() {
    write_clients "$WORK/clients.conf" \
        "$(client sre admin-token '"admin"')" \
        "$(client feed feed-token '"submit", "read"' '"pin:create", "board:*"' | sed 's/ }$//') lanes = [\"default\", \"bulk\"]; }" \
        "$(client spam-cleanup spam-token '"submit"' '"pin:delete"')" \
        "$(rotated dash dash-old-token dash-token '"read"')" \
        "$(client burst burst-token '"submit", "read"' '"pin:create"' | sed 's/ }$//') ops_per_second = 20; }" \
        "$(client bulky bulky-token '"submit"' '"pin:create"' | sed 's/ }$//') bytes_per_second = 2000; }"
    # priority lanes: the feed client may send in default and bulk, not urgent;
    # clients_file is relative: read from the configuration file's folder; a job index
    # of ~20 records, so that it drops some (read back from the topic); secrets from a
    # file and from the environment (each one is looked for in the dumps and every log
    # at the end)
    printf '%s\n' "$PROXY_PW" >"$WORK/proxy.pw"
    "$BIN/bwctl" config-set "$1" 'lanes=( { name = "urgent"; weight = 4; }, { name = "bulk"; weight = 1; } )' \
        proxy.auth.clients_file=clients.conf proxy.auth.job_id_secret=auth-test-secret \
        proxy.jobs_index_max_bytes=4096 \
        'shards.servers[0].proxy_password=file:proxy.pw' 'shards.servers[1].proxy_password=file:proxy.pw' \
        'shards.servers[0].password=env:BW_AUTH_CONSUMER_PW' 'shards.servers[1].password=env:BW_AUTH_CONSUMER_PW' \
        'kafka.properties=[ "sasl.username=nobody", "sasl.password=env:BW_AUTH_KAFKA_PW" ]' || exit 1
}
# recognisable secrets (never in a dump or a log)
PROXY_PW=Proxy-S3cret-$RANDOM$RANDOM
export BW_AUTH_CONSUMER_PW=Consumer-S3cret-$RANDOM$RANDOM BW_AUTH_KAFKA_PW=Kafka-S3cret-$RANDOM$RANDOM
bw_stack_start auth "$MODE"
start_consumer $C1
umask 077
for t in admin feed spam dash; do printf '%s-token\n' $t >"$WORK/$t.token"; done

BASE=http://127.0.0.1:$PROXY
metric() { bw_metric "$BASE/metrics" "$1"; }
# req TOKEN METHOD PATH [JSON]: prints the status; the body goes to $WORK/body, headers to $WORK/headers
req() {
    local auth=()
    [ -n "$1" ] && auth=(-H "Authorization: Bearer $1")
    local data=()
    [ $# -ge 4 ] && data=(-H 'Content-Type: application/json' --data-binary "$4")
    curl -s -o "$WORK/body" -D "$WORK/headers" -w '%{http_code}' -X "$2" "${auth[@]}" "${data[@]}" "$BASE$3"
}
status_is() { # status_is CODE TOKEN METHOD PATH [JSON]
    local want=$1; shift
    local got
    got=$(req "$@")
    cat "$WORK/body"
    [ "$got" = "$want" ] || { echo "HTTP $got, expected $want"; return 1; }
}
body_has() { grep -qF -- "$1" "$WORK/body" || { echo "body lacks: $1"; cat "$WORK/body"; return 1; }; }
header_has() { tr -d '\r' <"$WORK/headers" | grep -qiF -- "$1" || { echo "headers lack: $1"; cat "$WORK/headers"; return 1; }; }

check "bwctl check-config checks the clients file too" bash -c "'$BIN/bwctl' -c '$CONF' check-config | grep -q 'clients.conf: ok (6 clients)'"
check "the proxy logs the clients it loaded" grep -q "clients loaded from $WORK/clients.conf: 6 clients" "$WORK/proxy.log"
check "/healthz answers without a token" status_is 200 "" GET /healthz
check "/metrics answers without a token (open_metrics)" status_is 200 "" GET /metrics

# ---- who is calling ------------------------------------------------------------------
ONE_DELETE='{"ops":[{"op":"delete","object_type":"pin","id":68719476736}]}'
missing() { status_is 401 "" POST /v1/batches "$ONE_DELETE" && header_has 'WWW-Authenticate: Bearer realm="bulkwrite"' &&
    body_has 'no credential'; }
check "a batch without a token: 401 with WWW-Authenticate: Bearer" missing
wrong() { status_is 401 not-a-token POST /v1/batches "$ONE_DELETE" && header_has 'error="invalid_token"' &&
    body_has 'unknown token'; }
check "a batch with a wrong token: 401, invalid_token" wrong
expired() { status_is 401 dash-old-token GET /v1/shards && header_has 'error="invalid_token"' &&
    body_has 'the token expired at 2020-01-01T00:00:00Z'; }
check "an expired token: 401 naming when it expired" expired
check "the proxy warned of it when it loaded the clients" \
    grep -q 'client "dash": token 1 of 2 expired at 2020-01-01T00:00:00Z' "$WORK/proxy.log"
check "the digest itself is no token: 401" status_is 401 "$(digest admin-token)" GET /v1/shards
basic() { curl -s -o "$WORK/body" -w '%{http_code}' -u sre:admin-token "$BASE/v1/shards" | grep -qx 401; }
check "Basic credentials are no bearer token: 401" basic
check "GET /v1/shards without a token: 401" status_is 401 "" GET /v1/shards
check "shard control without a token: 401" status_is 401 "" POST /v1/shards/3/pause '{}'
check "an unknown endpoint without a token: 401, not 404" status_is 401 "" GET /v1/secret

# ---- the page and what it reads --------------------------------------------------------
page_open() { status_is 200 "" GET /ui/ && body_has '<!doctype html>' && header_has "Content-Security-Policy: default-src 'self'"; }
check "the page's files need no token (no data in them), under a strict Content-Security-Policy" page_open
check "... but what it reads does: GET /v1/fleet without a token is 401" status_is 401 "" GET /v1/fleet
whoami_read() { status_is 200 dash-token GET /v1/whoami && body_has '"client":"dash","roles":["read"],"admin":false'; }
check "GET /v1/whoami: a read client is no admin (the page shows it no controls)" whoami_read
whoami_admin() { status_is 200 admin-token GET /v1/whoami && body_has '"admin":true'; }
check "... an admin is" whoami_admin
fleet_read() { status_is 200 dash-token GET /v1/fleet && body_has '"servers":[{"name":"mysql-a"' && ! body_has '"address"'; }
check "GET /v1/fleet for a read client: the servers, without their addresses" fleet_read
fleet_admin() { status_is 200 admin-token GET /v1/fleet && body_has '"address":"127.0.0.1:'; }
check "... with them for an admin" fleet_admin
check "GET /v1/fleet for a submit-only client: 403" status_is 403 spam-token GET /v1/fleet

# ---- what they may do ----------------------------------------------------------------
check "a read client lists the shards" status_is 200 dash-token GET /v1/shards
read_posts() { status_is 403 dash-token POST /v1/batches "$ONE_DELETE" &&
    body_has 'POST /v1/batches needs the submit role; client \"dash\" has read'; }
check "a read client posting a batch: 403 with the reason" read_posts
submit_controls() { status_is 403 feed-token POST /v1/shards/3/pause '{"reason":"not mine"}' &&
    body_has 'needs the admin role; client \"feed\" has submit, read'; }
check "a submit client pausing a shard: 403 with the reason" submit_controls
check "a submit client pausing a whole server: 403" status_is 403 feed-token POST /v1/servers/mysql-a/pause '{}'
check "server control without a token: 401" status_is 401 "" POST /v1/servers/mysql-a/pause '{}'
check "a submit client setting a server's budget: 403" status_is 403 feed-token POST /v1/servers/mysql-a/budget '{"rate": 10}'
bwctl_refused() {
    ! BW_TOKEN=feed-token "$BIN/bwctl" -c "$CONF" --url "$BASE" set-rate 3 0 2>"$WORK/bwctl.err" &&
        grep -q "needs the admin role" "$WORK/bwctl.err"
}
check "bwctl set-rate with a submit client's token fails with the reason" bwctl_refused
# cancel: the job's owner or an admin; another submitter does not see the job, a reader may not
cancel_job_id=""
spam_job() {
    status_is 202 spam-token POST /v1/batches \
        '{"request_id":"cancel-auth-1","ops":[{"op":"delete","object_type":"pin","id":68719476999}]}' || return 1
    cancel_job_id=$(jq -r .job_id "$WORK/body")
}
check "the spam-cleanup client submits a job to cancel" spam_job
check "another submitter cancelling it: 404, as if it did not exist" status_is 404 feed-token DELETE "/v1/jobs/$cancel_job_id"
# (the second forbidden call of dash, counted below)
check "a read client cancelling it: 403 (DELETE needs submit or admin)" status_is 403 dash-token DELETE "/v1/jobs/$cancel_job_id"
own_cancel() { status_is 200 spam-token DELETE "/v1/jobs/$cancel_job_id?reason=mine" && body_has '"cancelled_by":"spam-cleanup"'; }
check "its owner cancels it, and the status names the owner" own_cancel
admin_cancel() { status_is 200 admin-token DELETE "/v1/jobs/$cancel_job_id" && body_has '"cancel_reason":"mine"'; }
check "an admin cancelling it again changes nothing: the first cancellation stands" admin_cancel
# the job's failures, page by page: as its status, the owner's or an admin's
check "another submitter reading its failures: 404" status_is 404 feed-token GET "/v1/jobs/$cancel_job_id/failures"
check "its owner without the read role: 403, as for its status" status_is 403 spam-token GET "/v1/jobs/$cancel_job_id/failures"
admin_failures() { status_is 200 admin-token GET "/v1/jobs/$cancel_job_id/failures?limit=10" && body_has '"failures":[]' &&
    body_has '"next":null'; }
check "an admin reads them (none: one page, without a next)" admin_failures
check "a limit out of range: 400" status_is 400 admin-token GET "/v1/jobs/$cancel_job_id/failures?limit=0"
check "a spam-cleanup client may not read jobs: 403" status_is 403 spam-token GET /v1/jobs/0123456789abcdef0123456789abcdef

# The spam-cleanup client may delete pins, not create them: one request with both.
SHARD=2
PIN_TYPE_BITS=$((1 << 36))
pin() { echo $(((SHARD << 46) | PIN_TYPE_BITS | $1)); }
OWNER=$(((SHARD << 46) | 4242))
create() { printf '{"op":"create","object_type":"pin","id":%s,"shard_key":"%s","fields":{"owner_id":%s,"title":"t%s"}}' \
    "$(pin "$1")" "$OWNER" "$OWNER" "$1"; }
delete() { printf '{"op":"delete","object_type":"pin","id":%s}' "$(pin "$1")"; }
pins_in() { # pins_in LOCAL...: how many of these pins shard 2 holds
    local ids=() l
    for l in "$@"; do ids+=("$(pin "$l")"); done
    mariadb -h127.0.0.1 -P"$DB_A" -uroot -N -e "SELECT COUNT(*) FROM db0000$SHARD.pins WHERE id IN ($(IFS=,; echo "${ids[*]}"))"
}
check "the feed client creates 3 pins" status_is 202 feed-token POST /v1/batches \
    "{\"ops\":[$(create 11),$(create 12),$(create 13)]}"
three_there() { [ "$(pins_in 11 12 13)" = 3 ]; }
check "the 3 pins are applied" wait_for 60 three_there
mixed="{\"ops\":[$(create 1),$(delete 11),$(create 2),$(delete 12),$(delete 13),$(create 3)]}"
mixed_ok() {
    status_is 202 spam-token POST /v1/batches "$mixed" && body_has '"accepted":3' &&
        jq -e '[.rejected[].index] == [0, 2, 5]' "$WORK/body" >/dev/null &&
        jq -e 'all(.rejected[]; .reason == "forbidden: client \"spam-cleanup\" may not create pin (its scopes: pin:delete)")' \
            "$WORK/body" >/dev/null
}
check "spam-cleanup: creates refused per op naming the scope, deletes accepted (202, 3 of 6)" mixed_ok
deleted() { [ "$(pins_in 11 12 13)" = 0 ]; }
check "the 3 deletes are applied in MariaDB" wait_for 60 deleted
check "none of the refused creates reached MariaDB" test "$(pins_in 1 2 3)" = 0
only_creates() { status_is 403 spam-token POST /v1/batches "{\"ops\":[$(create 4),$(create 5)]}" &&
    body_has '"accepted":0' && body_has 'may not create pin'; }
check "spam-cleanup sending only creates: 403, every op listed" only_creates
# lanes: a client limited to some lanes (the feed: default and bulk) gets 403 for another
urgent_refused() { status_is 403 feed-token POST /v1/batches "{\"lane\":\"urgent\",\"ops\":[$(create 31)]}" &&
    body_has 'forbidden: client \"feed\" may not use lane \"urgent\" (its lanes: default, bulk)'; }
check "the feed client may not send in the urgent lane: 403 naming its lanes" urgent_refused
check "the feed client sends in the bulk lane: 202" status_is 202 feed-token POST /v1/batches \
    "{\"lane\":\"bulk\",\"ops\":[$(create 32)]}"
bulk_pin_there() { [ "$(pins_in 32)" = 1 ]; }
check "the bulk lane's pin is applied" wait_for 60 bulk_pin_there
check "the refused urgent one never is" test "$(pins_in 31)" = 0
# (once applied: lanes keep no order between them)
check "spam-cleanup (no lanes listed) deletes it in the urgent lane: 202" status_is 202 spam-token POST /v1/batches \
    "{\"lane\":\"urgent\",\"ops\":[$(delete 32)]}"
bulk_pin_gone() { [ "$(pins_in 32)" = 0 ]; }
check "the urgent delete is applied" wait_for 60 bulk_pin_gone

# The tools send tokens from a file (--token-file) or BW_TOKEN, never from argv.
check "bw-workload without a token is refused" bash -c "! '$BIN/bw-workload' -c '$CONF' submit --url '$BASE/v1/batches' feed:100:4"
check "bw-workload: the feed client's feed (--token-file)" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$BASE/v1/batches" --token-file "$WORK/feed.token" feed:2000:4
check "bw-workload: the spam-cleanup client's cleanup (BW_TOKEN)" \
    env BW_TOKEN=spam-token "$BIN/bw-workload" -c "$CONF" submit --url "$BASE/v1/batches" cleanup:2000:4
check "every row of the feed and the cleanup is in place" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:2000:4 cleanup:2000:4

# ---- request_id belongs to its client ---------------------------------------------------
job_of() { jq -r .job_id "$WORK/body"; }
nightly() { printf '{"request_id":"nightly-1","ops":[%s]}' "$(create "$1")"; }
check "feed submits request_id nightly-1 (pin 21)" status_is 202 feed-token POST /v1/batches "$(nightly 21)"
FEED_JOB=$(job_of)
check "the admin submits its own nightly-1 (pin 22): another client's id, not a duplicate" \
    status_is 202 admin-token POST /v1/batches "$(nightly 22)"
SRE_JOB=$(job_of)
check "... as another job" test -n "$FEED_JOB" -a "$FEED_JOB" != "$SRE_JOB"
both_applied() { [ "$(pins_in 21 22)" = 2 ]; }
check "both clients' nightly-1 are applied" wait_for 60 both_applied
hmac_id() { printf 'bulkwrite.v1/%s\0%s' "$1" "$2" | openssl dgst -sha256 -hmac auth-test-secret | awk '{print substr($2, 1, 32)}'; }
check "the job id is HMAC(job_id_secret, client, request_id), not md5 of the request_id" \
    bash -c "[ '$FEED_JOB' = '$(hmac_id feed nightly-1)' ] && [ '$FEED_JOB' != '$(printf bulkwrite.v1/nightly-1 | md5sum | cut -c1-32)' ]"
same_again() { status_is 202 feed-token POST /v1/batches "$(nightly 21)" && [ "$(job_of)" = "$FEED_JOB" ]; }
check "feed resends nightly-1 byte for byte: 202, the same job" same_again
conflict() { status_is 409 feed-token POST /v1/batches "$(nightly 23)" &&
    body_has 'request_id \"nightly-1\" was used at' && body_has 'for a different body'; }
check "feed reuses nightly-1 for another body (pin 23): 409 with the reason" conflict
check "a read client without the job sees no job (404)" status_is 404 dash-token GET "/v1/jobs/$FEED_JOB"
check "feed reads its own job" status_is 200 feed-token GET "/v1/jobs/$FEED_JOB"
check "feed does not read the admin's job (404)" status_is 404 feed-token GET "/v1/jobs/$SRE_JOB"
check "the admin reads every job" status_is 200 admin-token GET "/v1/jobs/$FEED_JOB"

# ---- quotas -----------------------------------------------------------------------------
creates() { # creates FIRST LAST: a batch creating pins FIRST..LAST
    local ops=() l
    for ((l = $1; l <= $2; l++)); do ops+=("$(create "$l")"); done
    printf '{"ops":[%s]}' "$(IFS=,; echo "${ops[*]}")"
}
check "burst (20 ops/s) sends 60 creates at once: 202 (a burst is paid for after)" \
    status_is 202 burst-token POST /v1/batches "$(creates 100 159)"
over_ops() { status_is 429 burst-token POST /v1/batches "$(creates 160 160)" && header_has 'Retry-After: ' &&
    body_has 'client \"burst\" is over its quota of 20 ops per second'; }
check "burst's next batch: 429 with Retry-After, naming the quota" over_ops
RETRY=$(tr -d '\r' <"$WORK/headers" | awk -F': ' 'tolower($1) == "retry-after" {print $2}')
check "Retry-After is 1 to 3 seconds (60 ops at 20/s)" test "${RETRY:-0}" -ge 1 -a "${RETRY:-0}" -le 3
check "feed is not held back by burst's quota" status_is 202 feed-token POST /v1/batches "$(creates 300 309 | sed 's/^{/{"request_id":"feed-300",/')"
sleep "${RETRY:-3}"
check "burst after Retry-After: 202" status_is 202 burst-token POST /v1/batches "$(creates 160 160)"
check "bulky (2,000 bytes/s) sends a 3 KB batch: 202" status_is 202 bulky-token POST /v1/batches "$(creates 200 219)"
over_bytes() { status_is 429 bulky-token POST /v1/batches "$(creates 220 220)" && header_has 'Retry-After: ' &&
    body_has 'over its quota of 2000 bytes per second'; }
check "bulky's next batch: 429 naming the bytes quota" over_bytes
quota_rows() { [ "$(pins_in $(seq 100 160) $(seq 300 309) $(seq 200 219))" = 91 ]; }
check "every accepted quota batch is applied, row by row (91 pins)" wait_for 60 quota_rows
check "nothing refused reached MariaDB (pins 23 and 220)" test "$(pins_in 23 220)" = 0
deletes() { # deletes LOCAL...: a batch deleting these pins
    local ops=() l
    for l in "$@"; do ops+=("$(delete "$l")"); done
    printf '{"ops":[%s]}' "$(IFS=,; echo "${ops[*]}")"
}
check "the admin deletes the 91 quota pins (the last verify counts every row of shard 2)" \
    status_is 202 admin-token POST /v1/batches "$(deletes $(seq 100 160) $(seq 300 309) $(seq 200 219))"
quota_gone() { [ "$(pins_in $(seq 100 160) $(seq 300 309) $(seq 200 219))" = 0 ]; }
check "... they are gone" wait_for 60 quota_gone

# ---- the job index is bounded; a dropped job is read back from the topic -----------------
many_jobs() {
    local i
    for ((i = 0; i < 40; i++)); do
        [ "$(req admin-token POST /v1/batches "{\"ops\":[$(delete $((500 + i)))]}")" = 202 ] || return 1
    done
}
check "40 more jobs" many_jobs
index_bounded() {
    local bytes evicted
    bytes=$(metric bulkwrite_proxy_jobs_index_bytes) evicted=$(metric bulkwrite_proxy_jobs_index_evicted_total)
    echo "index: $bytes bytes (bound 4096), $evicted dropped"
    [ "${bytes:-99999}" -le 4096 ] && [ "${evicted:-0}" -ge 20 ]
}
check "the job index stays within jobs_index_max_bytes, dropping the least recently used" index_bounded
reads_before=$(grep -c "read in .* ms (not in the index" "$WORK/proxy.log")
echo "# the proxy read the topic for $reads_before dropped jobs so far"
read_back() { status_is 200 feed-token GET "/v1/jobs/$FEED_JOB" && body_has "\"job_id\":\"$FEED_JOB\"" &&
    body_has '"submitted":1'; }
check "feed's nightly-1, dropped from the index, is read back from the jobs topic (200)" read_back
topic_reads() { grep -c "read in .* ms (not in the index" "$WORK/proxy.log"; }
read_logged() { [ "$(topic_reads)" = $((reads_before + 1)) ] &&
    grep "job found in .* read in .* ms (not in the index" "$WORK/proxy.log" | tail -1 | grep -q "$FEED_JOB" &&
    [ "$(metric bulkwrite_proxy_jobs_read_from_topic_total)" -ge 1 ]; }
check "... read from the topic once, as the log and the metrics say" read_logged
check "a job id never submitted: 404 at once" status_is 404 admin-token GET /v1/jobs/0123456789abcdef0123456789abcdef
check "... without reading the topic (the filter of ids read)" test "$(topic_reads)" = $((reads_before + 1))

# ---- the admin ------------------------------------------------------------------------
paused() { # paused SHARD: true or false in GET /v1/shards
    req dash-token GET /v1/shards >/dev/null && jq -r --argjson s "$1" '.shards[] | select(.shard == $s) | .paused' "$WORK/body"
}
check "the admin pauses shard 3 (bwctl --token-file)" \
    "$BIN/bwctl" -c "$CONF" --url "$BASE" --token-file "$WORK/admin.token" pause 3 --reason "auth test"
is_paused() { [ "$(paused 3)" = true ]; }
check "shard 3 shows paused" wait_for 10 is_paused
check "the admin resumes shard 3 (BW_TOKEN)" env BW_TOKEN=admin-token "$BIN/bwctl" -c "$CONF" --url "$BASE" resume 3
not_paused() { [ "$(paused 3)" = false ]; }
check "shard 3 shows resumed" wait_for 10 not_paused
# every change names who, when, from where and why: in the record, the log and bwctl
audit_in_shards() {
    req dash-token GET /v1/shards >/dev/null &&
        jq -e '.shards[] | select(.shard == 3) | .changed_by == "sre" and .changed_from == "127.0.0.1" and
            (.history | length) == 2 and .history[0].action == "resume" and .history[1].action == "pause" and
            .history[1].reason == "auth test" and .history[1].by == "sre" and .history[1].from == "127.0.0.1" and
            (.history[1].setting | startswith("paused")) and .history[0].at_ms >= .history[1].at_ms' "$WORK/body" >/dev/null ||
        { jq -c '.shards[] | select(.shard == 3)' "$WORK/body"; return 1; }
}
check "GET /v1/shards: shard 3's record names sre from 127.0.0.1, with both changes, newest first" audit_in_shards
check "the log names who paused shard 3, from where, and why" \
    grep -q 'operator: pause by sre from 127.0.0.1, now paused; configured stmt/s; configured rows/s: auth test' "$WORK/proxy.log"
bwctl_history() {
    BW_TOKEN=dash-token "$BIN/bwctl" -c "$CONF" --url "$BASE" shards --history >"$WORK/history.txt" &&
        grep -E '^3 +[0-9T:.-]+Z +pause +sre +127\.0\.0\.1 +paused; .* auth test$' "$WORK/history.txt" &&
        grep -E '^3 +[0-9T:.-]+Z +resume +sre +127\.0\.0\.1 +running; ' "$WORK/history.txt"
}
check "bwctl shards --history lists both changes with who and where" bwctl_history
consumer_logged() { grep -q 'paused (operator sre from 127.0.0.1: auth test)' "$WORK/consumer-$C1.log"; }
check "the consumer's log names who paused shard 3 and from where" wait_for 10 consumer_logged
check "the admin may post a batch too" status_is 202 admin-token POST /v1/batches "{\"ops\":[$(delete 99)]}"

# ---- metrics --------------------------------------------------------------------------
metrics_ok() {
    local f401 f403 dash spam
    f401=$(metric 'bulkwrite_proxy_requests_total{code="401"}') f403=$(metric 'bulkwrite_proxy_requests_total{code="403"}')
    dash=$(metric 'bulkwrite_proxy_client_forbidden_total{client="dash"}')
    spam=$(metric 'bulkwrite_proxy_client_ops_out_of_scope_total{client="spam-cleanup"}')
    local ops bytes burst_ops
    ops=$(metric 'bulkwrite_proxy_client_over_quota_total{client="burst",quota="ops_per_second"}')
    bytes=$(metric 'bulkwrite_proxy_client_over_quota_total{client="bulky",quota="bytes_per_second"}')
    burst_ops=$(metric 'bulkwrite_proxy_client_accepted_ops_total{client="burst"}')
    echo "401: $f401, 403: $f403, dash forbidden: $dash, spam-cleanup out of scope: $spam," \
        "burst over ops: $ops, bulky over bytes: $bytes, burst accepted: $burst_ops"
    [ "${f401:-0}" -ge 7 ] && [ "${f403:-0}" -ge 5 ] && [ "$dash" = 2 ] && [ "$spam" = 5 ] &&
        [ "$ops" = 1 ] && [ "$bytes" = 1 ] && [ "$burst_ops" = 61 ]
}
check "401s, 403s, refusals and quotas per client are counted" metrics_ok
check "promtool accepts the proxy's metrics with client labels" bash -c "curl -sf $BASE/metrics | promtool check metrics"

# ---- SIGHUP: a new token works, a removed one gets 401, a rotated one is the same client -
write_clients "$WORK/clients.conf" \
    "$(client sre admin-token '"admin"')" \
    "$(rotated feed feed-token feed-token-2 '"submit", "read"' '"pin:create", "board:*"')" \
    "$(client spam-cleanup spam-token '"submit"' '"pin:delete"')" \
    "$(client dash2 dash-token-2 '"read"')"
kill -HUP "$PROXY_PID"
new_works() { [ "$(req dash-token-2 GET /v1/shards)" = 200 ]; }
check "after SIGHUP a new client's token works" wait_for 10 new_works
check "after SIGHUP a removed client's token gets 401" status_is 401 dash-token GET /v1/shards
check "the reload is logged" grep -q "SIGHUP: clients reloaded from $WORK/clients.conf: 4 clients" "$WORK/proxy.log"
check "feed's rotated token is feed: it reads feed's nightly-1 job" status_is 200 feed-token-2 GET "/v1/jobs/$FEED_JOB"
check "... and feed's old token, expired now, gets 401" status_is 401 feed-token GET "/v1/jobs/$FEED_JOB"
printf 'clients = ( { name = "broken"; roles = ["admin"]; } );\n' >"$WORK/clients.conf"
kill -HUP "$PROXY_PID"
broken_logged() { grep -q 'clients file not reloaded, the clients loaded before stay: .*client "broken": needs token_sha256' "$WORK/proxy.log"; }
check "a clients file that does not parse is refused, with the reason logged" wait_for 10 broken_logged
check "... and the clients loaded before stay" status_is 200 dash-token-2 GET /v1/shards
check_config_refuses() {
    ! "$BIN/bwctl" -c "$CONF" check-config 2>"$WORK/check.err" && cat "$WORK/check.err" &&
        grep -q 'clients.conf:1: client "broken": needs token_sha256' "$WORK/check.err"
}
check "bwctl check-config names the broken clients file's line and client" check_config_refuses
check "the proxy survived it all" status_is 200 "" GET /healthz

# ---- HTTPS, client certificates and the admin listener ----------------------------------
TLS=$WORK/tls
TLS_PORT=$((PROXY + 3)) ADMIN_PORT=$((PROXY + 4))
mkdir -p "$TLS"
newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$TLS/$1.key" 2>/dev/null; }
issue() { # issue NAME SUBJECT_CN EXTENSIONS: a certificate for NAME signed by the test CA
    newkey "$1" && openssl req -new -key "$TLS/$1.key" -subj "/CN=$2" -out "$TLS/$1.csr" 2>/dev/null &&
        printf '%s\n' "$3" >"$TLS/$1.ext" &&
        openssl x509 -req -in "$TLS/$1.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial -days 2 \
            -extfile "$TLS/$1.ext" -out "$TLS/$1.pem" 2>/dev/null
}
make_certs() {
    newkey ca && openssl req -x509 -new -key "$TLS/ca.key" -subj "/CN=bulkwrite test CA" -days 2 \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$TLS/ca.pem" 2>/dev/null &&
        issue server localhost $'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth' &&
        issue feed "Feed pipeline" $'subjectAltName=DNS:feed.internal\nextendedKeyUsage=clientAuth' &&
        issue ops ops.internal 'extendedKeyUsage=clientAuth' &&
        issue other "Other" $'subjectAltName=URI:spiffe://elsewhere/other\nextendedKeyUsage=clientAuth' &&
        issue serveronly "Feed as a server" $'subjectAltName=DNS:feed.internal\nextendedKeyUsage=serverAuth' &&
        newkey stranger && openssl req -x509 -new -key "$TLS/stranger.key" -subj "/CN=feed.internal" -days 2 \
            -addext "subjectAltName=DNS:feed.internal" -out "$TLS/stranger.pem" 2>/dev/null
}
check "a throwaway CA, the server's and the clients' certificates (openssl)" make_certs
write_clients "$WORK/tls-clients.conf" \
    "$(client sre admin-token '"admin"')" \
    "$(client dash dash-token '"read"')" \
    '  { name = "feed-cert"; cert_identity = "feed.internal"; roles = ["submit", "read"]; scopes = ["pin:create", "board:*"]; }' \
    '  { name = "ops-cert"; cert_identity = "ops.internal"; roles = ["admin"]; }'
TLS_CONF=$WORK/tls.conf
cp "$CONF" "$TLS_CONF" && "$BIN/bwctl" config-set "$TLS_CONF" proxy.port=$TLS_PORT proxy.auth.clients_file=tls-clients.conf \
    proxy.tls.cert_file=tls/server.pem proxy.tls.key_file=tls/server.key proxy.tls.client_ca_file=tls/ca.pem \
    proxy.admin_port=$ADMIN_PORT || exit 1
check "bwctl check-config reads the TLS files" bash -c "'$BIN/bwctl' -c '$TLS_CONF' check-config | grep -q 'proxy.tls: ok (certificate, key, client CAs)'"
"$BIN/bw-proxy" -c "$TLS_CONF" -b "$BROKERS" >"$WORK/proxy-tls.log" 2>&1 &
TLS_PID=$!
pids+=($TLS_PID)
DATA=https://127.0.0.1:$TLS_PORT ADMIN=https://127.0.0.1:$ADMIN_PORT
tls_up() { curl -sf --cacert "$TLS/ca.pem" "$DATA/healthz"; }
check "the HTTPS proxy starts: /healthz over TLS with the test CA" wait_for 60 tls_up
check "it logs both listeners and the client certificate mode" bash -c "grep -q 'listening on https://127.0.0.1:$TLS_PORT' '$WORK/proxy-tls.log' &&
    grep -q 'admin API on https://127.0.0.1:$ADMIN_PORT' '$WORK/proxy-tls.log' && grep -q 'client certificates verified when presented' '$WORK/proxy-tls.log'"
# treq CURL_ARGS... URL: prints the status; body in $WORK/body ("000": no HTTP answer)
treq() { curl -s -o "$WORK/body" -w '%{http_code}' --cacert "$TLS/ca.pem" "$@"; }
tstatus_is() { # tstatus_is CODE CURL_ARGS... URL
    local want=$1; shift
    local got
    got=$(treq "$@")
    cat "$WORK/body"
    [ "$got" = "$want" ] || { echo "HTTP $got, expected $want"; return 1; }
}
plain_refused() { ! curl -s -o /dev/null -m 5 "http://127.0.0.1:$TLS_PORT/healthz"; }
check "plain HTTP to the TLS port gets no answer" plain_refused
untrusted() { curl -s -o /dev/null "$DATA/healthz"; [ $? = 60 ]; }
check "without the test CA, curl does not trust the proxy (exit 60)" untrusted
as_feed=(--cert "$TLS/feed.pem" --key "$TLS/feed.key")
as_ops=(--cert "$TLS/ops.pem" --key "$TLS/ops.key")
json=(-H 'Content-Type: application/json')
FEED_CREATE="{\"ops\":[$(create 21),$(create 22)]}"
check "no certificate, no token: 401" tstatus_is 401 "${json[@]}" --data-binary "$FEED_CREATE" "$DATA/v1/batches"
cert_submits() { tstatus_is 202 "${as_feed[@]}" "${json[@]}" --data-binary "$FEED_CREATE" "$DATA/v1/batches" && body_has '"accepted":2'; }
check "feed.internal's certificate, no token: a batch is accepted (202)" cert_submits
cert_scoped() { tstatus_is 403 "${as_feed[@]}" "${json[@]}" --data-binary "{\"ops\":[$(delete 21)]}" "$DATA/v1/batches" &&
    body_has 'forbidden: client \"feed-cert\" may not delete pin'; }
check "... its scopes apply: a delete is refused (403)" cert_scoped
cert_no_admin() { tstatus_is 403 "${as_feed[@]}" "${json[@]}" -d '{}' "$ADMIN/v1/shards/3/pause" &&
    body_has 'needs the admin role; client \"feed-cert\" has submit, read'; }
check "... and its roles: shard control refused (403) on the admin port" cert_no_admin
check "... it reads with the read role" tstatus_is 200 "${as_feed[@]}" "$DATA/v1/shards"
two_there() { [ "$(pins_in 21 22)" = 2 ]; }
check "the certificate client's pins are applied" wait_for 60 two_there
stranger() { tstatus_is 401 --cert "$TLS/stranger.pem" --key "$TLS/stranger.key" "$DATA/v1/shards" &&
    body_has 'client certificate refused' && body_has 'issuer is unknown'; }
check "a self-signed certificate naming feed.internal: 401 with the reason" stranger
stranger_token() { tstatus_is 401 --cert "$TLS/stranger.pem" --key "$TLS/stranger.key" -H 'Authorization: Bearer dash-token' \
    "$DATA/v1/shards" && body_has 'client certificate refused'; }
check "... even beside a valid token" stranger_token
server_cert() { tstatus_is 401 --cert "$TLS/serveronly.pem" --key "$TLS/serveronly.key" "$DATA/v1/shards" &&
    body_has 'client certificate refused'; }
check "a certificate of the CA for servers only (key purpose): 401" server_cert
unmapped() { tstatus_is 401 --cert "$TLS/other.pem" --key "$TLS/other.key" "$DATA/v1/shards" &&
    body_has 'identity \"spiffe://elsewhere/other\" is no client'"'"'s cert_identity'; }
check "a good certificate that is no client's: 401 naming its identity" unmapped
mixed_creds() { tstatus_is 401 "${as_feed[@]}" -H 'Authorization: Bearer dash-token' "$DATA/v1/shards" &&
    body_has 'the client certificate is client \"feed-cert\"'; }
check "a certificate and a token of two clients: 401" mixed_creds
check "a token alone works over HTTPS" tstatus_is 200 -H 'Authorization: Bearer dash-token' "$DATA/v1/shards"
admin_on_data() { tstatus_is 404 -H 'Authorization: Bearer admin-token' -d '{}' "$DATA/v1/shards/3/pause" &&
    body_has 'shard and server control are served on the admin listener only'; }
check "shard control on the data port, even by the admin: 404 with the reason" admin_on_data
budget_on_data() { tstatus_is 404 -H 'Authorization: Bearer admin-token' -d '{"rate": 10}' "$DATA/v1/servers/mysql-a/budget" &&
    body_has 'shard and server control are served on the admin listener only'; }
check "a server's budget on the data port, even by the admin: 404 with the reason" budget_on_data
check "shard control without a credential on the admin port: 401" tstatus_is 401 -d '{}' "$ADMIN/v1/shards/3/pause"
batch_on_admin() { tstatus_is 404 -H 'Authorization: Bearer admin-token' "${json[@]}" --data-binary "$FEED_CREATE" \
    "$ADMIN/v1/batches" && body_has 'is not served on the admin listener'; }
check "the admin port serves no batches: 404" batch_on_admin
check "the admin port serves /healthz, /metrics and GET /v1/shards" bash -c "
    curl -sf --cacert '$TLS/ca.pem' '$ADMIN/healthz' >/dev/null && curl -sf --cacert '$TLS/ca.pem' '$ADMIN/metrics' >/dev/null &&
    curl -sf --cacert '$TLS/ca.pem' -H 'Authorization: Bearer dash-token' '$ADMIN/v1/shards' >/dev/null"
tpaused() { curl -s --cacert "$TLS/ca.pem" -H 'Authorization: Bearer dash-token' "$DATA/v1/shards" |
    jq -r --argjson s "$1" '.shards[] | select(.shard == $s) | .paused'; }
check "the admin pauses shard 3 on the admin port (curl, token)" \
    tstatus_is 200 -H 'Authorization: Bearer admin-token' -d '{"reason":"tls test"}' "$ADMIN/v1/shards/3/pause"
tls_paused() { [ "$(tpaused 3)" = true ]; }
check "shard 3 shows paused" wait_for 10 tls_paused
check "bwctl resumes shard 3 through the configured admin listener with ops.internal's certificate" \
    "$BIN/bwctl" -c "$TLS_CONF" --cacert "$TLS/ca.pem" --cert "$TLS/ops.pem" --key "$TLS/ops.key" resume 3
tls_resumed() { [ "$(tpaused 3)" = false ]; }
check "shard 3 shows resumed" wait_for 10 tls_resumed
check "bwctl set-rate through the admin listener with a token" \
    "$BIN/bwctl" -c "$TLS_CONF" --cacert "$TLS/ca.pem" --token-file "$WORK/admin.token" set-rate 3 default
bwctl_data_port() {
    ! "$BIN/bwctl" -c "$TLS_CONF" --cacert "$TLS/ca.pem" --token-file "$WORK/admin.token" --admin-url "$DATA" pause 3 \
        2>"$WORK/bwctl.err" && grep -q 'served on the admin listener only' "$WORK/bwctl.err"
}
check "bwctl pointed at the data port for control fails with the reason" bwctl_data_port
check "bw-workload submits over HTTPS with feed.internal's certificate" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$DATA/v1/batches" --cacert "$TLS/ca.pem" "${as_feed[@]}" feed:300:6
check "the admin deletes the certificate client's 2 pins over HTTPS (token)" tstatus_is 202 -H 'Authorization: Bearer admin-token' \
    "${json[@]}" --data-binary "{\"ops\":[$(delete 21),$(delete 22)]}" "$DATA/v1/batches"
two_gone() { [ "$(pins_in 21 22)" = 0 ]; }
check "... they are gone" wait_for 60 two_gone
check "every row of the HTTPS feed, and of the feed and cleanup before, is in place" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:2000:4 cleanup:2000:4 feed:300:6
tls_bad_start() {
    cp "$TLS_CONF" "$WORK/tls-bad.conf" && "$BIN/bwctl" config-set "$WORK/tls-bad.conf" proxy.tls.key_file=tls/missing.key &&
    ! timeout 20 "$BIN/bw-proxy" -c "$WORK/tls-bad.conf" -b "$BROKERS" -p 0 >"$WORK/tls-bad.log" 2>&1 &&
        grep -q "proxy.tls.key_file: $WORK/tls/missing.key: No such file" "$WORK/tls-bad.log"
}
check "a proxy whose key file is missing does not start, naming the key and the file" tls_bad_start
tls_reload_refused() {
    cp "$TLS_CONF" "$WORK/tls.conf.orig"
    "$BIN/bwctl" config-set "$TLS_CONF" proxy.tls.cert_file=tls/feed.pem || return 1
    kill -HUP "$TLS_PID"
    wait_for 10 grep -q 'NOT applied, needs a restart (the running value stays until then): proxy.tls.cert_file' \
        "$WORK/proxy-tls.log"
    local rc=$?
    mv "$WORK/tls.conf.orig" "$TLS_CONF"
    return $rc
}
check "a SIGHUP that changes proxy.tls keeps the running certificate, naming the key" tls_reload_refused
check "the HTTPS proxy survived it all" curl -sf --cacert "$TLS/ca.pem" "$DATA/healthz"
# require_client_cert: a third proxy, on the data port only
REQ_PORT=$((PROXY + 5))
cp "$TLS_CONF" "$WORK/tls-req.conf" && "$BIN/bwctl" config-set "$WORK/tls-req.conf" proxy.port=$REQ_PORT proxy.admin_port=0 \
    proxy.tls.require_client_cert=true || exit 1
"$BIN/bw-proxy" -c "$WORK/tls-req.conf" -b "$BROKERS" >"$WORK/proxy-tls-req.log" 2>&1 &
pids+=($!)
REQ=https://127.0.0.1:$REQ_PORT
req_up() { curl -sf --cacert "$TLS/ca.pem" "$REQ/healthz"; }
check "with require_client_cert, /healthz still answers without a certificate" wait_for 60 req_up
req_token() { tstatus_is 401 -H 'Authorization: Bearer dash-token' "$REQ/v1/shards" &&
    body_has 'a client certificate is required (proxy.tls.require_client_cert)'; }
check "... a valid token without a certificate gets 401" req_token
check "... the certificate client is served" tstatus_is 200 "${as_feed[@]}" "$REQ/v1/shards"
check "... and shard control is on its data port (admin_port 0)" tstatus_is 200 "${as_ops[@]}" -X POST "$REQ/v1/shards/3/resume"

# A clients file that does not load stops startup, with the reason.
bad_start() {
    cp "$CONF" "$WORK/bad.conf" && "$BIN/bwctl" config-set "$WORK/bad.conf" proxy.auth.clients_file=missing.conf &&
    ! timeout 20 "$BIN/bw-proxy" -c "$WORK/bad.conf" -b "$BROKERS" -p 0 >"$WORK/bad-proxy.log" 2>&1 &&
        grep -q "missing.conf: cannot read the clients file" "$WORK/bad-proxy.log"
}
check "a proxy whose clients file does not load does not start" bad_start
restore_clients() {
    write_clients "$WORK/clients.conf" "$(client sre admin-token '"admin"')" \
        "$(client feed feed-token '"submit", "read"' '"pin:create", "board:*"')" "$(client dash dash-token '"read"')"
    kill -HUP "$PROXY_PID"
    wait_for 10 eval '[ "$(req dash-token GET /v1/shards)" = 200 ]'
}
check "the clients file is restored (SIGHUP)" restore_clients

# ---- least privilege: the proxy reads as a user that cannot write ---------------------
sql_as() { # sql_as USER PASSWORD SQL: runs SQL on shard server A as USER
    MYSQL_PWD=$2 mariadb -h127.0.0.1 -P"$DB_A" -u"$1" -N -e "$3" 2>&1
}
proxy_cannot_write() {
    local out
    out=$(sql_as bw_proxy "$PROXY_PW" "INSERT INTO db00002.bw_job_parts (job_id) VALUES ('x')") && return 1
    echo "$out"; echo "$out" | grep -q "INSERT command denied to user 'bw_proxy'" || return 1
    out=$(sql_as bw_proxy "$PROXY_PW" "DELETE FROM db00002.bw_job_failures") && return 1
    echo "$out"; echo "$out" | grep -q "DELETE command denied" || return 1
    out=$(sql_as bw_proxy "$PROXY_PW" "SELECT COUNT(*) FROM db00002.pins") && return 1
    echo "$out"; echo "$out" | grep -q "SELECT command denied"
}
check "the proxy's MariaDB user cannot INSERT or DELETE, nor read the objects" proxy_cannot_write
check "the proxy's MariaDB user reads the job ledger" sql_as bw_proxy "$PROXY_PW" "SELECT COUNT(*) FROM db00002.bw_job_parts"
consumer_least() {
    local out
    out=$(sql_as bw_consumer "$BW_AUTH_CONSUMER_PW" "DROP TABLE db00002.pins") && return 1
    echo "$out"; echo "$out" | grep -q "DROP command denied" || return 1
    out=$(sql_as bw_consumer "$BW_AUTH_CONSUMER_PW" "CREATE DATABASE bw_nope") && return 1
    echo "$out"; echo "$out" | grep -q "Access denied" || return 1
    out=$(sql_as bw_consumer "$BW_AUTH_CONSUMER_PW" "SHOW GRANTS") || return 1
    echo "$out"
    ! echo "$out" | grep -q "GRANT OPTION\|ON \*\.\*.*INSERT\|ALL PRIVILEGES"
}
check "the consumer's user cannot drop or create, has no GRANT OPTION and no global privileges" consumer_least
schema_again() {
    "$BIN/bwctl" -c "$CONF" schema --create-users --admin-user root >"$WORK/schema2.out" 2>&1 &&
        grep -q "users and grants in place" "$WORK/schema2.out"
}
check "bwctl schema --create-users again: idempotent" schema_again

# ---- what a caller without the admin role sees of errors --------------------------------
# Two creates of one pin in one job: the second fails with "Duplicate entry '<id>' for key".
dup_job() {
    status_is 202 feed-token POST /v1/batches "{\"ops\":[$(create 77),$(create 77)]}" >/dev/null &&
        jq -r .job_id "$WORK/body" >"$WORK/dup.job"
}
check "a job with a duplicate create is accepted" dup_job
job_done() { req feed-token GET "/v1/jobs/$(cat "$WORK/dup.job")" >/dev/null && jq -e '.finished and .failed == 1' "$WORK/body"; }
check "the proxy (as its read-only user) answers GET /v1/jobs: 1 applied, 1 failed" wait_for 60 job_done
reader_sees() {
    status_is 200 feed-token GET "/v1/jobs/$(cat "$WORK/dup.job")" &&
        jq -e '.failures[0].reason == "MySQL error 1062 (duplicate key)" and .failures[0].error_code == 1062' "$WORK/body" &&
        ! grep -q "Duplicate entry\|PRIMARY" "$WORK/body"
}
check "a non-admin sees the failure as MySQL error 1062 (duplicate key), no row value" reader_sees
admin_sees() {
    status_is 200 admin-token GET "/v1/jobs/$(cat "$WORK/dup.job")" &&
        jq -e '.failures[0].reason | startswith("Duplicate entry")' "$WORK/body"
}
check "an admin sees MySQL's text" admin_sees
# The proxy reads as bw_proxy: with that user's password changed under it, the job's
# shard cannot be read (the admin sees MariaDB's refusal, a reader only that it failed);
# bwctl schema --create-users sets the configured password again.
proxy_is_reader() {
    mariadb -h127.0.0.1 -P"$DB_A" -uroot -e "ALTER USER 'bw_proxy'@'127.0.0.1' IDENTIFIED BY 'changed'" || return 1
    status_is 200 admin-token GET "/v1/jobs/$(cat "$WORK/dup.job")" >/dev/null
    jq -e '.shards[0].error | test("as bw_proxy: Access denied for user .bw_proxy.")' "$WORK/body" || return 1
    status_is 200 feed-token GET "/v1/jobs/$(cat "$WORK/dup.job")" >/dev/null
    jq -e '.shards[0].error == "the shard'"'"'s ledger could not be read: no connection to its server"' "$WORK/body" || return 1
    "$BIN/bwctl" -c "$CONF" schema --create-users --admin-user root >/dev/null &&
        status_is 200 feed-token GET "/v1/jobs/$(cat "$WORK/dup.job")" >/dev/null &&
        jq -e '.finished and (.shards[0] | has("error") | not)' "$WORK/body"
}
check "the proxy connects as its read-only user (a changed password stops it; --create-users restores it)" proxy_is_reader
shards_scrubbed() {
    status_is 200 dash-token GET /v1/shards >/dev/null &&
        jq -e 'all(.shards[]; has("server") | not) and all(.shards[]; .consumer == null or (.consumer | has("instance") | not)) and
            (has("servers") | not)' \
            "$WORK/body" && ! grep -q 'mysql-a\|mysql-b' "$WORK/body"
}
check "GET /v1/shards for a reader: no server or consumer host names" shards_scrubbed
shards_full() { status_is 200 admin-token GET /v1/shards >/dev/null &&
    jq -e '.shards[0].server == "mysql-a" and ([.servers[].name] == ["mysql-a", "mysql-b"])' "$WORK/body"; }
check "GET /v1/shards for an admin names the servers" shards_full

# ---- charset: a server that ignores the client's utf8mb4 is refused --------------------
DB_L=$((24308 + off))
latin1_refused() {
    BW_MARIADB_ARGS="--skip-character-set-client-handshake --character-set-server=latin1 --collation-server=latin1_swedish_ci" \
        scripts/mariadb.sh start "$WORK/mysql-latin1" "$DB_L" >/dev/null || return 1
    cp "$CONF" "$WORK/latin1.conf" &&
        "$BIN/bwctl" config-set "$WORK/latin1.conf" "shards.servers[0].port=$DB_L" "shards.servers[1].port=$DB_L" || return 1
    ! "$BIN/bwctl" -c "$WORK/latin1.conf" schema --admin-user root 2>"$WORK/latin1.err"
    local rc=$?
    cat "$WORK/latin1.err"
    scripts/mariadb.sh stop "$WORK/mysql-latin1" >/dev/null
    [ $rc = 0 ] && grep -q "connect to mysql-a (127.0.0.1:$DB_L): refused: the session's character_set_client is latin1, not utf8mb4" \
        "$WORK/latin1.err"
}
check "a server run with --skip-character-set-client-handshake (latin1) is refused, naming it and the charset" latin1_refused

# ---- secrets: never in a dump, never in a log ------------------------------------------
dumps_redacted() {
    "$BIN/bw-proxy" -c "$CONF" --dump-config >"$WORK/dump-proxy.txt" &&
        "$BIN/bw-consumer" -c "$CONF" --dump-config >"$WORK/dump-consumer.txt" &&
        "$BIN/bwctl" -c "$CONF" dump-config >"$WORK/dump-bwctl.txt" || return 1
    grep -c '(redacted)' "$WORK/dump-bwctl.txt"
    grep -q '"sasl.password=(redacted)"' "$WORK/dump-proxy.txt" &&
        ! grep -l -e "$PROXY_PW" -e "$BW_AUTH_CONSUMER_PW" -e "$BW_AUTH_KAFKA_PW" "$WORK"/dump-*.txt
}
check "--dump-config (proxy, consumer) and bwctl dump-config show every secret as (redacted)" dumps_redacted
no_secret_in_logs() {
    ls "$WORK"/*.log
    ! grep -l -e "$PROXY_PW" -e "$BW_AUTH_CONSUMER_PW" -e "$BW_AUTH_KAFKA_PW" -e demo-proxy-pw -e demo-consumer-pw \
        "$WORK"/*.log "$WORK"/*.err "$WORK"/*.out 2>/dev/null
}
check "no secret in any log of this run" no_secret_in_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
