#!/usr/bin/env bash
# A real kube-apiserver with an etcd behind it, on 127.0.0.1, both built from the Go module proxy.
#
#   deploy/local/apiserver.sh start              build (cached), start etcd and kube-apiserver, wait
#                                                for /readyz; prints on its last line the server URL
#                                                and the path of a file holding a bearer token:
#                                                  https://127.0.0.1:PORT /path/to/token
#   deploy/local/apiserver.sh stop [--keep-data] stop both; --keep-data keeps ports, keys, token
#                                                and etcd's data so `start` resumes them
#   deploy/local/apiserver.sh status             prints that line again if both are running
#   deploy/local/apiserver.sh build              only build (or find cached) the two binaries
#   deploy/local/apiserver.sh controllers [LIST] start kube-controller-manager against the running
#                                                server with controllers LIST (default
#                                                $GPUFRAG_APISERVER_CONTROLLERS, else
#                                                job,resourcequota), built first if not cached;
#                                                restarted if it runs with another LIST
#   deploy/local/apiserver.sh build-controllers  only build (or find cached) kube-controller-manager
#   deploy/local/apiserver.sh build-scheduler    only build (or find cached) kube-scheduler (started
#                                                by deploy/local/scheduler.sh)
#
# GPUFRAG_APISERVER_CONTROLLERS=job,resourcequota makes `start` start kube-controller-manager too.
# It runs those controllers (--controllers), --leader-elect=false, with a kubeconfig naming the
# admin token's file ($RUN/controller-manager.kubeconfig), and serves /healthz on a loopback port
# of its own (the fourth in `ports`). deploy/local/controller-manager/ is its Go module (main is
# k8s.io/kubernetes's cmd/kube-controller-manager; go.mod is the apiserver's plus what `go mod
# tidy` added), built and cached like the others: with the Go build cache warm from kube-apiserver
# the build took 159 s on 2 cores (-p=2, nice 19), compiling the controllers' own packages.
#
# deploy/local/apiserver/ is a Go module whose main is k8s.io/kubernetes's cmd/kube-apiserver (its
# go.mod replaces the staging k8s.io/* modules by their published versions) and deploy/local/etcd/
# one whose main is go.etcd.io/etcd/server/v3's etcdmain; the versions are the ones their go.mod
# files pin. The binaries are cached under GPUFRAG_CACHE_DIR (default ~/.cache/gpufrag)/apiserver,
# keyed by a hash of those modules' files and of `go version`; a cold build takes several minutes
# (it is run under `nice -n 19`; GOFLAGS defaults to -p=2).
#
# The token's user is in system:masters. Authorization is RBAC (GPUFRAG_APISERVER_AUTHZ=AlwaysAllow
# to change it); anonymous requests are refused. The serving certificate is self-signed by
# kube-apiserver into $RUN/certs (apiserver.crt holds it followed by its CA). No controller-manager
# or scheduler runs unless asked for (above): pods stay Pending, a deleted namespace stays
# Terminating, and the ServiceAccount admission plugin is off (nothing creates a namespace's
# "default" service account).
#
# Pods are served without the watch cache (GPUFRAG_APISERVER_WATCH_CACHE_SIZES, default pods#0, is
# passed as --watch-cache-sizes; set it empty to cache every resource): a pod watch then reads
# etcd's own history, so compacting etcd (the watcher tests do, through etcd's HTTP gateway) makes
# a watch from an older resourceVersion answer 410 Gone at once, where the cache would take an API
# server restart or minutes of churn. Other resources (nodes, ...) go through the watch cache.
#
# GPUFRAG_APISERVER_DIR picks the run directory (data, logs, pids, keys, token; `ports` holds the
# etcd client, etcd peer and kube-apiserver ports, in that order).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${GPUFRAG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufrag}/apiserver
RUN=${GPUFRAG_APISERVER_DIR:-${TMPDIR:-/tmp}/gpufrag-apiserver-$(id -u)}
AUTHZ=${GPUFRAG_APISERVER_AUTHZ:-RBAC}

die() { echo "apiserver.sh: $*" >&2; exit 1; }

# The version a module's go.mod requires of $2.
required_version() {
  awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$1/go.mod"
}

