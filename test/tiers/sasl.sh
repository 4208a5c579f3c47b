#!/usr/bin/env bash
# Kafka security pass-through, against the real broker: a single-node Apache Kafka whose
# client listener is SASL_PLAINTEXT (mechanism PLAIN, one user; scripts/kafka.sh with
# BW_KAFKA_SASL_PLAIN). The proxy and the consumer authenticate with librdkafka
# properties from the configuration, the password read from a file; a batch reaches
# MariaDB; a wrong password fails with librdkafka's clear error; no password is in a dump
# or a log.
#
#   test/tiers/sasl.sh kafka
#
# Each check prints "ok - …" or "not ok - …"; the last line is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/sasl.sh kafka}
[ "$MODE" = kafka ] || { echo "test/tiers/sasl.sh: SASL needs the real broker (kafka)"; exit 2; }
. test/lib.sh

SASL_PW=Kafka-Sasl-$RANDOM$RANDOM
export BW_KAFKA_SASL_PLAIN=bulkwrite:$SASL_PW
bw_stack_conf() {
    # relative: read from the configuration file's folder; mode 0600 like any secret
    (umask 077 && printf '%s\n' "$SASL_PW" >"$WORK/kafka.pw")
    "$BIN/bwctl" config-set "$1" 'kafka.properties=[ "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.username=bulkwrite", "sasl.password=file:kafka.pw" ]' || exit 1
}
bw_stack_start sasl "$MODE"
unset BW_KAFKA_SASL_PLAIN

check "the broker's client listener is SASL_PLAINTEXT with PLAIN" \
    grep -q '^listeners=SASL_PLAINTEXT://127.0.0.1:' "$WORK/kafka/server.properties"
check "the proxy authenticated: it created the topic and answers /readyz" \
    wait_for 30 curl -sf "http://127.0.0.1:$PROXY/readyz"
start_consumer $C1
check "the consumer authenticated and joined its group" wait_for 60 grep -q "assigned" "$WORK/consumer-$C1.log"
check "1,000 creates through the proxy are accepted" \
    "$BIN/bw-workload" -c "$CONF" submit --url "$URL" feed:1000:2
check "the consumer applies every one: the rows are in MariaDB" \
    "$BIN/bw-workload" -c "$CONF" verify --wait 120 feed:1000:2

# The same configuration with a wrong password (given in the environment this time).
cp "$CONF" "$WORK/wrong.conf" && "$BIN/bwctl" config-set "$WORK/wrong.conf" \
    'kafka.properties=[ "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.username=bulkwrite", "sasl.password=env:BW_SASL_WRONG" ]' || exit 1
# The proxy waits for the topic's metadata as long as it would for a broker still
# starting (60 s), then stops; librdkafka logs the refused login meanwhile.
wrong_password() {
    BW_SASL_WRONG=not-$SASL_PW timeout 120 "$BIN/bw-proxy" -c "$WORK/wrong.conf" -b "$BROKERS" -p 0 \
        >"$WORK/wrong-proxy.log" 2>&1
    local rc=$?
    grep -v '^%' "$WORK/wrong-proxy.log" | tail -3
    grep -m1 'SASL authentication error' "$WORK/wrong-proxy.log"
    [ $rc = 1 ] && grep -q "SASL authentication error: Authentication failed: Invalid username or password" \
        "$WORK/wrong-proxy.log" && grep -q "ERROR proxy kafka metadata for topic bulkwrite.batches: .*still after 60 s" \
        "$WORK/wrong-proxy.log"
}
check "a wrong password: SASL authentication failed is logged, and the proxy stops (exit 1)" wrong_password
unset_var() {
    ! "$BIN/bw-proxy" -c "$WORK/wrong.conf" -b "$BROKERS" -p 0 --dump-config >/dev/null 2>"$WORK/unset.err" &&
        grep -q "kafka.properties: sasl.password: the environment variable BW_SASL_WRONG is not set" "$WORK/unset.err"
}
check "a password variable that is not set stops startup, naming the key and the variable" unset_var
no_secret() {
    "$BIN/bw-consumer" -c "$CONF" --dump-config >"$WORK/dump-consumer.txt" || return 1
    grep -q '"sasl.password=(redacted)"' "$WORK/dump-consumer.txt" &&
        ! grep -l -e "$SASL_PW" "$WORK"/*.log "$WORK"/*.txt "$WORK"/*.err
}
check "the password is in no dump and no log" no_secret

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
