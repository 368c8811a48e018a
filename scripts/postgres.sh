#!/usr/bin/env bash
# A throw-away PostgreSQL for the tests and demos: cluster in .cache/postgres/, listening on 127.0.0.1 only, trust
# auth, superuser `postgres`, port $DUCKLAKE_PG_PORT (default 54329). Never touches the system's default cluster.
# A second, independent instance (e.g. one a fault test stops and starts) takes its own folder and port:
#   DUCKLAKE_PG_BASE=/tmp/pg2 DUCKLAKE_PG_PORT=54400 scripts/postgres.sh start
#
#   scripts/postgres.sh start    install (apt) + initdb when needed, start, wait until ready; prints the URL
#   scripts/postgres.sh stop     stop it (no-op when not running)
#   scripts/postgres.sh status   exit 0 when running, 3 when not
#   scripts/postgres.sh url      print the SQLAlchemy URL (of the running cluster, else of the configured port)
#
# As root the server runs as the `postgres` OS user (PostgreSQL refuses to run as root); otherwise as the caller.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PORT="${DUCKLAKE_PG_PORT:-54329}"
HOST=127.0.0.1
SUPERUSER=postgres
BASE=$(realpath -m "${DUCKLAKE_PG_BASE:-$ROOT/.cache/postgres}")
DATA="$BASE/data"
LOG="$BASE/postgres.log"
LOCK="$BASE/.lock"

log() { echo "postgres.sh: $*" >&2; }
die() { log "$*"; exit 1; }

url() { echo "postgresql+psycopg2://$SUPERUSER@$HOST:${1:-$PORT}/postgres"; }

# Port of this checkout's running cluster (line 4 of postmaster.pid), else the configured one.
running_port() {
    local pid port
    pid=$(sed -n 1p "$DATA/postmaster.pid" 2>/dev/null || true)
    port=$(sed -n 4p "$DATA/postmaster.pid" 2>/dev/null || true)
    if [[ "$pid" =~ ^[0-9]+$ && "$port" =~ ^[0-9]+$ && "$(cat "/proc/$pid/comm" 2>/dev/null)" == postgres* ]]; then
        echo "$port"
    else
        echo "$PORT"
    fi
}

# Newest server binaries of the Debian layout (/usr/lib/postgresql/<major>/bin); empty when none.
find_bin() {
    local d best="" best_major=0 major
    for d in /usr/lib/postgresql/*/bin; do
        [[ -x "$d/pg_ctl" && -x "$d/initdb" ]] || continue
        major=$(basename "$(dirname "$d")")
        [[ "$major" =~ ^[0-9]+$ ]] || continue
        if ((major > best_major)); then best="$d" best_major=$major; fi
    done
    echo "$best"
}

install_server() {
    [[ $EUID -eq 0 ]] || die "no PostgreSQL server found in /usr/lib/postgresql/*/bin; install it (apt-get install postgresql)"
    command -v apt-get >/dev/null || die "no PostgreSQL server found and no apt-get to install one"
    log "installing PostgreSQL from apt"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2
    apt-get install -y -q postgresql >&2
}

# Run a server command as the cluster owner, without the lock's fd 9 (a started server would inherit it and hold the
# lock forever).
as_owner() {
    if [[ $EUID -eq 0 ]]; then
        # cwd may be unreadable for the postgres user (e.g. under /root); $BASE is its own.
        (cd "$BASE" && runuser -u "$SUPERUSER" -- "$@" 9>&-)
    else
        "$@" 9>&-
    fi
}

# The postgres OS user must reach $BASE: add o+x (traverse only, no read) to ancestors that lack it.
ensure_traversable() {
    local d="$BASE"
    while [[ "$d" != "/" ]]; do
        d=$(dirname "$d")
        if ! runuser -u "$SUPERUSER" -- test -x "$d"; then
            log "adding o+x to $d so the '$SUPERUSER' user can reach $BASE"
            chmod o+x "$d"
        fi
    done
}

prepare_dirs() {
    mkdir -p "$BASE"
    if [[ $EUID -eq 0 ]]; then
        id -u "$SUPERUSER" >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash "$SUPERUSER"
        chown "$SUPERUSER:" "$BASE"
        chmod 700 "$BASE"
        ensure_traversable
    fi
}

