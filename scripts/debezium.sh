#!/usr/bin/env bash
# A throw-away Kafka Connect worker (standalone mode) with Debezium's PostgreSQL connector, from Maven Central jars
# fetched with mvn into .cache/kafka/jars/ (no Docker, no Kafka or Debezium tarball). Connectors are added through
# its REST API (tests/support/debezium.py, examples/cdc_postgres_to_lake/).
#
#   scripts/debezium.sh fetch     fetch the jars (no-op when already there)
#   scripts/debezium.sh start     fetch, start the worker against the broker, wait until its REST API lists the
#                                 PostgreSQL connector; prints the REST URL
#   scripts/debezium.sh stop      stop it by its pid (no-op when not running)
#   scripts/debezium.sh status    exit 0 and print the REST URL when running, 3 when not
#   scripts/debezium.sh url       print the REST URL (of the last start when not running)
#
# Environment:
#   CONNECT_BOOTSTRAP     the Kafka broker (default: `scripts/kafka.sh start`, the project's own broker)
#   KAFKA_VERSION         Connect runtime version (default 4.3.1, the broker's default)
#   DEBEZIUM_VERSION      default 3.6.1.Final (the newest whose modules Maven Central serves together here)
#   CONNECT_STATE_DIR     config, offsets, log and pid (default .cache/kafka/connect)
#   CONNECT_PORT          REST port (default: a free one, kept across restarts)
#   CONNECT_HEAP_OPTS     JVM heap (default -Xms256m -Xmx768m)
#
# PostgreSQL must run with wal_level=logical (scripts/postgres.sh configures its clusters so).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
POM="$ROOT/scripts/kafka/connect-pom.xml"
JARS="$ROOT/.cache/kafka/jars"
KAFKA_VERSION="${KAFKA_VERSION:-4.3.1}"
DEBEZIUM_VERSION="${DEBEZIUM_VERSION:-3.6.1.Final}"
STATE="${CONNECT_STATE_DIR:-$ROOT/.cache/kafka/connect}"
HOST=127.0.0.1
HEAP="${CONNECT_HEAP_OPTS:--Xms256m -Xmx768m}"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
DEST="$JARS/connect-$KAFKA_VERSION-debezium-$DEBEZIUM_VERSION"
PID_FILE="$STATE/connect.pid"
PORT_FILE="$STATE/port"
PROPS="$STATE/worker.properties"
LOG="$STATE/connect.log"

log() { echo "debezium.sh: $*" >&2; }
die() { log "$*"; exit 1; }

fetch() {
    local stamp tmp
    stamp="$KAFKA_VERSION $DEBEZIUM_VERSION $(sha256sum "$POM" | cut -d' ' -f1)"
    [[ -f "$DEST/.complete" && "$(cat "$DEST/.complete")" == "$stamp" ]] && return 0
    command -v mvn >/dev/null || die "no 'mvn' on PATH; install Maven (apt-get install maven)"
    log "fetching Kafka Connect $KAFKA_VERSION and Debezium $DEBEZIUM_VERSION jars into $DEST"
    tmp="$DEST.tmp.$$"
    rm -rf "$tmp"
    mvn -B -q -f "$POM" dependency:copy-dependencies -DincludeScope=runtime -Dkafka.version="$KAFKA_VERSION" \
        -Ddebezium.version="$DEBEZIUM_VERSION" -DoutputDirectory="$tmp" </dev/null >&2 ||
        { rm -rf "$tmp"; die "mvn could not fetch Kafka Connect $KAFKA_VERSION / Debezium $DEBEZIUM_VERSION"; }
    rm -rf "$DEST"
    mv "$tmp" "$DEST"
    echo "$stamp" >"$DEST/.complete"
}

with_fetch_lock() {
    mkdir -p "$JARS"
    (
        flock 8
        "$@"
    ) 8>"$JARS/.lock"
}

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

running_pid() {
    local pid
    pid=$(cat "$PID_FILE" 2>/dev/null || true)
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "ConnectStandalone $PROPS" || return 1
    echo "$pid"
}

