# connect.sh — bulkwrite.v1.BulkwriteService in the Connect protocol (docs/clients.md), from
# curl and protoc alone: WriteBatch in both encodings (proto3 JSON and application/proto),
# GetJob, CancelJob and ListFailures, and the errors as Connect errors (code, message, a
# refused batch's BatchWriteResponse as the detail, Retry-After). The generated clients'
# own tests are clients/go's and clients/python's tiers. Sourced by e2e.sh (check,
# wait_for, WORK, PROXY, DB_A), so it runs with both Kafka modes.

rpc() { # rpc METHOD JSON: the call in proto3 JSON; the reply in $WORK/rpc.json, the status printed
    curl -s -o "$WORK/rpc.json" -D "$WORK/rpc.headers" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H 'Connect-Protocol-Version: 1' --data-binary "$2" "http://127.0.0.1:$PROXY/bulkwrite.v1.BulkwriteService/$1"
}
b64() { printf %s "$1" | base64 -w0; }
connect_pin() { echo $((68719476736 + 30000000 + $1)); } # shard 0's pin with local id 30,000,000 + N
connect_rows() { # connect_rows FIRST LAST: "id title" of those pins, by id
    mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT id, title FROM db00000.pins WHERE id BETWEEN $(connect_pin "$1") AND $(connect_pin "$2") ORDER BY id"
}

