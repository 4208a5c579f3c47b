#!/usr/bin/env bash
# The OpenAPI document (docs/openapi.yaml) against a running proxy: valid OpenAPI 3.1, the
# same endpoints as docs/api.md's table, and every documented path answering as it says.
#
#   test/tiers/openapi.sh embedded|kafka
#
# The proxy runs with a clients file (an admin, a read and a submit client) and an admin
# listener (and a client with a quota, for a 429); one consumer applies. test/openapi/check.py sends a scripted set of requests
# (a job with a failure, its status in JSON and protobuf, its failures, a held job, one
# after it and a cancel, a named job, shards, check, fleet, whoami, the shard and server
# control POSTs on the admin listener, and 400, 401, 403, 404, 405, 409, 415, 422
# and 429 answers) and checks each answer against the document with schemathesis's response
# checks; then schemathesis's deterministic coverage phase sends requests made from the
# document to both listeners. The tools come pinned from PyPI (scripts/install-openapi.sh).
# The last line is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/openapi.sh embedded|kafka}
. test/lib.sh
PYTHON=$(scripts/install-openapi.sh | tail -1) || exit 1
ADMIN_PORT=$((PROXY + 4))

bw_stack_conf() {
    write_clients "$WORK/clients.conf" "$(client sre sre-token '"admin"')" "$(client dash dash-token '"read"')" \
        "$(client feed feed-token '"submit", "read"' '"*:*"')" \
        "$(client burst burst-token '"submit"' '"*:*"' | sed 's/ }$//') ops_per_second = 20; }"
    "$BIN/bwctl" config-set "$1" proxy.auth.clients_file=clients.conf proxy.admin_port=$ADMIN_PORT || exit 1
}
bw_stack_start openapi "$MODE"
export HYPOTHESIS_STORAGE_DIRECTORY=$WORK/hypothesis # schemathesis's cache: not in the source tree
start_consumer $C1
assigned() { grep -q assigned "$WORK/consumer-$C1.log"; }
check "the consumer has its shards" wait_for 60 assigned

# the protobuf batch: one create on shard 1, encoded by protoc from the client proto
cat >"$WORK/batch.txt" <<PB
ops { op: CREATE object_type: "pin" id: $(((1 << 46) | (1 << 36) | 2)) shard_key: "$(((1 << 46) | 42))"
      fields { name: "owner_id" value { int_value: $(((1 << 46) | 42)) } } }
PB
check "a protobuf BatchWriteRequest encoded by protoc" sh -c \
    "protoc -Iproto --encode=bulkwrite.v1.BatchWriteRequest proto/bulkwrite/v1/bulkwrite.proto <'$WORK/batch.txt' >'$WORK/batch.pb'"

timeout 300 "$PYTHON" test/openapi/check.py docs/openapi.yaml docs/api.md "http://127.0.0.1:$PROXY" \
    "http://127.0.0.1:$ADMIN_PORT" "$WORK" >"$WORK/check.py.out" 2>&1
grep -vE '^[0-9]+ passed, [0-9]+ failed$' "$WORK/check.py.out"
passed=$((passed + $(grep -c '^ok - ' "$WORK/check.py.out")))
failed=$((failed + $(grep -c '^not ok - ' "$WORK/check.py.out")))
grep -qE '^[0-9]+ passed, [0-9]+ failed$' "$WORK/check.py.out" ||
    { echo "not ok - check.py did not run to its end"; failed=$((failed + 1)); }

# Then inputs made from the document: schemathesis's coverage phase, deterministic (the same
# requests every run), boundary and out-of-range values for every parameter and body of
# every operation, on each listener as the admin; every answer must be one the document
# describes, and no 5xx. The path's shard, server and job are real ones, so that the
# bodies and queries get past the 404. (Control changes and batches land in this
# throwaway stack.)
cat >"$WORK/schemathesis.toml" <<TOML
[cache]
enabled = false # no .schemathesis/ in the source tree (the requests are the same every run)

[parameters]
"path.id" = "$(cat "$WORK/job.id" 2>/dev/null)"
"path.n" = 3
"path.shard" = 3
"path.name" = "mysql-b"
TOML
schemathesis_run() { # schemathesis_run URL
    timeout 300 "$(dirname "$PYTHON")/schemathesis" --config-file "$WORK/schemathesis.toml" --no-color run \
        docs/openapi.yaml --url "$1" -H "Authorization: Bearer sre-token" \
        --phases examples,coverage --generation-deterministic --workers 1 \
        --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance
}
for listener in data:$PROXY admin:$ADMIN_PORT; do
    check "generated requests on the ${listener%%:*} listener are answered as the document says" \
        schemathesis_run "http://127.0.0.1:${listener#*:}"
    grep -E '^ +[0-9]+ generated' "$WORK/check.out" | sed 's/^ */# /'
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
