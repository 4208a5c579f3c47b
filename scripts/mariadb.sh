#!/usr/bin/env bash
# Throwaway MariaDB servers for tests: one self-contained server per DIR,
# TCP on 127.0.0.1 only, root with an empty password.
set -euo pipefail

usage() {
    cat >&2 <<EOF
usage: $0 start  DIR PORT   init DIR/data if needed, start server on 127.0.0.1:PORT
       $0 stop   DIR        clean shutdown (SIGTERM/SIGKILL fallback), wait max 30 s
       $0 kill   DIR        kill -9 the server (fault tests)
       $0 status DIR        print whether it runs; exit 0 if up, 3 if down
       $0 start-replica DIR PORT PRIMARY_PORT
                            start a server like 'start', make it replicate the server on
                            127.0.0.1:PRIMARY_PORT from that server's first binlog, wait
                            max 30 s until both replication threads run
       $0 replica-sql DIR stop|start
                            stop/start the replica's SQL thread (its lag then grows/shrinks)
       $0 replica-io DIR stop|start
                            stop/start the replica's IO thread: it receives nothing more from
                            its primary (a broken link), what it received it still applies
       $0 promote DIR       make a replica a primary, as a failover does: STOP SLAVE, RESET
                            SLAVE ALL, read_only off
Connect: mariadb -h127.0.0.1 -P PORT -uroot   (empty password)
BW_MARIADB_ARGS adds options to mariadbd (e.g. --character-set-server=latin1).
BW_MARIADB_PRIMARY=1 (with start) makes the server one a replica can follow: binary log
  (ROW format) and server-id = PORT. Remembered in DIR: later starts keep it.
Files in DIR: data/ tmp/ mysqld.sock mysqld.pid error.log port [primary] [replica]
EOF
    exit 2
}

die() { echo "mariadb: ERROR: $*" >&2; exit 1; }

# A pid counts as alive unless gone or a zombie: the server is re-parented to
# PID 1 when this script exits, and not every init reaps (containers, VMs).
alive() {
    local pid=$1 st
    [[ -n $pid ]] || return 1
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# Pid of the server running in DIR, or empty. Checks the command name so a
# stale pid file whose pid got reused by something else is not trusted.
server_pid() {
    local pid
    pid=$(cat "$DIR/mysqld.pid" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || return 0
    alive "$pid" || return 0
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == mariadbd || $(cat "/proc/$pid/comm" 2>/dev/null) == mysqld ]] || return 0
    echo "$pid"
}

wait_gone() { # pid seconds
    local pid=$1 i
    for ((i = 0; i < $2 * 10; i++)); do
        alive "$pid" || return 0
        sleep 0.1
    done
    return 1
}

sock_sql() { # run SQL as root over the unix socket (works before TCP grants exist)
    mariadb --no-defaults --protocol=socket -S "$DIR/mysqld.sock" -uroot -N -B -e "$1"
}

# SHOW SLAVE STATUS, one "Field: value" per line; empty if no replication is set up.
slave_status() {
    mariadb --no-defaults --protocol=socket -S "$DIR/mysqld.sock" -uroot -E -e 'SHOW SLAVE STATUS'
}

field() { # field NAME <status: the value of NAME
    sed -n "s/^ *$1: //p" | head -n 1
}

