#!/usr/bin/env bash
# A single-node Apache Kafka broker (KRaft mode) on 127.0.0.1, from Maven Central's jars.
#
#   deploy/local/kafka.sh start              fetch (cached), format, start; prints the bootstrap
#                                            address on its last line
#   deploy/local/kafka.sh stop [--keep-data] stop the broker this script started; --keep-data
#                                            keeps its ports and data so `start` resumes it
#   deploy/local/kafka.sh status             prints the bootstrap address if it is running
#
# KAFKA_VERSION picks the release (default below); GPUFRAG_KAFKA_DIR the run directory (data,
# logs, pid); GPUFRAG_CACHE_DIR where the jars are cached between runs.
set -euo pipefail

KAFKA_VERSION=${KAFKA_VERSION:-4.1.1}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${GPUFRAG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufrag}/kafka-$KAFKA_VERSION
RUN=${GPUFRAG_KAFKA_DIR:-${TMPDIR:-/tmp}/gpufrag-kafka-$(id -u)}
LIBS="$CACHE/libs"

die() { echo "kafka.sh: $*" >&2; exit 1; }

fetch() {
  [ -f "$CACHE/.complete" ] && return 0
  command -v mvn >/dev/null || die "Maven (mvn) is needed to fetch Kafka's jars"
  command -v java >/dev/null || die "Java 17+ is needed to run the broker"
  echo "kafka.sh: fetching Apache Kafka $KAFKA_VERSION jars into $LIBS" >&2
  rm -rf "$LIBS"
  mvn -q -B -f "$HERE/kafka-pom.xml" -Dkafka.version="$KAFKA_VERSION" \
    dependency:copy-dependencies -DoutputDirectory="$LIBS" -DincludeScope=runtime >&2 \
    || die "could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION from Maven Central"
  touch "$CACHE/.complete"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

port_open() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(0.5)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
s.close()
PY
}

running() { [ -f "$RUN/kafka.pid" ] && kill -0 "$(cat "$RUN/kafka.pid")" 2>/dev/null; }

write_config() {
  local port=$1 cport=$2
  cat > "$RUN/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$RUN/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.retention.hours=24
log.segment.bytes=16777216
PROPS
  cat > "$RUN/log4j2.properties" <<LOG
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $RUN/logs/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
LOG
}

start() {
  if running; then cat "$RUN/bootstrap"; return 0; fi
  fetch
  mkdir -p "$RUN/logs"
  local port cport
  if [ -f "$RUN/ports" ] && [ -d "$RUN/data" ]; then
    read -r port cport < "$RUN/ports"            # resume: same address, same data
  else
    rm -rf "$RUN/data"
    port=$(free_port); cport=$(free_port)
    echo "$port $cport" > "$RUN/ports"
    write_config "$port" "$cport"
    local cluster_id
    cluster_id=$(java -cp "$LIBS/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
    java -cp "$LIBS/*" -Dlog4j2.configurationFile="$RUN/log4j2.properties" \
      kafka.tools.StorageTool format -t "$cluster_id" -c "$RUN/server.properties" \
      >"$RUN/logs/format.log" 2>&1 || { cat "$RUN/logs/format.log" >&2; die "formatting storage failed"; }
  fi
  setsid nohup java -Xms256m -Xmx768m -XX:+UseG1GC \
    -Dlog4j2.configurationFile="$RUN/log4j2.properties" \
    -cp "$LIBS/*" kafka.Kafka "$RUN/server.properties" >"$RUN/logs/stdout.log" 2>&1 &
  echo $! > "$RUN/kafka.pid"
  for _ in $(seq 1 240); do
    if ! running; then
      tail -n 40 "$RUN/logs/stdout.log" "$RUN/logs/server.log" >&2 2>/dev/null || true
      die "the broker exited during start (logs in $RUN/logs)"
    fi
    if port_open "$port"; then
      echo "127.0.0.1:$port" > "$RUN/bootstrap"
      echo "127.0.0.1:$port"
      return 0
    fi
    sleep 0.25
  done
  stop
  die "the broker did not accept connections within 60 s (logs in $RUN/logs)"
}

stop() {
  local keep=${1:-}
  if [ -f "$RUN/kafka.pid" ]; then
    local pid
    pid=$(cat "$RUN/kafka.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$RUN/kafka.pid" "$RUN/bootstrap"
  fi
  if [ "$keep" != "--keep-data" ]; then rm -rf "$RUN"; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  status) if running; then cat "$RUN/bootstrap"; else echo "not running" >&2; exit 1; fi ;;
  *) echo "usage: $0 start | stop [--keep-data] | status" >&2; exit 2 ;;
esac
