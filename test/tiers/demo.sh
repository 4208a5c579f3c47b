#!/usr/bin/env bash
# test/tiers/demo.sh embedded: `make demo` (scripts/demo.sh) on a port base of its own, as
# a user runs it (about 30 s on 2 cores; it starts its own MariaDB servers and embedded
# Kafka).
#   1. one of its ports taken: it stops before starting anything, naming the port, what
#      uses it and DEMO_PORT_BASE, and leaves no folder behind;
#   2. a run that fails half-way (a job it cannot parse): its logs are kept, and it says
#      where;
#   3. the whole demo on the port base: it passes (every shard row by row), its proxy on
#      base + 2, and it ends with the SRE page's address.
# Ports: DEMO_BASE (24320 + BW_TEST_PORT_OFFSET) to DEMO_BASE + 3, between the tiers'
# MariaDB ports (24306-24310) and the real broker lane's (25306-), below 32768.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?usage: test/tiers/demo.sh embedded}
[ "$MODE" = embedded ] || { echo "demo.sh: the demo runs on the embedded Kafka only" >&2; exit 2; }
. test/lib.sh
DEMO_BASE=$((24320 + off))
WORK=$(mktemp -d /tmp/bw-demo-tier.XXXXXX)
trap bw_stack_stop EXIT
export BW_BIN=$BIN

echo "# demo: ports $DEMO_BASE to $((DEMO_BASE + 3))"
# ---- 1. a port taken --------------------------------------------------------------------------
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(120)' $((DEMO_BASE + 2)) &
pids+=($!)
wait_for 10 bash -c "(exec 3<>/dev/tcp/127.0.0.1/$((DEMO_BASE + 2)))" || { echo "could not hold a port"; exit 1; }
ls -d /tmp/bw-demo.* 2>/dev/null | sort >"$WORK/before"
DEMO_PORT_BASE=$DEMO_BASE scripts/demo.sh >"$WORK/taken.out" 2>&1
echo $? >"$WORK/taken.rc"
kill "${pids[-1]}" 2>/dev/null
ls -d /tmp/bw-demo.* 2>/dev/null | sort >"$WORK/after"
check "the proxy's port taken: the demo exits 1, naming the port, the proxy and DEMO_PORT_BASE" eval \
    'cat "$WORK/taken.out"; [ "$(cat "$WORK/taken.rc")" = 1 ] &&
    grep -qF "demo: port $((DEMO_BASE + 2)) (the proxy) is taken on 127.0.0.1" "$WORK/taken.out" &&
    grep -qF "make demo DEMO_PORT_BASE=N" "$WORK/taken.out"'
check "... before starting anything: no MariaDB started, no folder left behind" eval \
    '! grep -q "mariadb: up" "$WORK/taken.out" && diff "$WORK/before" "$WORK/after"'

# ---- 2. a failure half-way keeps the logs -----------------------------------------------------
BW_DEMO_FEED=many DEMO_PORT_BASE=$DEMO_BASE scripts/demo.sh >"$WORK/failed.out" 2>&1
echo $? >"$WORK/failed.rc"
kept=$(sed -n 's/^demo: failed; its logs are kept in \([^ ]*\) .*/\1/p' "$WORK/failed.out")
check "a demo that fails after starting its servers exits non-zero and says where its logs are" eval \
    'tail -5 "$WORK/failed.out"; [ "$(cat "$WORK/failed.rc")" != 0 ] && [ -n "$kept" ]'
check "... and they are there: MariaDB's error.log, the proxy's and the consumer's logs" eval \
    'ls "$kept"; [ -s "$kept/mysql-a/error.log" ] && [ -s "$kept/proxy.log" ] && [ -f "$kept/consumer.log" ]'
check "... and its servers are stopped (the ports are free again)" eval \
    '! (exec 3<>/dev/tcp/127.0.0.1/$DEMO_BASE) 2>/dev/null && ! (exec 3<>/dev/tcp/127.0.0.1/$((DEMO_BASE + 2))) 2>/dev/null'
[ -n "$kept" ] && [ "$kept" != / ] && rm -rf "$kept"

# ---- 3. the whole demo on the port base -------------------------------------------------------
start=$(date +%s)
DEMO_PORT_BASE=$DEMO_BASE scripts/demo.sh >"$WORK/demo.out" 2>&1
echo $? >"$WORK/demo.rc"
echo "# the demo took $(($(date +%s) - start)) s"
check "the demo passes on port base $DEMO_BASE, every shard compared row by row" eval \
    'tail -15 "$WORK/demo.out"; [ "$(cat "$WORK/demo.rc")" = 0 ] && grep -q "^verify: every shard matches the expected state row by row" "$WORK/demo.out"'
check "... its MariaDB servers on $DEMO_BASE and $((DEMO_BASE + 1)), its proxy on $((DEMO_BASE + 2)), its consumer on $((DEMO_BASE + 3))" eval \
    'grep -qF "mariadb: up on 127.0.0.1:$DEMO_BASE " "$WORK/demo.out" && grep -qF "mariadb: up on 127.0.0.1:$((DEMO_BASE + 1)) " "$WORK/demo.out" &&
    grep -qF "proxy: http://127.0.0.1:$((DEMO_BASE + 2)); consumer metrics: http://127.0.0.1:$((DEMO_BASE + 3))/metrics" "$WORK/demo.out"'
check "... and it ends with the SRE page's address" \
    eval 'tail -1 "$WORK/demo.out" | grep -qF "The SRE page is http://127.0.0.1:$((DEMO_BASE + 2))/ui/"'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