cmd_start() {
    local port=$1 pid i
    [[ $port =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) || die "bad PORT '$port'"
    command -v mariadbd >/dev/null 2>&1 || PATH=$PATH:/usr/sbin
    command -v mariadbd >/dev/null 2>&1 || die "mariadbd not found (run scripts/install-deps.sh)"
    mkdir -p "$DIR"

    pid=$(server_pid)
    if [[ -n $pid ]]; then
        echo "mariadb: already running, pid $pid, on 127.0.0.1:$(cat "$DIR/port" 2>/dev/null || echo '?') ($DIR)"
        return 0
    fi

    # unix socket paths are limited to 107 bytes; fail clearly instead of obscurely
    ((${#DIR} + 12 < 108)) || die "DIR path too long for a unix socket: $DIR"

    # Fail clearly if the port is taken; otherwise the readiness check below
    # could be answered by somebody else's server.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "127.0.0.1:$port is already in use by another process"
    fi

    # global_priv.frm only exists once mariadb-install-db finished. A data dir
    # left by an interrupted init (marker still there) is redone; anything else
    # we did not create is not ours to delete.
    # A tmpdir of its own: a server deletes every "#sql*" file in its tmpdir when it
    # starts, which in a shared /tmp broke another server's mariadb-install-db (seen
    # when the two test lanes started servers at once).
    mkdir -p "$DIR/tmp"
    if [[ ! -e $DIR/data/mysql/global_priv.frm ]]; then
        if [[ -e $DIR/.init-in-progress ]]; then
            rm -rf "$DIR/data"
        elif [[ -d $DIR/data && -n $(ls -A "$DIR/data") ]]; then
            die "$DIR/data exists but is not a MariaDB data dir; remove it first"
        fi
        touch "$DIR/.init-in-progress"
        # --user=root: we run as root and mariadbd refuses root without it.
        # auth=normal: root@localhost gets a usable (empty) password, not unix_socket.
        if ! mariadb-install-db --no-defaults --user=root \
                --auth-root-authentication-method=normal \
                --datadir="$DIR/data" --tmpdir="$DIR/tmp" --skip-test-db --skip-name-resolve \
                >"$DIR/install-db.log" 2>&1; then
            tail -n 20 "$DIR/install-db.log" >&2
            die "mariadb-install-db failed (see $DIR/install-db.log)"
        fi
        rm -f "$DIR/.init-in-progress"
    fi

    # Replication roles. Off by default: a binary log costs every other test a write
    # per commit. Remembered by a marker file because tests restart servers with a
    # plain 'start' (fault tests): a primary restarted without its binlog would
    # silently stop feeding its replica, and a replica restarted under another
    # server-id / relay-log name would not find its relay log.
    local role=()
    [[ ${BW_MARIADB_PRIMARY:-0} == 1 ]] && touch "$DIR/primary"
    [[ -e $DIR/primary ]] && role+=(--log-bin=mysql-bin --binlog-format=ROW)
    # relay log named explicitly: the default name contains the host name
    [[ -e $DIR/replica ]] && role+=(--relay-log=relay-bin)
    # server-id from the port: unique among the servers of one machine, and a
    # replica skips events that carry its own server-id
    ((${#role[@]} == 0)) || role+=(--server-id="$port")

    rm -f "$DIR/mysqld.pid"   # so we only ever read the pid of this start
    # setsid+nohup: the server must outlive this script and the caller's terminal.
    setsid nohup mariadbd --no-defaults \
        --datadir="$DIR/data" --tmpdir="$DIR/tmp" --socket="$DIR/mysqld.sock" \
        --port="$port" --bind-address=127.0.0.1 \
        --pid-file="$DIR/mysqld.pid" --log-error="$DIR/error.log" \
        --user=root --skip-name-resolve \
        --innodb-buffer-pool-size=128M --innodb-flush-log-at-trx-commit=2 \
        --max-connections=500 "${role[@]}" ${BW_MARIADB_ARGS:-} \
        </dev/null >>"$DIR/mariadbd.out" 2>&1 &
    local launcher=$!
    echo "$port" >"$DIR/port"

    # Ready = our own socket answers (the socket is created after the TCP bind).
    local up=0 died=0
    for ((i = 0; i < 600; i++)); do
        if mariadb-admin --no-defaults --protocol=socket -S "$DIR/mysqld.sock" -uroot \
                --connect-timeout=2 ping >/dev/null 2>&1; then
            up=1; break
        fi
        if ! alive "$launcher" && [[ -z $(server_pid) ]]; then
            died=1; break   # died during startup (port in use, bad datadir, ...)
        fi
        sleep 0.1
    done
    if ((up == 0)); then
        tail -n 20 "$DIR/error.log" >&2 2>/dev/null || true
        pid=$(server_pid)
        [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
        ((died)) && die "mariadbd exited during startup (see $DIR/error.log)"
        die "server did not come up on 127.0.0.1:$port within 60 s (see $DIR/error.log)"
    fi

    # Make root usable over TCP with an empty password. With --skip-name-resolve
    # a TCP client from 127.0.0.1 only matches host '127.0.0.1', not 'localhost'.
    # Re-applied on every start: cheap, and repairs a data dir made elsewhere.
    sock_sql "
        CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
        ALTER USER 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
        GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
        ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
        GRANT ALL ON *.* TO 'root'@'localhost' WITH GRANT OPTION;
    " >/dev/null || die "could not set up root accounts via $DIR/mysqld.sock"

    # Proves TCP login works and that the port really belongs to this DIR's server.
    local dd
    dd=$(mariadb --no-defaults -h127.0.0.1 -P "$port" -uroot -N -B -e 'SELECT @@datadir') \
        || die "server is up but root@127.0.0.1 cannot log in over TCP port $port"
    [[ ${dd%/} == "$DIR/data" ]] || die "127.0.0.1:$port is served by another server (datadir $dd)"

    echo "mariadb: up on 127.0.0.1:$port ($DIR)"
}

# Waits max 30 s until the replication threads named in $1 ("IO SQL" or "SQL")
# run; dies with the replica's last errors otherwise.
wait_replicating() {
    local want=$1 st io sql i
    for ((i = 0; i < 300; i++)); do
        st=$(slave_status 2>/dev/null) || st=
        io=$(field Slave_IO_Running <<<"$st") sql=$(field Slave_SQL_Running <<<"$st")
        [[ $sql == Yes && ($want == SQL || $io == Yes) ]] && return 0
        # an SQL thread stopped by an error stays stopped: no point waiting
        [[ $sql == No && -n $(field Last_SQL_Error <<<"$st") ]] && break
        sleep 0.1
    done
    die "replication not running on $DIR (Slave_IO_Running=${io:-?}, Slave_SQL_Running=${sql:-?})
  Last_IO_Error: $(field Last_IO_Error <<<"$st")
  Last_SQL_Error: $(field Last_SQL_Error <<<"$st")"
}

cmd_start_replica() {
    local port=$1 primary=$2 first st mport
    [[ $primary =~ ^[0-9]+$ ]] && ((primary > 0 && primary < 65536)) || die "bad PRIMARY_PORT '$primary'"
    [[ $port != "$primary" ]] || die "a server cannot replicate itself (PORT = PRIMARY_PORT)"

    # Asked before anything starts: the primary must be up and keep a binary log.
    # Its root@127.0.0.1 has ALL PRIVILEGES, which include REPLICATION SLAVE, so the
    # replica logs in as root with the empty password like every test tool.
    first=$(mariadb --no-defaults -h127.0.0.1 -P "$primary" -uroot -N -B -e 'SHOW BINARY LOGS' 2>&1) ||
        die "cannot read the binary logs of 127.0.0.1:$primary (is it up, started with BW_MARIADB_PRIMARY=1?): $first"
    first=$(head -n 1 <<<"$first" | cut -f 1)
    [[ -n $first ]] || die "127.0.0.1:$primary has no binary log"

    # Before cmd_start: the marker gives the server its server-id and relay log name.
    mkdir -p "$DIR"
    touch "$DIR/replica"
    cmd_start "$port"
    # No --read-only: default OFF, and the test tools write to the replica as root.

    st=$(slave_status) || die "SHOW SLAVE STATUS failed on $DIR"
    if [[ -n $st ]]; then
        # Already a replica (a second start-replica): keep its position.
        mport=$(field Master_Port <<<"$st")
        [[ $mport == "$primary" ]] || die "$DIR already replicates 127.0.0.1:$mport, not :$primary"
    else
        # From the primary's first binlog at its first event (4 = after the header),
        # by file and position: it has everything since the primary first ran with
        # BW_MARIADB_PRIMARY=1 (databases, tables, and users: CREATE USER and GRANT
        # are logged as statements). MASTER_USE_GTID=no: the replica's empty GTID
        # position means nothing here. MASTER_CONNECT_RETRY=1: after a restart of the
        # primary (fault tests) it reconnects within 1 s, not the default 60 s.
        sock_sql "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$primary,
                      MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=no,
                      MASTER_LOG_FILE='$first', MASTER_LOG_POS=4, MASTER_CONNECT_RETRY=1" ||
            die "CHANGE MASTER failed on $DIR"
    fi
    # a no-op (with a warning) when both threads already run
    sock_sql 'START SLAVE' >/dev/null || die "START SLAVE failed on $DIR"
    wait_replicating "IO SQL"
    echo "mariadb: replica on 127.0.0.1:$port of 127.0.0.1:$primary, replicating ($DIR)"
}

# cmd_replica_thread SQL|IO stop|start: one of the replica's two threads. Stopping SQL
# makes its lag grow (relay logs keep growing); stopping IO cuts it off from its primary
# (what it received it still applies). STOP returns once the thread stopped.
cmd_replica_thread() {
    local thread=$1 action=$2 wait=SQL
    [[ $thread == IO ]] && wait="IO SQL"
    [[ -n $(server_pid) ]] || die "not running ($DIR)"
    [[ -n $(slave_status) ]] || die "$DIR is not a replica"
    case $action in
        stop | start) sock_sql "${action^^} SLAVE ${thread}_THREAD" >/dev/null ||
                          die "${action^^} SLAVE ${thread}_THREAD failed on $DIR"
                      [[ $action == stop ]] || wait_replicating "$wait" ;;
        *) usage ;;
    esac
    echo "mariadb: replica $thread thread: $action ($DIR)"
}

cmd_promote() {
    [[ -n $(server_pid) ]] || die "not running ($DIR)"
    sock_sql 'STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0' >/dev/null || die "promoting $DIR failed"
    # a later plain 'start' must not name a relay log it no longer has
    rm -f "$DIR/replica"
    echo "mariadb: promoted: no longer a replica, writable ($DIR)"
}

cmd_stop() {
    local pid
    pid=$(server_pid)
    if [[ -z $pid ]]; then
        echo "mariadb: not running ($DIR)"
        return 0
    fi
    # Clean shutdown via the socket; a plain SIGTERM does the same if that fails.
    mariadb-admin --no-defaults --protocol=socket -S "$DIR/mysqld.sock" -uroot \
        shutdown >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" 30; then
        echo "mariadb: WARNING: pid $pid still alive after 30 s, sending SIGKILL" >&2
        kill -9 "$pid" 2>/dev/null || true
        wait_gone "$pid" 5 || die "pid $pid will not die"
    fi
    echo "mariadb: stopped ($DIR)"
}

cmd_kill() {
    local pid
    pid=$(server_pid)
    if [[ -z $pid ]]; then
        echo "mariadb: not running ($DIR)"
        return 0
    fi
    kill -9 "$pid"
    wait_gone "$pid" 10 || die "pid $pid survived SIGKILL"
    echo "mariadb: killed pid $pid ($DIR)"
}

cmd_status() {
    local pid
    pid=$(server_pid)
    if [[ -n $pid ]]; then
        echo "mariadb: running, pid $pid, on 127.0.0.1:$(cat "$DIR/port" 2>/dev/null || echo '?') ($DIR)"
    else
        echo "mariadb: not running ($DIR)"
        return 3
    fi
}

[[ $# -ge 2 ]] || usage
cmd=$1
# absolute path: mariadbd resolves relative paths against its datadir
DIR=$(realpath -m -- "$2")
case $cmd in
    start)  [[ $# -eq 3 ]] || usage; cmd_start "$3" ;;
    stop)   [[ $# -eq 2 ]] || usage; cmd_stop ;;
    kill)   [[ $# -eq 2 ]] || usage; cmd_kill ;;
    status) [[ $# -eq 2 ]] || usage; cmd_status ;;
    start-replica) [[ $# -eq 4 ]] || usage; cmd_start_replica "$3" "$4" ;;
    replica-sql)   [[ $# -eq 3 ]] || usage; cmd_replica_thread SQL "$3" ;;
    replica-io)    [[ $# -eq 3 ]] || usage; cmd_replica_thread IO "$3" ;;
    promote)       [[ $# -eq 2 ]] || usage; cmd_promote ;;
    *)      usage ;;
esac
