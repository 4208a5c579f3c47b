# cli.sh — the installed programs' command lines (sourced by install.sh, which defines
# check and WORK): run from / with no -c, each names the configuration its PREFIX
# installs (compiled in: $SYSCONFDIR/bulkwrite/bulkwrite.conf, without DESTDIR);
# BULKWRITE_CONF points each at another; bwctl takes its own options after the command;
# --version on every program; a bad flag gets one line naming it and "try '… --help'"
# (exit 2), a missing required option is named.
#
# cli_checks DEST BINDIR SYSCONFDIR LABEL

CLI_PROGRAMS=(bw-proxy bw-consumer bwctl)
# bw-workload is no installed program (a test tool): the build's, from install.sh's copy
CLI_WORKLOAD=${CLI_WORKLOAD:-$WORK/bin/bw-workload}

# NAME ARGS...: run from / with nothing in the environment naming a configuration
cli_run() { (cd / && env -u BULKWRITE_CONF "$@"); }

# Each program, with no -c, reads (or fails to read) the installed path, and says so
cli_default_named() { # BIN CONF
    local out p
    for p in "${CLI_PROGRAMS[@]}"; do
        "$1/$p" --help | grep -qF -- "else $2" || { echo "$p --help does not name $2"; return 1; }
    done
    out=$(cli_run "$1/bwctl" check-config 2>&1)
    echo "bwctl check-config: $out"
    grep -qF "$2" <<<"$out" || return 1
    out=$(cli_run "$1/bw-proxy" --dump-config 2>&1 | sed -n 1p)
    echo "bw-proxy --dump-config: $out"
    grep -qF "$2" <<<"$out"
}

# BULKWRITE_CONF names the configuration for every program, from any folder; -c wins
cli_env_read() { # BIN CONF
    local p
    (cd / && BULKWRITE_CONF=$2 "$1/bwctl" check-config) | grep -qxF "$2: ok (8 shards on 2 servers, 2 object types)" ||
        { echo "bwctl check-config with BULKWRITE_CONF=$2"; return 1; }
    for p in bw-proxy bw-consumer; do
        [ "$(cd / && BULKWRITE_CONF=$2 "$1/$p" --dump-config | sed -n 1p)" = "# effective configuration of $2" ] ||
            { echo "$p --dump-config with BULKWRITE_CONF=$2"; return 1; }
    done
    (cd / && BULKWRITE_CONF=$2 "$CLI_WORKLOAD" jsonl feed:3:2) | [ "$(wc -l)" = 3 ] || { echo "bw-workload jsonl"; return 1; }
    ! (cd / && BULKWRITE_CONF=$2 "$1/bwctl" check-config -c /nonexistent.conf 2>&1) || { echo "-c did not win"; return 1; }
}

cli_versions() { # BIN
    local p v
    for p in "${CLI_PROGRAMS[@]/#/$1/}" "$CLI_WORKLOAD"; do
        v=$("$p" --version)
        echo "$v"
        grep -qx "${p##*/} $(cat VERSION) (commit [0-9a-f]*)" <<<"$v" || return 1
    done
    [ "$("$1/bwctl" pause --version)" = "$("$1/bwctl" --version)" ] # a global option after the command too
}

# PROG_AND_ARGS...: exit 2, and stderr is the named mistake and "try 'WHO --help'", no more
cli_refused() { # WHO WANTED COMMAND...
    local who=$1 wanted=$2 rc; shift 2
    (cd / && "$@") >"$WORK/cli.out" 2>"$WORK/cli.err"; rc=$?
    cat "$WORK/cli.err"
    [ "$rc" = 2 ] && [ ! -s "$WORK/cli.out" ] && [ "$(wc -l <"$WORK/cli.err")" = 2 ] &&
        grep -qF -- "$wanted" <(head -1 "$WORK/cli.err") && [ "$(tail -1 "$WORK/cli.err")" = "try '$who --help'" ]
}

cli_bad_flags() { # BIN
    cli_refused "bwctl pause" "bwctl pause: unrecognized option '--bogus'" "$1/bwctl" pause 4 --bogus &&
        cli_refused bwctl "bwctl: unrecognized option '--bogus'" "$1/bwctl" --bogus shards &&
        cli_refused bw-workload "bw-workload: unrecognized option '--bogus'" "$CLI_WORKLOAD" --bogus jsonl feed:1:0 &&
        cli_refused bw-proxy "bw-proxy: unrecognized option '--bogus'" "$1/bw-proxy" --bogus &&
        cli_refused bw-consumer "bw-consumer: unrecognized option '--bogus'" "$1/bw-consumer" --bogus
}

cli_missing_named() { # BIN CONF
    cli_refused "bwctl set-budget" "bwctl set-budget: --reason is required" \
        "$1/bwctl" set-budget --server mysql-b 400 -c "$2" &&
        cli_refused "bwctl pause" "bwctl pause: a SHARD (or --server NAME) is required" "$1/bwctl" pause -c "$2" &&
        cli_refused "bwctl set-rate" "bwctl set-rate: a RATE, --rows ROWS, --pin or --unpin is required" \
            "$1/bwctl" -c "$2" set-rate 4 &&
        cli_refused bw-workload "bw-workload: submit: --url is required" "$CLI_WORKLOAD" submit feed:1:0 -c "$2"
}

# bwctl's own options after the command: the configuration read (-c) and the proxy asked
# (--url, a port nothing listens on) are the ones given there, the command's own kept
cli_options_after() { # BIN CONF
    local out
    out=$(cli_run "$1/bwctl" pause 4 -c "$2" --reason "disk swap" --url http://127.0.0.1:1 2>&1)
    echo "$out"
    [ "$out" = "bwctl: http://127.0.0.1:1/v1/shards/4/pause: Couldn't connect to server" ] || return 1
    out=$(cli_run "$1/bwctl" set-rate --url=http://127.0.0.1:1 --server mysql-a 40 --config "$2" --reason x 2>&1)
    echo "$out"
    [ "$out" = "bwctl: http://127.0.0.1:1/v1/servers/mysql-a/rate: Couldn't connect to server" ]
}

cli_checks() { # DEST BINDIR SYSCONFDIR LABEL
    local bin=$1$2 conf=$1$3/bulkwrite/bulkwrite.conf l=$4
    check "$l: the installed programs, with no -c, name $3/bulkwrite/bulkwrite.conf" cli_default_named "$bin" "$3/bulkwrite/bulkwrite.conf"
    check "$l: BULKWRITE_CONF names the configuration for every program from any folder; -c wins" cli_env_read "$bin" "$conf"
    check "$l: --version on every program (bw-workload: the build's): NAME VERSION (commit HASH)" cli_versions "$bin"
    check "$l: a bad flag: one line naming it, then \"try '… --help'\", exit 2 (every program)" cli_bad_flags "$bin"
    check "$l: a missing required option or operand is named (set-budget's --reason, …), exit 2" cli_missing_named "$bin" "$conf"
    check "$l: bwctl's -c, --config and --url after the command, the command's own options kept" cli_options_after "$bin" "$conf"
}
