#!/usr/bin/env bash
# Authentication and roles on the proxy's HTTP API, tried as hostile and as ordinary
# clients: real MariaDB servers, one consumer, the proxy with a clients file
# (proxy.auth.clients_file), and the embedded Kafka (or a real broker).
#
#   test/auth.sh embedded|kafka
#
# The clients (tokens for this test only): sre (admin), feed (submit pin:create and
# board:*, read), spam-cleanup (submit pin:delete), dash (read). Each check prints
# "ok - …" or "not ok - …"; the last line is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: test/auth.sh embedded|kafka}
. test/lib.sh

digest() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
write_clients() { # write_clients FILE CLIENT_LINE...
    local f=$1; shift
    { echo "clients = ("; local IFS=$'\n'; echo "$*" | sed '$!s/$/,/'; echo ");"; } >"$f.tmp" && mv "$f.tmp" "$f"
}
client() { # client NAME TOKEN ROLES [SCOPES]
    printf '  { name = "%s"; token_sha256 = "%s"; roles = [%s];%s }' "$1" "$(digest "$2")" "$3" \
        "${4:+ scopes = [$4];}"
}
bw_stack_conf() {
    write_clients "$WORK/clients.conf" \
        "$(client sre admin-token '"admin"')" \
        "$(client feed feed-token '"submit", "read"' '"pin:create", "board:*"')" \
        "$(client spam-cleanup spam-token '"submit"' '"pin:delete"')" \
        "$(client dash dash-token '"read"')"
    # relative: read from the configuration file's folder
    sed -i 's|clients_file = "";|clients_file = "clients.conf";|' "$1"
    # secrets from a file and from the environment; each one is looked for in the dumps
    # and every log at the end
    printf '%s\n' "$PROXY_PW" >"$WORK/proxy.pw"
    sed -i -e "s|proxy_password = \"demo-proxy-pw\";|proxy_password = \"file:proxy.pw\";|" \
        -e "s|password = \"demo-consumer-pw\";|password = \"env:BW_AUTH_CONSUMER_PW\";|" \
        -e 's|properties = \[ \];|properties = [ "sasl.username=nobody", "sasl.password=env:BW_AUTH_KAFKA_PW" ];|' "$1"
}
# recognisable secrets (never in a dump or a log)
PROXY_PW=Proxy-S3cret-$RANDOM$RANDOM
export BW_AUTH_CONSUMER_PW=Consumer-S3cret-$RANDOM$RANDOM BW_AUTH_KAFKA_PW=Kafka-S3cret-$RANDOM$RANDOM
bw_stack_start auth "$MODE"
start_consumer $C1
umask 077
for t in admin feed spam dash; do printf '%s-token\n' $t >"$WORK/$t.token"; done

BASE=http://127.0.0.1:$PROXY
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

check "bwctl check-config checks the clients file too" bash -c "'$BIN/bwctl' -c '$CONF' check-config | grep -q 'clients.conf: ok (4 clients)'"
check "the proxy logs the clients it loaded" grep -q "clients loaded from $WORK/clients.conf: 4 clients" "$WORK/proxy.log"
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
check "the digest itself is no token: 401" status_is 401 "$(digest admin-token)" GET /v1/shards
basic() { curl -s -o "$WORK/body" -w '%{http_code}' -u sre:admin-token "$BASE/v1/shards" | grep -qx 401; }
check "Basic credentials are no bearer token: 401" basic
check "GET /v1/shards without a token: 401" status_is 401 "" GET /v1/shards
check "shard control without a token: 401" status_is 401 "" POST /v1/shards/3/pause '{}'
check "an unknown endpoint without a token: 401, not 404" status_is 401 "" GET /v1/secret

# ---- what they may do ----------------------------------------------------------------
check "a read client lists the shards" status_is 200 dash-token GET /v1/shards
read_posts() { status_is 403 dash-token POST /v1/batches "$ONE_DELETE" &&
    body_has 'POST /v1/batches needs the submit role; client \"dash\" has read'; }
check "a read client posting a batch: 403 with the reason" read_posts
submit_controls() { status_is 403 feed-token POST /v1/shards/3/pause '{"reason":"not mine"}' &&
    body_has 'needs the admin role; client \"feed\" has submit, read'; }