# Builds module directory $1 into $CACHE/<name>-<version>-<hash>/<name> unless it is there already;
# prints the binary's path. $3... are extra -ldflags.
build() {
  local dir=$1 name=$2; shift 2
  local version hash out
  command -v go >/dev/null || die "Go is needed to build $name (none found on PATH)"
  case $name in
    kube-apiserver|kube-controller-manager|kube-scheduler) version=$(required_version "$dir" k8s.io/kubernetes) ;;
    etcd) version=$(required_version "$dir" go.etcd.io/etcd/server/v3) ;;
  esac
  hash=$( { cat "$dir/go.mod" "$dir/go.sum" "$dir/main.go"; go version; echo "$*"; } \
          | sha256sum | cut -c1-12)
  out="$CACHE/$name-$version-$hash"
  if [ ! -x "$out/$name" ]; then
    echo "apiserver.sh: building $name $version from the Go module proxy into $out" \
         "(a cold build takes minutes)" >&2
    mkdir -p "$out"
    local start=$SECONDS
    ( cd "$dir" && CGO_ENABLED=0 GOFLAGS=${GOFLAGS:--p=2} nice -n 19 \
        go build -trimpath -ldflags "-s -w $*" -o "$out/$name.tmp.$$" . ) >&2 \
      || { rm -f "$out/$name.tmp.$$"; die "building $name failed"; }
    mv -f "$out/$name.tmp.$$" "$out/$name"
    echo "apiserver.sh: built $name in $((SECONDS - start)) s" >&2
  fi
  echo "$out/$name"
}