url() {
    local port
    port=$(cat "$PORT_FILE" 2>/dev/null || true)
    [[ -n "$port" ]] || die "no Connect worker has been started in $STATE"
    echo "http://$HOST:$port"
}

write_config() {
    local bootstrap=$1 port=$2
    cat >"$PROPS" <<CONF
# Written by scripts/debezium.sh: a standalone Kafka Connect worker on $HOST.
bootstrap.servers=$bootstrap
listeners=http://$HOST:$port
rest.advertised.host.name=$HOST
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=false
value.converter.schemas.enable=false
offset.storage.file.filename=$STATE/offsets
offset.flush.interval.ms=1000
CONF
    cat >"$STATE/log4j2.properties" <<CONF
# Written by scripts/debezium.sh: everything at INFO into connect.log.
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $LOG
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
CONF
}

start() {
    local pid port bootstrap heap
    if pid=$(running_pid); then
        url
        return 0
    fi
    with_fetch_lock fetch
    command -v java >/dev/null || die "no 'java' on PATH; Kafka Connect 4.x needs Java 17+"
    bootstrap="${CONNECT_BOOTSTRAP:-$(bash "$ROOT/scripts/kafka.sh" start | tail -n 1)}"
    port="${CONNECT_PORT:-$(cat "$PORT_FILE" 2>/dev/null || true)}"
    if [[ -z "${CONNECT_PORT:-}" && -n "$port" ]] && port_open "$port"; then port=""; fi
    [[ -n "$port" ]] || port=$(free_port)
    echo "$port" >"$PORT_FILE"
    write_config "$bootstrap" "$port"
    read -r -a heap <<<"$HEAP"
    log "starting Kafka Connect $KAFKA_VERSION with Debezium $DEBEZIUM_VERSION on $HOST:$port (broker $bootstrap; log: $LOG)"
    : >"$LOG"
    # Own session: the worker outlives this script and is not killed with the caller's process group.
    setsid nohup java "${heap[@]}" -XX:+UseG1GC -Djava.awt.headless=true \
        "-Dlog4j2.configurationFile=$STATE/log4j2.properties" -cp "$DEST/*" \
        org.apache.kafka.connect.cli.ConnectStandalone "$PROPS" >"$STATE/stdout.log" 2>&1 </dev/null 9>&- &
    echo $! >"$PID_FILE"
    for _ in $(seq 1 480); do
        if ! running_pid >/dev/null; then
            tail -n 30 "$LOG" "$STATE/stdout.log" >&2 || true
            die "the Connect worker exited during start-up (port taken? set CONNECT_PORT)"
        fi
        if "$PYTHON" - "http://$HOST:$port/connector-plugins" 2>/dev/null <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.exit(0 if b"PostgresConnector" in r.read() else 1)
PY
        then
            url
            return 0
        fi
        sleep 0.25
    done
    tail -n 30 "$LOG" >&2 || true
    stop
    die "the Connect worker did not start within 120 s"
}

stop() {
    local pid
    if ! pid=$(running_pid); then
        log "not running ($STATE)"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 120); do
        running_pid >/dev/null || { log "stopped"; return 0; }
        sleep 0.25
    done
    log "no clean shutdown within 30 s: killing $pid"
    kill -KILL "$pid" 2>/dev/null || true
}

status() {
    if running_pid >/dev/null; then
        echo "running: $(url) (pid $(cat "$PID_FILE"), state: $STATE)"
    else
        echo "not running (state: $STATE)"
        return 3
    fi
}

cmd="${1:-}"
case "$cmd" in
    fetch) with_fetch_lock fetch ;;
    url) url ;;
    start|stop|status)
        mkdir -p "$STATE"
        exec 9>"$STATE/.lock"
        flock 9
        "$cmd"
        ;;
    *) echo "usage: $0 {fetch|start|stop|status|url}" >&2; exit 2 ;;
esac