is_running() { [[ -f "$DATA/PG_VERSION" ]] && as_owner "$BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1; }

ready() { "$BIN/pg_isready" -q -h "$HOST" -p "$PORT" -U "$SUPERUSER" -d postgres; }

init_cluster() {
    local major
    major=$(basename "$(dirname "$BIN")")
    if [[ -f "$DATA/PG_VERSION" && "$(cat "$DATA/PG_VERSION")" != "$major" ]]; then
        log "cluster in $DATA is from PostgreSQL $(cat "$DATA/PG_VERSION"), server is $major: re-creating it"
        rm -rf "$DATA"
    fi
    [[ -f "$DATA/PG_VERSION" ]] && return 0
    rm -rf "$DATA"
    log "initdb $DATA (PostgreSQL $major)"
    as_owner "$BIN/initdb" -D "$DATA" -U "$SUPERUSER" --auth=trust --encoding=UTF8 --no-locale >/dev/null
    cat >"$DATA/pg_hba.conf" <<'EOF'
# TYPE  DATABASE  USER  ADDRESS       METHOD
host    all       all   127.0.0.1/32  trust
EOF
    cat >>"$DATA/postgresql.conf" <<'EOF'

# scripts/postgres.sh: loopback TCP only, no unix socket (so nothing clashes with a system cluster).
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
}

# Logical decoding for Debezium's PostgreSQL connector (scripts/debezium.sh): added to clusters made before it too.
# Takes effect at the next start of the server.
logical_wal() {
    grep -q '^wal_level = logical' "$DATA/postgresql.conf" && return 0
    cat >>"$DATA/postgresql.conf" <<'EOF'

# scripts/postgres.sh: logical decoding (Debezium's PostgreSQL connector).
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
EOF
}

# A postmaster.pid left by a server that no longer exists (e.g. a machine handed over) can block start-up when its
# PID has been reused by another process.
remove_stale_pid() {
    local pidfile="$DATA/postmaster.pid" pid
    [[ -f "$pidfile" ]] || return 0
    pid=$(head -n 1 "$pidfile")
    if [[ ! "$pid" =~ ^[0-9]+$ ]] || [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" != postgres* ]]; then
        log "removing stale $pidfile"
        rm -f "$pidfile"
    fi
}

start() {
    if is_running; then
        local port
        port=$(running_port)
        [[ "$port" == "$PORT" ]] || log "already running on port $port (stop it to move it to $PORT)"
        url "$port"
        return 0
    fi
    if ready; then
        # Another checkout's cluster already holds the port: share it if it lets us in the same way.
        if "$BIN/psql" -w -X -q -h "$HOST" -p "$PORT" -U "$SUPERUSER" -d postgres -c 'SELECT 1' >/dev/null 2>&1; then
            log "port $PORT is served by a PostgreSQL outside $DATA; using it (set DUCKLAKE_PG_PORT for a separate one)"
            url
            return 0
        fi
        die "port $PORT is taken by a PostgreSQL that refuses trust login as '$SUPERUSER'; set DUCKLAKE_PG_PORT"
    fi
    init_cluster
    logical_wal
    remove_stale_pid
    log "starting on $HOST:$PORT (log: $LOG)"
    if ! as_owner "$BIN/pg_ctl" start -D "$DATA" -l "$LOG" -w -t 60 -o "-p $PORT" >/dev/null; then
        tail -n 20 "$LOG" >&2 || true
        die "could not start PostgreSQL (port $PORT in use? set DUCKLAKE_PG_PORT)"
    fi
    # pg_ctl -w waited for start-up; wait for TCP too.
    for _ in $(seq 1 60); do
        if ready; then
            url
            return 0
        fi
        sleep 0.5
    done
    tail -n 20 "$LOG" >&2 || true
    die "PostgreSQL did not become ready on $HOST:$PORT"
}

stop() {
    if is_running; then
        as_owner "$BIN/pg_ctl" stop -D "$DATA" -m fast -w >/dev/null
        log "stopped"
    else
        log "not running"
    fi
}

status() {
    if is_running; then
        echo "running: $(url "$(running_port)") (data: $DATA)"
    else
        echo "not running (data: $DATA)"
        return 3
    fi
}

cmd="${1:-}"
case "$cmd" in
    url) url "$(running_port)"; exit 0 ;;
    start|stop|status) ;;
    *) echo "usage: $0 {start|stop|status|url}" >&2; exit 2 ;;
esac

BIN=$(find_bin)
if [[ -z "$BIN" ]]; then
    case "$cmd" in
        status) echo "not installed"; exit 3 ;;
        stop) log "not installed"; exit 0 ;;
    esac
    install_server
    BIN=$(find_bin)
    [[ -n "$BIN" ]] || die "apt-get installed postgresql but no server binaries appeared in /usr/lib/postgresql/*/bin"
fi

prepare_dirs
# Serialize concurrent start/stop calls (parallel test runs in one checkout).
exec 9>"$LOCK"
flock 9
"$cmd"