check "a submit client pausing a shard: 403 with the reason" submit_controls
bwctl_refused() {
    ! BW_TOKEN=feed-token "$BIN/bwctl" -c "$CONF" --url "$BASE" set-rate 3 0 2>"$WORK/bwctl.err" &&
        grep -q "needs the admin role" "$WORK/bwctl.err"
}
check "bwctl set-rate with a submit client's token fails with the reason" bwctl_refused
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

# The tools send tokens from a file (--token-file) or BW_TOKEN, never from argv.
check "bw-workload without a token is refused" bash -c "! '$BIN/bw-workload' -c '$CONF' submit --url '$BASE/v1/batches' feed:100:4"
check "bw-workload: the feed client's feed (--token-file)" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$BASE/v1/batches" --token-file "$WORK/feed.token" feed:2000:4
check "bw-workload: the spam-cleanup client's cleanup (BW_TOKEN)" \
    env BW_TOKEN=spam-token "$BIN/bw-workload" -c "$CONF" submit --url "$BASE/v1/batches" cleanup:2000:4
check "every row of the feed and the cleanup is in place" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:2000:4 cleanup:2000:4

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
check "the admin may post a batch too" status_is 202 admin-token POST /v1/batches "{\"ops\":[$(delete 99)]}"

# ---- metrics --------------------------------------------------------------------------
metric() { curl -sf "$BASE/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
metrics_ok() {
    local f401 f403 dash spam
    f401=$(metric 'bulkwrite_proxy_requests_total{code="401"}') f403=$(metric 'bulkwrite_proxy_requests_total{code="403"}')
    dash=$(metric 'bulkwrite_proxy_client_forbidden_total{client="dash"}')
    spam=$(metric 'bulkwrite_proxy_client_ops_out_of_scope_total{client="spam-cleanup"}')
    echo "401: $f401, 403: $f403, dash forbidden: $dash, spam-cleanup out of scope: $spam"
    [ "${f401:-0}" -ge 7 ] && [ "${f403:-0}" -ge 5 ] && [ "$dash" = 1 ] && [ "$spam" = 5 ]
}
check "401s, 403s and refusals per client are counted" metrics_ok
check "promtool accepts the proxy's metrics with client labels" bash -c "curl -sf $BASE/metrics | promtool check metrics"

# ---- SIGHUP: a new token works, a removed one gets 401 ----------------------------------
write_clients "$WORK/clients.conf" \
    "$(client sre admin-token '"admin"')" \
    "$(client feed feed-token '"submit", "read"' '"pin:create", "board:*"')" \
    "$(client spam-cleanup spam-token '"submit"' '"pin:delete"')" \
    "$(client dash2 dash-token-2 '"read"')"
kill -HUP "$PROXY_PID"
new_works() { [ "$(req dash-token-2 GET /v1/shards)" = 200 ]; }
check "after SIGHUP a new client's token works" wait_for 10 new_works
check "after SIGHUP a removed client's token gets 401" status_is 401 dash-token GET /v1/shards
check "the reload is logged" grep -q "SIGHUP: clients reloaded from $WORK/clients.conf: 4 clients" "$WORK/proxy.log"
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

# A clients file that does not load stops startup, with the reason.
bad_start() {
    sed 's|clients_file = "clients.conf";|clients_file = "missing.conf";|' "$CONF" >"$WORK/bad.conf"
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
        jq -e 'all(.shards[]; has("server") | not) and all(.shards[]; .consumer == null or (.consumer | has("instance") | not))' \
            "$WORK/body" && ! grep -q 'mysql-a\|mysql-b' "$WORK/body"
}
check "GET /v1/shards for a reader: no server or consumer host names" shards_scrubbed
shards_full() { status_is 200 admin-token GET /v1/shards >/dev/null && jq -e '.shards[0].server == "mysql-a"' "$WORK/body"; }
check "GET /v1/shards for an admin names the servers" shards_full

# ---- charset: a server that ignores the client's utf8mb4 is refused --------------------
DB_L=$((24308 + off))
latin1_refused() {
    BW_MARIADB_ARGS="--skip-character-set-client-handshake --character-set-server=latin1 --collation-server=latin1_swedish_ci" \
        scripts/mariadb.sh start "$WORK/mysql-latin1" "$DB_L" >/dev/null || return 1
    sed -e "s/port = $DB_A;/port = $DB_L;/" -e "s/port = $DB_B;/port = $DB_L;/" "$CONF" >"$WORK/latin1.conf"
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
