#!/usr/bin/env bash
# test/tiers/cluster.sh cluster: durable by default on a replicated Kafka. Three KRaft nodes
# (scripts/kafka.sh start-cluster), the reference config's durability untouched
# (kafka.replication_factor 3, kafka.min_insync_replicas 2), 64 shards on two MariaDB
# servers, two consumers.
#
#   - the topics bulkwrite creates have 3 replicas and min.insync.replicas=2;
#   - a 200,000-op job over every shard, with the leader of the hot shard's partition
#     killed -9 mid-job and restarted later: every request ends accepted (resends allowed
#     and counted), and every shard holds exactly the rows sent, row by row;
#   - with two of three nodes down, fewer than min.insync.replicas are in sync: the proxy
#     answers 503 with Retry-After, nothing is called accepted, and it recovers by itself
#     once a node is back.
# Three JVMs on two cores are slow: 64 partitions, not 4,096.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/cluster.sh cluster}
[ "$MODE" = cluster ] || { echo "usage: test/tiers/cluster.sh cluster"; exit 2; }
. test/lib.sh
SHARDS=64 OPS=${BW_CLUSTER_OPS:-200000}

bw_stack_conf() { # 64 shards, 32 per server; the durability settings stay the reference's
    "$BIN/bwctl" config-set "$1" shards.count=$SHARDS "shards.servers[0].last_shard=$((SHARDS / 2 - 1))" \
        "shards.servers[1].first_shard=$((SHARDS / 2))" "shards.servers[1].last_shard=$((SHARDS - 1))" || exit 1
}
bw_stack_start cluster "$MODE"
start_consumer $C1
start_consumer $C2

described() { kafka_topics --describe --topic "$1" >"$WORK/describe-$1.txt" 2>&1; }
durable() {
    local t
    for t in bulkwrite.batches bulkwrite.jobs bulkwrite.control bulkwrite.status; do
        described $t || return 1
        grep -q 'ReplicationFactor: 3' "$WORK/describe-$t.txt" && grep -q 'min.insync.replicas=2' "$WORK/describe-$t.txt" ||
            { echo "$t:"; head -3 "$WORK/describe-$t.txt"; return 1; }
    done
    grep -q "PartitionCount: $SHARDS" "$WORK/describe-bulkwrite.batches.txt"
}
check "the topics the proxy created have 3 replicas and min.insync.replicas=2" durable

# The node that leads partition $1 of the batches topic (1 to 3).
leader_of() {
    described bulkwrite.batches &&
        awk -v p="$1" '$1 == "Topic:" && $3 == "Partition:" && $4 == p { for (i = 1; i < NF; i++) if ($i == "Leader:") print $(i + 1) }' \
            "$WORK/describe-bulkwrite.batches.txt"
}
consumers_ready() { curl -sf "http://127.0.0.1:$C1/readyz" && curl -sf "http://127.0.0.1:$C2/readyz"; }
check "both consumers joined the group" wait_for 120 consumers_ready

# ---- a leader lost mid-job --------------------------------------------------------------------
"$BIN/bw-workload" -c "$CONF" submit --url "$URL" --per-request 2000 --retry-for 600 --request-id cluster \
    spread:$OPS >"$WORK/submit.log" 2>&1 &
SUBMIT=$!
quarter_in() { curl -sf "http://127.0.0.1:$PROXY/metrics" |
    awk -v q=$((OPS / 4)) '$1 == "bulkwrite_proxy_ops_accepted_total" && $2 >= q { ok = 1 } END { exit !ok }'; }
wait_for 300 quarter_in
LEADER=$(leader_of $HOT)
echo "# partition $HOT (the hot shard) is led by node $LEADER; killing it"
check "the hot shard's leader (node $LEADER) is killed -9 mid-job" scripts/kafka.sh kill "$WORK/kafka" "$LEADER"
new_leader() { local l; l=$(leader_of $HOT) && [ -n "$l" ] && [ "$l" != "$LEADER" ] && [ "$l" != none ] && [ "$l" != -1 ]; }
check "another node takes the partition's lead" wait_for 60 new_leader
sleep 10 # the job goes on with two nodes (min.insync.replicas 2 holds)
check "the killed node is restarted" scripts/kafka.sh start-node "$WORK/kafka" "$LEADER"
submitted() { wait "$SUBMIT"; }
check "the job's every request ends accepted (resends allowed)" submitted
grep '^submit:' "$WORK/submit.log" | sed 's/^/# /'
resent=$(grep -o '[0-9]* requests resent' "$WORK/submit.log" | tail -1 | cut -d' ' -f1)
echo "# ${resent:-?} requests resent"
check "the job's $OPS ops were all accepted" grep -q "submit: $OPS ops sent, $OPS accepted, 0 not accepted" "$WORK/submit.log"
check "every shard holds exactly the rows sent, row by row" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 600 spread:$OPS
in_sync() { # every partition's Isr lists three nodes
    described bulkwrite.batches && [ "$(awk '$3 == "Partition:" { for (i = 1; i < NF; i++) if ($i == "Isr:") print $(i + 1) }' \
        "$WORK/describe-bulkwrite.batches.txt" | grep -c '^[0-9]*,[0-9]*,[0-9]*$')" = $SHARDS ]; }
check "the restarted node is back in every partition's in-sync set" wait_for 120 in_sync

# ---- fewer than min.insync.replicas in sync ---------------------------------------------------
# Two nodes stopped: each partition has at most one replica in sync, fewer than
# min.insync.replicas (2), so Kafka refuses the writes: the proxy answers 503 with
# Retry-After once proxy.produce_timeout_ms (3 s here) has passed, and takes the same
# request once a node is back.
scripts/kafka.sh stop "$WORK/kafka" 2 >/dev/null && scripts/kafka.sh stop "$WORK/kafka" 3 >/dev/null
owner=$(( (3 << 46) | 77 ))
isr_body=$(printf '{"request_id":"isr-1","ops":[{"op":"create","object_type":"pin","id":%d,"shard_key":"%d","fields":{"owner_id":%d,"title":"isr"}}]}' \
    $(( (3 << 46) | (1 << 36) | 900077 )) $owner $owner)
isr_503() {
    local code
    code=$(curl -s -D "$WORK/isr.headers" -o "$WORK/isr.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "$isr_body" "$URL")
    cat "$WORK/isr.json"
    [ "$code" = 503 ] && grep -qi '^Retry-After: ' "$WORK/isr.headers" && grep -q '"accepted":0' "$WORK/isr.json" &&
        grep -q '"index":0,"reason":"not accepted: Kafka did not acknowledge it' "$WORK/isr.json"
}
check "with one of three nodes up the proxy answers 503 with Retry-After, nothing accepted" isr_503
scripts/kafka.sh start-node "$WORK/kafka" 2 >/dev/null
isr_202() {
    test "$(curl -s -o "$WORK/isr2.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "$isr_body" "$URL")" = 202
}
check "with two nodes up again the same request is accepted (202), with no restart of the proxy" wait_for 120 isr_202
isr_row() {
    test "$(mariadb -h127.0.0.1 -P$DB_A -uroot -N -e "SELECT COUNT(*) FROM db00003.pins WHERE title = 'isr'")" = 1
}
check "... and applied once" wait_for 120 isr_row
scripts/kafka.sh start-node "$WORK/kafka" 3 >/dev/null
check "the proxy and both consumers are still up" bash -c "curl -sf http://127.0.0.1:$PROXY/healthz >/dev/null &&
    curl -sf http://127.0.0.1:$C1/healthz >/dev/null && curl -sf http://127.0.0.1:$C2/healthz >/dev/null"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