# The -ldflags that stamp a k8s.io/kubernetes binary of module $1 with its version.
version_flags() {
  local kv major minor pkg=k8s.io/component-base/version
  kv=$(required_version "$1" k8s.io/kubernetes)
  major=${kv#v}; major=${major%%.*}
  minor=${kv#v*.}; minor=${minor%%.*}
  echo "-X $pkg.gitVersion=$kv -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
}

build_all() {
  APISERVER_BIN=$(build "$HERE/apiserver" kube-apiserver "$(version_flags "$HERE/apiserver")")
  ETCD_BIN=$(build "$HERE/etcd" etcd)
}

build_scheduler() {
  SCHEDULER_BIN=$(build "$HERE/scheduler" kube-scheduler "$(version_flags "$HERE/scheduler")")
}

build_controllers() {
  CONTROLLERS_BIN=$(build "$HERE/controller-manager" kube-controller-manager \
    "$(version_flags "$HERE/controller-manager")")
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
running() { alive etcd && alive apiserver && [ -f "$RUN/address" ]; }

# Token, token file and service-account key pair: made once per run directory.
credentials() {
  [ -f "$RUN/token" ] && [ -f "$RUN/sa.key" ] && [ -f "$RUN/sa.pub" ] && return 0
  command -v openssl >/dev/null || die "openssl is needed to make the service-account key pair"
  local token
  token=$(openssl rand -hex 32)
  ( umask 077
    printf '%s\n' "$token" > "$RUN/token"
    printf '%s,gpufrag-admin,gpufrag-admin,"system:masters"\n' "$token" > "$RUN/tokens.csv"
    openssl genrsa -out "$RUN/sa.key" 2048 2>/dev/null )
  openssl rsa -in "$RUN/sa.key" -pubout -out "$RUN/sa.pub" 2>/dev/null
}

# Waits up to $2 seconds for $1 (a command) to succeed while the process named $3 stays alive; on
# failure stops what was started (only the controller-manager, when it is the one waited for: the
# server may serve others).
wait_for() {
  local check=$1 limit=$2 what=$3 deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    if ! alive "$what"; then
      tail -n 40 "$RUN/logs/$what.log" >&2 2>/dev/null || true
      give_up "$what"; die "$what exited during start (logs in $RUN/logs)"
    fi
    if $check; then return 0; fi
    sleep 0.2
  done
  tail -n 40 "$RUN/logs/$what.log" >&2 2>/dev/null || true
  give_up "$what"; die "$what was not ready within $limit s (logs in $RUN/logs)"
}

give_up() {
  if [ "$1" = controller-manager ]; then stop_one controller-manager; else stop --keep-data; fi
}

etcd_healthy() { curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }
apiserver_ready() {
  [ "$(curl -sS --max-time 2 --cacert "$RUN/certs/apiserver.crt" \
        -H "Authorization: Bearer $(cat "$RUN/token")" \
        "https://127.0.0.1:$API_PORT/readyz" 2>/dev/null)" = ok ]
}

start() {
  if running; then
    if [ -n "${GPUFRAG_APISERVER_CONTROLLERS:-}" ]; then controllers; fi
    cat "$RUN/address"; return 0
  fi
  stop --keep-data                       # a half-started pair from before
  command -v curl >/dev/null || die "curl is needed to wait for readiness"
  build_all
  mkdir -p "$RUN/logs" "$RUN/certs"
  if [ -f "$RUN/ports" ] && [ -d "$RUN/etcd" ]; then
    read -r ETCD_PORT PEER_PORT API_PORT _ < "$RUN/ports"   # resume: same address, same data
  else
    rm -rf "$RUN/etcd"
    ETCD_PORT=$(free_port); PEER_PORT=$(free_port); API_PORT=$(free_port)
    echo "$ETCD_PORT $PEER_PORT $API_PORT" > "$RUN/ports"
  fi
  credentials
  local t0=$SECONDS

  setsid nohup "$ETCD_BIN" --name gpufrag --data-dir "$RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
    --initial-cluster "gpufrag=http://127.0.0.1:$PEER_PORT" \
    --unsafe-no-fsync --log-level warn \
    >"$RUN/logs/etcd.log" 2>&1 < /dev/null &
  echo $! > "$RUN/etcd.pid"
  wait_for etcd_healthy 60 etcd

  setsid nohup "$APISERVER_BIN" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --endpoint-reconciler-type none \
    --cert-dir "$RUN/certs" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --token-auth-file "$RUN/tokens.csv" --anonymous-auth=false \
    --authorization-mode "$AUTHZ" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$RUN/sa.pub" \
    --service-account-signing-key-file "$RUN/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 \
    --disable-admission-plugins ServiceAccount \
    --allow-privileged --profiling=false \
    --watch-cache-sizes "${GPUFRAG_APISERVER_WATCH_CACHE_SIZES-pods#0}" \
    >"$RUN/logs/apiserver.log" 2>&1 < /dev/null &
  echo $! > "$RUN/apiserver.pid"
  wait_for apiserver_ready 120 apiserver

  echo "https://127.0.0.1:$API_PORT $RUN/token" > "$RUN/address"
  echo "apiserver.sh: etcd and kube-apiserver ready in $((SECONDS - t0)) s;" \
       "CA bundle $RUN/certs/apiserver.crt" >&2
  if [ -n "${GPUFRAG_APISERVER_CONTROLLERS:-}" ]; then controllers; fi
  cat "$RUN/address"
}

controllers_healthy() {
  curl -fsS --max-time 2 --cacert "$RUN/controller-manager-certs/kube-controller-manager.crt" \
    "https://127.0.0.1:$CM_PORT/healthz" 2>/dev/null | grep -qx ok
}

# kube-controller-manager with controllers $1, against the running kube-apiserver.
controllers() {
  local list=${1:-${GPUFRAG_APISERVER_CONTROLLERS:-job,resourcequota}}
  running || die "kube-apiserver is not running (start it first)"
  if alive controller-manager && [ "$(cat "$RUN/controllers" 2>/dev/null)" = "$list" ]; then
    return 0
  fi
  stop_one controller-manager
  build_controllers
  local url kc="$RUN/controller-manager.kubeconfig"
  read -r url _ < "$RUN/address"
  # the token by its file: the kubeconfig holds no secret of its own
  printf '%s\n' \
    "apiVersion: v1" "kind: Config" \
    "clusters: [{name: local, cluster: {server: \"$url\", certificate-authority: \"$RUN/certs/apiserver.crt\"}}]" \
    "users: [{name: gpufrag-admin, user: {tokenFile: \"$RUN/token\"}}]" \
    "contexts: [{name: local, context: {cluster: local, user: gpufrag-admin}}]" \
    "current-context: local" > "$kc"
  CM_PORT=$(awk '{ print $4 }' "$RUN/ports")
  if [ -z "$CM_PORT" ]; then
    CM_PORT=$(free_port)
    echo "$(cat "$RUN/ports") $CM_PORT" > "$RUN/ports.new" && mv -f "$RUN/ports.new" "$RUN/ports"
  fi
  mkdir -p "$RUN/logs"
  # its serving certificate is self-signed into controller-manager-certs, like the API server's
  setsid nohup "$CONTROLLERS_BIN" --kubeconfig "$kc" \
    --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --leader-elect=false --controllers "$list" \
    --bind-address 127.0.0.1 --secure-port "$CM_PORT" \
    --cert-dir "$RUN/controller-manager-certs" --profiling=false \
    >"$RUN/logs/controller-manager.log" 2>&1 < /dev/null &
  echo $! > "$RUN/controller-manager.pid"
  echo "$list" > "$RUN/controllers"
  wait_for controllers_healthy 60 controller-manager
  echo "apiserver.sh: kube-controller-manager running controllers $list" >&2
}

stop_one() {
  local name=$1 pid
  [ -f "$RUN/$name.pid" ] || return 0
  pid=$(cat "$RUN/$name.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$RUN/$name.pid"
}

stop() {
  local keep=${1:-}
  stop_one scheduler                     # deploy/local/scheduler.sh's, if it runs against this server
  stop_one controller-manager
  rm -f "$RUN/controllers"
  stop_one apiserver
  stop_one etcd
  rm -f "$RUN/address"
  if [ "$keep" != "--keep-data" ]; then rm -rf "$RUN"; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  status) if running; then cat "$RUN/address"; else echo "not running" >&2; exit 1; fi ;;
  build) build_all; echo "$APISERVER_BIN"; echo "$ETCD_BIN" ;;
  controllers) controllers "${2:-}" ;;
  build-controllers) build_controllers; echo "$CONTROLLERS_BIN" ;;
  build-scheduler) build_scheduler; echo "$SCHEDULER_BIN" ;;
  *) echo "usage: $0 start | stop [--keep-data] | status | build | controllers [LIST]" \
       "| build-controllers | build-scheduler" >&2; exit 2 ;;
esac