connect_tests() {
    local p0 p1 p2 job
    p0=$(connect_pin 0) p1=$(connect_pin 1) p2=$(connect_pin 2)
    # two creates and an update of the first, proto3 JSON (camelCase, 64-bit ints as strings, text as base64 bytes)
    local body
    body=$(jq -cn --arg p0 "$p0" --arg p1 "$p1" --arg a "$(b64 connect-a)" --arg b "$(b64 connect-b)" --arg a2 "$(b64 connect-a2)" '
        {requestId: "connect-json-1",
         ops: [{op: "CREATE", objectType: "pin", id: $p0, shardKey: "42",
                fields: [{name: "owner_id", value: {intValue: "42"}}, {name: "title", value: {stringValue: $a}}]},
               {op: "CREATE", objectType: "pin", id: $p1, shardKey: "42",
                fields: [{name: "owner_id", value: {intValue: "42"}}, {name: "title", value: {stringValue: $b}}]},
               {op: "UPDATE", objectType: "pin", id: $p0, fields: [{name: "title", value: {stringValue: $a2}}]}]}')
    write_json() {
        [ "$(rpc WriteBatch "$body")" = 200 ] && cat "$WORK/rpc.json" &&
            jq -e '.accepted == 3 and (.jobId | length) == 32 and (.rejected // []) == []' "$WORK/rpc.json" >/dev/null &&
            grep -qi '^content-type: application/json' "$WORK/rpc.headers"
    }
    check "Connect WriteBatch, application/json: 200, 3 ops accepted, the job's id" write_json
    job=$(jq -r .jobId "$WORK/rpc.json")
    job_done() { [ "$(rpc GetJob "{\"jobId\": \"$job\"}")" = 200 ] && jq -e '.finished == true and .applied == 3' "$WORK/rpc.json" >/dev/null; }
    check "Connect GetJob (JSON): the job finishes with its 3 ops applied" wait_for 60 job_done
    check "... the rows are the creates with the update applied after" \
        test "$(connect_rows 0 1 | tr '\t' ' ')" = "$p0 connect-a2
$p1 connect-b"
    again() { [ "$(rpc WriteBatch "$body")" = 200 ] && jq -e --arg j "$job" '.jobId == $j and .accepted == 3' "$WORK/rpc.json" >/dev/null; }
    check "... the same call again is the same job (200, accepted 3; the shard applies each part once)" again

    # application/proto: protoc encodes the request and decodes the reply
    proto_call() {
        printf 'request_id: "connect-proto-1"\nops { op: CREATE object_type: "pin" id: %s shard_key: "42"\n  fields { name: "owner_id" value { int_value: 42 } }\n  fields { name: "title" value { string_value: "connect-proto" } } }\n' "$p2" |
            protoc -Iproto --encode=bulkwrite.v1.BatchWriteRequest proto/bulkwrite/v1/bulkwrite.proto |
            curl -s -D "$WORK/rpc.headers" -H 'Content-Type: application/proto' --data-binary @- \
                "http://127.0.0.1:$PROXY/bulkwrite.v1.BulkwriteService/WriteBatch" |
            protoc -Iproto --decode=bulkwrite.v1.BatchWriteResponse proto/bulkwrite/v1/bulkwrite.proto >"$WORK/rpc.txt" || return 1
        cat "$WORK/rpc.txt"
        grep -q '^accepted: 1$' "$WORK/rpc.txt" && grep -qi '^content-type: application/proto' "$WORK/rpc.headers"
    }
    check "Connect WriteBatch, application/proto (protoc): 200, a BatchWriteResponse with 1 accepted" proto_call
    local job2
    job2=$(sed -n 's/^job_id: "\(.*\)"$/\1/p' "$WORK/rpc.txt")
    proto_status() {
        printf 'job_id: "%s"\n' "$job2" | protoc -Iproto --encode=bulkwrite.v1.GetJobRequest proto/bulkwrite/v1/bulkwrite.proto |
            curl -sf -H 'Content-Type: application/proto' --data-binary @- "http://127.0.0.1:$PROXY/bulkwrite.v1.BulkwriteService/GetJob" |
            protoc -Iproto --decode=bulkwrite.v1.JobStatus proto/bulkwrite/v1/bulkwrite.proto >"$WORK/rpc-status.txt" &&
            grep -q '^finished: true$' "$WORK/rpc-status.txt" && grep -q '^applied: 1$' "$WORK/rpc-status.txt"
    }
    check "Connect GetJob, application/proto: the JobStatus says finished, 1 applied" wait_for 60 proto_status
    check "... its row is there" test "$(connect_rows 2 2 | tr '\t' ' ')" = "$p2 connect-proto"

    # errors: Connect codes, with the REST handler's message
    local unknown=0123456789abcdef0123456789abcdef
    not_found() { [ "$(rpc GetJob "{\"jobId\": \"$unknown\"}")" = 404 ] && jq -e '.code == "not_found" and (.message | test("no job"))' "$WORK/rpc.json" >/dev/null; }
    check "GetJob of an unknown job: 404, code not_found" not_found
    bad_field() { [ "$(rpc GetJob '{"jobId": "x", "jobName": "y"}')" = 400 ] && cat "$WORK/rpc.json" &&
        jq -e '.code == "invalid_argument" and (.message | test("jobName: no such field"))' "$WORK/rpc.json" >/dev/null; }
    check "an unknown field: 400 invalid_argument naming it" bad_field
    reused() { # the same request_id with another body: the REST 409, as aborted
        [ "$(rpc WriteBatch "$(jq -c '.ops |= .[:1]' <<<"$body")")" = 409 ] && cat "$WORK/rpc.json" &&
            jq -e '.code == "aborted" and (.message | test("request_id"))' "$WORK/rpc.json" >/dev/null
    }
    check "WriteBatch reusing a request_id for another body: 409 aborted" reused
    none_valid() { # every op invalid: the REST 422, its BatchWriteResponse as the detail
        [ "$(rpc WriteBatch "{\"ops\": [{\"op\": \"UPDATE\", \"objectType\": \"pin\", \"id\": \"$(connect_pin 9)\"}]}")" = 400 ] && cat "$WORK/rpc.json" &&
            jq -e '.code == "invalid_argument" and .details[0].type == "bulkwrite.v1.BatchWriteResponse"' "$WORK/rpc.json" >/dev/null &&
            jq -r '.details[0].value' "$WORK/rpc.json" | awk '{ n = length($0) % 4; printf "%s%s", $0, (n ? substr("===", 1, 4 - n) : "") }' |
            base64 -d | protoc -Iproto --decode=bulkwrite.v1.BatchWriteResponse proto/bulkwrite/v1/bulkwrite.proto |
            grep -q 'reason: "update needs at least one field"'
    }
    check "WriteBatch with no valid op: invalid_argument, the BatchWriteResponse in its details" none_valid
    check "a Connect-Protocol-Version other than 1: 400" \
        sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -H 'Connect-Protocol-Version: 2' \
            --data-binary '{}' http://127.0.0.1:$PROXY/bulkwrite.v1.BulkwriteService/GetJob)\" = 400 ]"
    other_type() {
        [ "$(curl -s -o "$WORK/rpc.json" -w '%{http_code}' -H 'Content-Type: text/plain' --data-binary x \
            "http://127.0.0.1:$PROXY/bulkwrite.v1.BulkwriteService/GetJob")" = 415 ] &&
            jq -e '.code == "invalid_argument" and (.message | test("application/proto or application/json"))' "$WORK/rpc.json" >/dev/null
    }
    check "another Content-Type: 415 (the protocol's), invalid_argument naming the two" other_type

    # ListFailures: a second create of a pin that exists (MySQL's 1062, duplicate key)
    local fbody
    fbody=$(jq -cn --arg p "$p1" --arg t "$(b64 again)" \
        '{ops: [{op: "CREATE", objectType: "pin", id: $p, shardKey: "42", fields: [{name: "owner_id", value: {intValue: "42"}}, {name: "title", value: {stringValue: $t}}]}]}')
    check "WriteBatch of a create that its shard will refuse: accepted" test "$(rpc WriteBatch "$fbody")" = 200
    local fjob
    fjob=$(jq -r .jobId "$WORK/rpc.json")
    failed() { [ "$(rpc GetJob "{\"jobId\": \"$fjob\"}")" = 200 ] && jq -e '.finished == true and .failed == 1' "$WORK/rpc.json" >/dev/null; }
    check "... GetJob: finished, 1 failed" wait_for 60 failed
    list_failures() {
        [ "$(rpc ListFailures "{\"jobId\": \"$fjob\", \"limit\": 10}")" = 200 ] && cat "$WORK/rpc.json" &&
            jq -e --arg p "$p1" '.failures | length == 1 and .[0].id == $p and .[0].errorCode == 1062
                and (.[0].opJson | fromjson | .object_type == "pin")' "$WORK/rpc.json" >/dev/null
    }
    check "ListFailures: the op, MySQL's 1062, the op as JSON" list_failures
    check "... the pin keeps its first create's title" test "$(connect_rows 1 1 | tr '\t' ' ')" = "$p1 connect-b"

    # CancelJob: a job held for an hour, cancelled with a reason
    local held
    held=$(jq -cn --arg p "$(connect_pin 4)" --arg t "$(b64 held)" --arg nb "$(($(date +%s%3N) + 3600000))" \
        '{requestId: "connect-held-1", notBeforeMs: $nb, ops: [{op: "CREATE", objectType: "pin", id: $p, shardKey: "42",
          fields: [{name: "owner_id", value: {intValue: "42"}}, {name: "title", value: {stringValue: $t}}]}]}')
    check "WriteBatch of a job held for an hour: accepted" test "$(rpc WriteBatch "$held")" = 200
    local hjob
    hjob=$(jq -r .jobId "$WORK/rpc.json")
    cancel() {
        [ "$(rpc CancelJob "{\"jobId\": \"$hjob\", \"reason\": \"wrong list\"}")" = 200 ] && cat "$WORK/rpc.json" &&
            jq -e '.cancelReason == "wrong list" and (.cancelledAtMs | tonumber) > 0 and .cancelled == 1' "$WORK/rpc.json" >/dev/null
    }
    check "CancelJob with a reason: the status, cancelled, with the reason" cancel
    check "... its pin is never written" test -z "$(connect_rows 4 4)"
}
