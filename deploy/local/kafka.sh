#!/usr/bin/env bash
# A single-node Apache Kafka broker (KRaft mode) on 127.0.0.1, from Maven Central's jars.
#
#   deploy/local/kafka.sh start [--secure]   fetch (cached), format, start; prints the bootstrap
#                                            address (the plaintext listener) on its last line
#   deploy/local/kafka.sh stop [--keep-data] stop the broker this script started; --keep-data
#                                            keeps its ports and data so `start` resumes it
#   deploy/local/kafka.sh status             prints the bootstrap address if it is running
#
# --secure adds two listeners beside the plaintext one, with a throwaway CA and a server
# certificate for 127.0.0.1 and localhost made here by openssl: SASL_SSL (SCRAM-SHA-512,
# SCRAM-SHA-256 and PLAIN, one user with a random password) and SSL requiring a client
# certificate (mTLS). Their addresses, the CA, the client certificate and the user are written
# to $GPUFRAG_KAFKA_DIR/security.env (KEY=value lines) and named on stderr. A resumed broker
# (stop --keep-data, start) keeps the listeners it was formatted with.
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

# One line on stderr naming the secure listeners, when the broker has them.
secure_note() {
  [ -f "$RUN/security.env" ] || return 0
  local sasl ssl
  sasl=$(sed -n 's/^SASL_SSL=//p' "$RUN/security.env")
  ssl=$(sed -n 's/^SSL=//p' "$RUN/security.env")
  echo "kafka.sh: SASL_SSL at $sasl, SSL (client certificate required) at $ssl, CA $RUN/tls/ca.pem; all in $RUN/security.env" >&2
}

running() { [ -f "$RUN/kafka.pid" ] && kill -0 "$(cat "$RUN/kafka.pid")" 2>/dev/null; }

# A throwaway CA, the broker's certificate (127.0.0.1, localhost) and a client certificate for
# the SSL listener, all in $RUN/tls; keys are unencrypted PKCS#8, which Kafka's PEM stores take.
make_certs() {
  local tls="$RUN/tls" days=30
  mkdir -p "$tls" && chmod 700 "$tls"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  openssl req -x509 "${ec[@]}" -keyout "$tls/ca.key" -out "$tls/ca.pem" -days "$days" \
    -subj "/CN=gpufrag test CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  local name
  for name in server client; do
    openssl req "${ec[@]}" -keyout "$tls/$name.key" -out "$tls/$name.csr" \
      -subj "/CN=gpufrag test $name" 2>/dev/null
  done
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$tls/server.ext"
  printf 'extendedKeyUsage=clientAuth\n' > "$tls/client.ext"
  for name in server client; do
    openssl x509 -req -in "$tls/$name.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
      -CAcreateserial -days "$days" -extfile "$tls/$name.ext" -out "$tls/$name.pem" 2>/dev/null
  done
  cat "$tls/server.key" "$tls/server.pem" > "$tls/server-keystore.pem"
  rm -f "$tls"/*.csr "$tls"/*.ext "$tls/ca.key"
}

# The secure listeners' settings, and the file that tells clients how to reach them.
secure_config() {
  local port=$1 sport=$2 tport=$3 user=$4 password=$5
  cat <<PROPS
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$user="$password";
ssl.keystore.type=PEM
ssl.keystore.location=$RUN/tls/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$RUN/tls/ca.pem
listener.name.ssl.ssl.client.auth=required
PROPS
  cat > "$RUN/security.env" <<ENV
PLAINTEXT=127.0.0.1:$port
SASL_SSL=127.0.0.1:$sport
SSL=127.0.0.1:$tport
CA_FILE=$RUN/tls/ca.pem
CLIENT_CERT_FILE=$RUN/tls/client.pem
CLIENT_KEY_FILE=$RUN/tls/client.key
USERNAME=$user
PASSWORD=$password
MECHANISMS=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN
ENV
  chmod 600 "$RUN/security.env"
}

write_config() {
  local port=$1 cport=$2 sport=${3:-} tport=${4:-} user=${5:-} password=${6:-}
  local listeners="PLAINTEXT://127.0.0.1:$port"
  local map="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  if [ -n "$sport" ]; then
    listeners="$listeners,SASL_SSL://127.0.0.1:$sport,SSL://127.0.0.1:$tport"
    map="$map,SASL_SSL:SASL_SSL,SSL:SSL"
  fi
  cat > "$RUN/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=$listeners,CONTROLLER://127.0.0.1:$cport
advertised.listeners=$listeners
listener.security.protocol.map=$map
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
  if [ -n "$sport" ]; then
    secure_config "$port" "$sport" "$tport" "$user" "$password" >> "$RUN/server.properties"
  fi
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
  local secure=${1:-}
  case "$secure" in ""|--secure) ;; *) die "unknown option $secure (start takes --secure)" ;; esac
  if running; then secure_note; cat "$RUN/bootstrap"; return 0; fi
  fetch
  mkdir -p "$RUN/logs"
  local port cport sport="" tport=""
  if [ -f "$RUN/ports" ] && [ -d "$RUN/data" ]; then
    read -r port cport sport tport < "$RUN/ports"  # resume: same address, same data
  else
    rm -rf "$RUN/data" "$RUN/tls" "$RUN/security.env"
    port=$(free_port); cport=$(free_port)
    local user="" password="" scram=()
    if [ -n "$secure" ]; then
      command -v openssl >/dev/null || die "openssl is needed for --secure"
      sport=$(free_port); tport=$(free_port)
      user=gpufrag; password=$(openssl rand -hex 16)
      make_certs
      scram=(--add-scram "SCRAM-SHA-512=[name=$user,password=$password]"
             --add-scram "SCRAM-SHA-256=[name=$user,password=$password]")
    fi
    echo "$port $cport $sport $tport" > "$RUN/ports"
    write_config "$port" "$cport" "$sport" "$tport" "$user" "$password"
    local cluster_id
    cluster_id=$(java -cp "$LIBS/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
    java -cp "$LIBS/*" -Dlog4j2.configurationFile="$RUN/log4j2.properties" \
      kafka.tools.StorageTool format -t "$cluster_id" -c "$RUN/server.properties" "${scram[@]}" \
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
    if port_open "$port" && { [ -z "$sport" ] || { port_open "$sport" && port_open "$tport"; }; }; then
      echo "127.0.0.1:$port" > "$RUN/bootstrap"
      secure_note
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
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  status) if running; then cat "$RUN/bootstrap"; else echo "not running" >&2; exit 1; fi ;;
  *) echo "usage: $0 start [--secure] | stop [--keep-data] | status" >&2; exit 2 ;;
esac
