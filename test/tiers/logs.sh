# logs.sh — the log as an SRE greps and filters it (docs/operations.md#logs): a named
# job's id, the one its client holds, in the consumer's lines about it (its part a field
# of its own, the part's internal id nowhere); librdkafka's lines in bulkwrite's format,
# never its own "%4|…|FAC|…"; the syslog priority prefixes under journald; log_format =
# json, every line a JSON object (bw-kafka-embedded's too). Sourced by e2e.sh (check,
# wait_for, WORK, CONF, URL, PROXY, BIN, BWCTL, MODE), so it runs with both Kafka modes.

logs_tests() {
    # -- a named job whose part 1 creates again the pin its part 0 created: the consumer
    # logs the refused op with job=<the job's id> part=1
    local pin=$((68719476736 + 24000000))
    logs_named_job() {
        local create id
        create="{\"op\":\"create\",\"object_type\":\"pin\",\"id\":$pin,\"shard_key\":\"42\",\"fields\":{\"owner_id\":42}}"
        curl -sf -o "$WORK/logs-0.json" -H 'Content-Type: application/json' "$URL" \
            -d "{\"job\":\"logs-grep\",\"job_part\":0,\"ops\":[$create]}" &&
            curl -sf -o /dev/null -H 'Content-Type: application/json' "$URL" \
                -d "{\"job\":\"logs-grep\",\"job_part\":1,\"job_last\":true,\"ops\":[$create]}" || return 1
        id=$(jq -r .job_id "$WORK/logs-0.json")
        wait_for 60 sh -c "curl -sf http://127.0.0.1:$PROXY/v1/jobs/$id | jq -e '.finished and .failed == 1' >/dev/null" ||
            { curl -s "http://127.0.0.1:$PROXY/v1/jobs/$id"; return 1; }
        grep -h -- "job=$id part=1 " "$WORK"/consumer-*.log | grep -- "failed: .*Duplicate entry" || return 1
        # the part's own id (the job's first 20 hex digits, then the part number in 12)
        ! grep -h -- "${id:0:20}00000000000" "$WORK"/consumer-*.log "$WORK/proxy.log"
    }
    check "a named job's refused op is logged by the consumer with the client's job id and part=1" logs_named_job

    # -- no program of the stack wrote a line in librdkafka's own format
    no_raw_lines() { # (a file missing, as kafka.log on a real broker, is no match)
        local raw
        raw=$(grep -sh '^%[0-9]|' "$WORK/proxy.log" "$WORK"/consumer-*.log "$WORK/kafka.log")
        echo "$raw"
        [ -s "$WORK/proxy.log" ] && [ -z "$raw" ]
    }
    check "no raw librdkafka line (%N|…) in the proxy's, the consumers' or the embedded Kafka's logs" no_raw_lines

    # -- a consumer against a closed port: librdkafka's connect failures, in bulkwrite's
    # format, in JSON (log_format) and with journald's priority prefixes (JOURNAL_STREAM)
    logs_throwaway() { # logs_throwaway NAME JOURNAL(0|1) [KEY=VALUE...]: its stderr in $WORK/NAME.log
        local name=$1 journal=$2 pid
        shift 2
        cp "$CONF" "$WORK/$name.conf"
        [ $# = 0 ] || "$BIN/bwctl" config-set "$WORK/$name.conf" "$@" || return 1
        : >"$WORK/$name.log"
        # systemd's JOURNAL_STREAM: the device and inode of the stream stderr is
        ( [ "$journal" = 1 ] && export JOURNAL_STREAM=$(stat -c %d:%i "$WORK/$name.log")
          exec "$BIN/bw-consumer" -c "$WORK/$name.conf" -b 127.0.0.1:1 -p 0 >>"$WORK/$name.log" 2>&1 ) &
        pid=$!
        wait_for 20 grep -q 'facility.*FAIL' "$WORK/$name.log"
        kill -9 $pid 2>/dev/null # it never got to Kafka: nothing to leave cleanly
        wait $pid 2>/dev/null
        cat "$WORK/$name.log"
    }
    logs_json() {
        logs_throwaway logs-json 0 log_format=json || return 1
        [ -s "$WORK/logs-json.log" ] &&
            # every line one JSON object (jq reads them one by one: count them)
            [ "$(jq -c . "$WORK/logs-json.log" | wc -l)" = "$(wc -l <"$WORK/logs-json.log")" ] &&
            jq -s -e 'any(.[]; .level == "error" and .component == "kafka" and .facility == "FAIL" and
                (.client | startswith("rdkafka#consumer-")) and (.msg | contains("Connect to")))' \
                "$WORK/logs-json.log" >/dev/null
    }
    check "log_format=json: every line parses, librdkafka's connect failure among them (component kafka, facility FAIL)" logs_json
    logs_journal() {
        logs_throwaway logs-journal 1 || return 1
        [ -s "$WORK/logs-journal.log" ] && ! grep -qv '^<[3467]>' "$WORK/logs-journal.log" &&
            grep -q '^<3>[-0-9T:.]*Z ERROR kafka client=rdkafka#consumer-[0-9]* facility=FAIL .*Connect to' \
                "$WORK/logs-journal.log"
    }
    check "under journald (JOURNAL_STREAM is stderr) every line starts with its priority: <3> for librdkafka's error" logs_journal

    # -- the embedded Kafka's own lines are in the configured format too
    embedded_json() {
        local pid ok=1
        cp "$CONF" "$WORK/logs-embedded.conf"
        "$BIN/bwctl" config-set "$WORK/logs-embedded.conf" log_format=json || return 1
        rm -f "$WORK/logs-embedded.bootstrap"
        "$BIN/bw-kafka-embedded" -c "$WORK/logs-embedded.conf" --bootstrap-file "$WORK/logs-embedded.bootstrap" \
            >/dev/null 2>"$WORK/logs-embedded.log" &
        pid=$!
        wait_for 20 grep -q 'partitions on' "$WORK/logs-embedded.log" || ok=0
        kill $pid 2>/dev/null
        wait $pid 2>/dev/null
        cat "$WORK/logs-embedded.log"
        [ $ok = 1 ] && [ "$(jq -c . "$WORK/logs-embedded.log" | wc -l)" = "$(wc -l <"$WORK/logs-embedded.log")" ] &&
            jq -s -e 'any(.[]; .level == "info" and .component == "kafka-embedded" and (.msg | contains("partitions on")))' \
                "$WORK/logs-embedded.log" >/dev/null
    }
    if [ "$MODE" = embedded ]; then
        check "bw-kafka-embedded with log_format=json: every line parses, its own (component kafka-embedded) among them" embedded_json
    fi
}
