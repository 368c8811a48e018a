#!/usr/bin/env bash
# A throw-away Apache Kafka broker (single-node KRaft on 127.0.0.1) and Spark's Kafka source, both from Maven
# Central jars fetched with mvn into .cache/kafka/ (no Docker, no Kafka tarball).
#
#   scripts/kafka.sh fetch [broker|spark]  fetch the jars (no-op when already there)
#   scripts/kafka.sh start       fetch, format the storage on first use, start, wait until ready; prints the bootstrap
#   scripts/kafka.sh stop        stop it by its pid (no-op when not running)
#   scripts/kafka.sh status      exit 0 and print the bootstrap when running, 3 when not
#   scripts/kafka.sh bootstrap   print host:port of the broker (of the last start when not running)
#   scripts/kafka.sh spark-jars  print the comma-separated jars for spark.jars (fetching them when needed)
#
# Environment:
#   KAFKA_VERSION         broker version (default 4.3.1: the newest 4.x whose jars Maven Central serves in full here)
#   SPARK_KAFKA_VERSION   connector version (default: the installed pyspark's; when Maven Central does not serve that
#                         one, the newest release below it of the same major version, with a warning)
#   KAFKA_STATE_DIR       where the broker keeps its config, data, log and pid (default .cache/kafka/broker)
#   KAFKA_PORT            client port (default: a free one, kept across restarts); KAFKA_CONTROLLER_PORT likewise
#   KAFKA_HEAP_OPTS       JVM heap (default -Xms512m -Xmx1g)
#   PYTHON                the python with pyspark (default .venv/bin/python, else python3); the connector matches
#                         its pyspark, so another interpreter gets the jars for its Spark, in their own folder
#                         (bench/kafka_bench.py: PYTHON=.cache/venv-delta/bin/python for Delta on Spark 4.2)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
POMS="$ROOT/scripts/kafka"
CACHE="$ROOT/.cache/kafka"
JARS="$CACHE/jars"
KAFKA_VERSION="${KAFKA_VERSION:-4.3.1}"
STATE="${KAFKA_STATE_DIR:-$CACHE/broker}"
HOST=127.0.0.1
HEAP="${KAFKA_HEAP_OPTS:--Xms512m -Xmx1g}"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

log() { echo "kafka.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# --- fetching jars ---------------------------------------------------------------------------------------------

need_tools() {
    command -v java >/dev/null || die "no 'java' on PATH; Kafka 4.x needs Java 17+ (apt-get install openjdk-17-jre-headless)"
    command -v mvn >/dev/null && return 0
    if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
        die "no 'mvn' on PATH; install Maven (apt-get install maven)"
    fi
    log "installing Maven from apt"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q maven >&2
}

mvn_quiet() {
    # -B batch mode, -q errors only; stdin closed so a prompt can never hang a test run. Maven 3.8 still prints
    # colour resets in batch mode: strip them.
    mvn -B -q "$@" </dev/null 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
}

local_repo() {
    local repo
    repo=$(mvn_quiet help:evaluate -Dexpression=settings.localRepository -DforceStdout 2>/dev/null || true)
    [[ -d "$repo" ]] || repo="$HOME/.m2/repository"
    echo "$repo"
}

# Releases (x.y.z) of Spark's Kafka source and token provider that Maven Central lists, as "<artifact> <version>"
# lines: resolving version ranges makes Maven download each artifact's maven-metadata.xml.
SPARK_ARTIFACTS=(spark-sql-kafka-0-10_2.13 spark-token-provider-kafka-0-10_2.13)
listed_spark_versions() {
    local major=$1 repo artifact
    mvn_quiet -U -f "$POMS/probe-pom.xml" dependency:resolve "-Dprobe.range=[$major.0.0,$((major + 1)).0.0)" \
        >/dev/null 2>&1 || true
    repo=$(local_repo)
    for artifact in "${SPARK_ARTIFACTS[@]}"; do
        cat "$repo/org/apache/spark/$artifact"/maven-metadata-*.xml 2>/dev/null |
            grep -o '<version>[0-9]*\.[0-9]*\.[0-9]*</version>' | sed 's/<[^>]*>//g' | sort -u -V -r |
            sed "s/^/$artifact /"
    done
}

# Newest version in stdin (one a line) that is <= $1.
newest_up_to() {
    local limit=$1 v
    while read -r v; do
        if [[ "$(printf '%s\n%s\n' "$v" "$limit" | sort -V | tail -n 1)" == "$limit" ]]; then
            echo "$v"
            return 0
        fi
    done
    return 1
}

# The stamp of a jar folder: what was asked for and the pom it came from; a change re-fetches.
stamp_of() { echo "$1 $(sha256sum "$2" | cut -d' ' -f1)"; }

fetched() { [[ -f "$1/.complete" && "$(cat "$1/.complete")" == "$2" ]]; }

fetch_broker() {
    local dest="$JARS/broker-$KAFKA_VERSION" stamp tmp
    stamp=$(stamp_of "$KAFKA_VERSION" "$POMS/broker-pom.xml")
    fetched "$dest" "$stamp" && return 0
    need_tools
    log "fetching Kafka $KAFKA_VERSION broker jars into $dest"
    tmp="$dest.tmp.$$"
    rm -rf "$tmp"
    mvn_quiet -f "$POMS/broker-pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
        -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$tmp" >&2 ||
        { rm -rf "$tmp"; die "mvn could not fetch the Kafka $KAFKA_VERSION broker (set KAFKA_VERSION to another 4.x)"; }
    rm -rf "$dest"
    mv "$tmp" "$dest"
    echo "$stamp" >"$dest/.complete"
}

pyspark_info() {
    # "<version> <jars folder>" of the installed pyspark.
    "$PYTHON" -c 'import os, pyspark; print(pyspark.__version__, os.path.join(os.path.dirname(pyspark.__file__), "jars"))' \
        2>/dev/null || die "$PYTHON cannot import pyspark (run 'make install', or set PYTHON)"
}

spark_dir() {
    local version
    read -r version _ <<<"$(pyspark_info)"
    echo "$JARS/spark-kafka-${SPARK_KAFKA_VERSION:-$version}"
}

# Copy Spark's Kafka source CONNECTOR (token provider TOKEN) with its dependencies into $1, repository layout.
copy_spark_kafka() {
    mvn_quiet -f "$POMS/spark-kafka-pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
        -Dspark.kafka.version="$2" -Dspark.token.version="$3" -Dmdep.useRepositoryLayout=true -DoutputDirectory="$1" \
        >/dev/null 2>&1
}

fetch_spark() {
    local pyspark_version pyspark_jars want dest stamp tmp connector="" token="" listed candidate jar artifact
    read -r pyspark_version pyspark_jars <<<"$(pyspark_info)"
    want="${SPARK_KAFKA_VERSION:-$pyspark_version}"
    dest="$JARS/spark-kafka-$want"
    # "tokens-tried": folders chosen before older token providers were tried may hold a connector Spark cannot load.
    stamp=$(stamp_of "$want $pyspark_jars tokens-tried" "$POMS/spark-kafka-pom.xml")
    fetched "$dest" "$stamp" && return 0
    need_tools
    log "fetching Spark's Kafka source for pyspark $pyspark_version into $dest"
    tmp="$dest.tmp.$$"
    rm -rf "$tmp"
    if copy_spark_kafka "$tmp/all" "$want" "$want"; then
        connector=$want token=$want
    else
        # Not served (yet, or by this mirror): the newest release below it of the same major version, with the
        # newest token provider up to that which downloads (its API has been stable across 4.x). Maven Central lists
        # some token providers whose jars it does not serve (4.1.1 and 4.2.0 on 2026-11-22): without trying older
        # ones, the search fell through to connector 4.1.0, which Spark 4.3 cannot load (HDFSMetadataLog changed).
        listed=$(listed_spark_versions "${want%%.*}")
        for candidate in $(grep "^${SPARK_ARTIFACTS[0]} " <<<"$listed" | cut -d' ' -f2 | head -n 20); do
            [[ "$(newest_up_to "$want" <<<"$candidate")" == "$candidate" ]] || continue
            for token in $(grep "^${SPARK_ARTIFACTS[1]} " <<<"$listed" | cut -d' ' -f2 | head -n 20); do
                [[ "$(newest_up_to "$candidate" <<<"$token")" == "$token" ]] || continue
                rm -rf "$tmp"
                if copy_spark_kafka "$tmp/all" "$candidate" "$token"; then
                    connector=$candidate
                    break 2
                fi
            done
        done
        [[ -n "$connector" ]] || { rm -rf "$tmp"; die "Maven Central serves no spark-sql-kafka-0-10_2.13 up to $want"; }
        log "warning: Maven Central does not serve spark-sql-kafka-0-10_2.13 and spark-token-provider-kafka-0-10_2.13" \
            "$want together; using the connector $connector with the token provider $token"
    fi
    # Keep only what pyspark does not ship (pyspark/jars/<artifactId>-<version>.jar, any version).
    while IFS= read -r jar; do
        artifact=$(basename "$(dirname "$(dirname "$jar")")")
        compgen -G "$pyspark_jars/$artifact-[0-9]*.jar" >/dev/null || mv "$jar" "$tmp/"
    done < <(find "$tmp/all" -name '*.jar')
    rm -rf "$tmp/all"
    printf 'pyspark %s\nspark-sql-kafka-0-10_2.13 %s\nspark-token-provider-kafka-0-10_2.13 %s\n' \
        "$pyspark_version" "$connector" "$token" >"$tmp/VERSIONS"
    rm -rf "$dest"
    mv "$tmp" "$dest"
    echo "$stamp" >"$dest/.complete"
    local kept=("$dest"/*.jar)
    log "Spark Kafka source: ${#kept[@]} jars beyond pyspark's ($(tr '\n' ' ' <"$dest/VERSIONS"))"
}

# Serialize fetches (parallel test runs share .cache/kafka/jars).
with_fetch_lock() {
    mkdir -p "$JARS"
    (
        flock 8
        "$@"
    ) 8>"$JARS/.lock"
}

spark_jars() {
    with_fetch_lock fetch_spark
    local dir
    dir=$(spark_dir)
    local jars=("$dir"/*.jar)
    (IFS=,; echo "${jars[*]}")
}

# --- the broker --------------------------------------------------------------------------------------------------

PID_FILE="$STATE/broker.pid"
PORTS_FILE="$STATE/ports"
PROPS="$STATE/server.properties"
LOG="$STATE/broker.log"

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# PID of this state dir's broker when it is running, else nothing.
running_pid() {
    local pid
    pid=$(cat "$PID_FILE" 2>/dev/null || true)
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $PROPS" || return 1
    echo "$pid"
}

bootstrap() {
    local port
    port=$(cut -d' ' -f1 "$PORTS_FILE" 2>/dev/null || true)
    [[ -n "$port" ]] || die "no broker has been started in $STATE"
    echo "$HOST:$port"
}

write_config() {
    local port=$1 controller=$2
    cat >"$PROPS" <<EOF
# Written by scripts/kafka.sh: single-node KRaft (broker and controller in one process) on $HOST.
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://$HOST:$port,CONTROLLER://$HOST:$controller
advertised.listeners=PLAINTEXT://$HOST:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
controller.quorum.bootstrap.servers=$HOST:$controller
log.dirs=$STATE/data
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
EOF
    cat >"$STATE/log4j2.properties" <<EOF
# Written by scripts/kafka.sh: everything at INFO into broker.log.
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $LOG
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
EOF
}

# Sets JAVA: the JVM command line for a broker class of this state dir.
set_java() {
    local heap
    read -r -a heap <<<"$HEAP"
    JAVA=(java "${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
        "-Dlog4j2.configurationFile=$STATE/log4j2.properties" "-Dkafka.logs.dir=$STATE"
        -cp "$JARS/broker-$KAFKA_VERSION/*")
}

start() {
    local pid port controller old
    if pid=$(running_pid); then
        bootstrap
        return 0
    fi
    with_fetch_lock fetch_broker
    command -v java >/dev/null || die "no 'java' on PATH; Kafka 4.x needs Java 17+"
    old=$(cat "$PORTS_FILE" 2>/dev/null || true)
    port="${KAFKA_PORT:-$(cut -s -d' ' -f1 <<<"$old")}"
    controller="${KAFKA_CONTROLLER_PORT:-$(cut -s -d' ' -f2 <<<"$old")}"
    if [[ -z "${KAFKA_PORT:-}" && -n "$port" ]] && port_open "$port"; then port=""; fi
    if [[ -z "${KAFKA_CONTROLLER_PORT:-}" && -n "$controller" ]] && port_open "$controller"; then controller=""; fi
    [[ -n "$port" ]] || port=$(free_port)
    [[ -n "$controller" ]] || controller=$(free_port)
    [[ "$port" != "$controller" ]] || controller=$(free_port)
    if [[ "$port $controller" != "$old" && -d "$STATE/data" ]]; then
        # The controller's address is part of the formatted metadata (format --standalone).
        log "ports changed from '$old' to '$port $controller': starting with empty storage"
        rm -rf "$STATE/data"
    fi
    echo "$port $controller" >"$PORTS_FILE"
    write_config "$port" "$controller"
    set_java
    if [[ ! -f "$STATE/data/meta.properties" ]]; then
        rm -rf "$STATE/data"
        local cluster
        # A cluster id as `StorageTool random-uuid` makes it (base64url of 16 random bytes), without a second JVM; like
        # Kafka's Uuid.randomUuid, never one starting with "-", which the formatter's argument parser takes for an
        # option (1 start in 64 failed with "argument --cluster-id/-t: expected one argument").
        cluster=$("$PYTHON" -c 'import base64, uuid
while (c := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"): pass
print(c)')
        "${JAVA[@]}" kafka.tools.StorageTool format --standalone -t "$cluster" -c "$PROPS" >>"$STATE/format.log" 2>&1 ||
            { tail -n 20 "$STATE/format.log" >&2; die "could not format $STATE/data"; }
    fi
    log "starting Kafka $KAFKA_VERSION on $HOST:$port (controller $controller; log: $LOG)"
    : >"$LOG"
    # Own session: the broker outlives this script and is not killed with the caller's process group.
    setsid nohup "${JAVA[@]}" kafka.Kafka "$PROPS" >"$STATE/stdout.log" 2>&1 </dev/null 9>&- &
    echo $! >"$PID_FILE"
    for _ in $(seq 1 240); do
        if ! running_pid >/dev/null; then
            tail -n 30 "$LOG" "$STATE/stdout.log" >&2 || true
            die "the broker exited during start-up (port taken? set KAFKA_PORT)"
        fi
        if port_open "$port" && grep -q "Kafka Server started" "$LOG" 2>/dev/null; then
            bootstrap
            return 0
        fi
        sleep 0.25
    done
    tail -n 30 "$LOG" >&2 || true
    stop
    die "the broker did not start within 60 s"
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
        echo "running: $(bootstrap) (pid $(cat "$PID_FILE"), state: $STATE)"
    else
        echo "not running (state: $STATE)"
        return 3
    fi
}

cmd="${1:-}"
case "$cmd" in
    fetch)
        case "${2:-all}" in
            broker) with_fetch_lock fetch_broker ;;
            spark) with_fetch_lock fetch_spark ;;
            all) with_fetch_lock fetch_broker && with_fetch_lock fetch_spark ;;
            *) echo "usage: $0 fetch [broker|spark]" >&2; exit 2 ;;
        esac
        ;;
    spark-jars) spark_jars ;;
    bootstrap) bootstrap ;;
    start|stop|status)
        mkdir -p "$STATE"
        # Serialize start/stop of one state dir.
        exec 9>"$STATE/.lock"
        flock 9
        "$cmd"
        ;;
    *) echo "usage: $0 {fetch [broker|spark]|start|stop|status|bootstrap|spark-jars}" >&2; exit 2 ;;
esac
