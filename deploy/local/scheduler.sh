#!/usr/bin/env bash
# A real kube-scheduler against deploy/local/apiserver.sh's kube-apiserver, built from the same
# k8s.io/kubernetes version (deploy/local/scheduler/ is its Go module; apiserver.sh builds and caches
# it beside the apiserver, with the same Go build cache: about 40 s once kube-apiserver is built).
#
#   deploy/local/scheduler.sh start [URL]  start kube-scheduler (built first if not cached) with a
#                                          KubeSchedulerConfiguration that names gpufrag's extender
#                                          at URL (e.g. http://127.0.0.1:8099/), or none without
#                                          URL; restarted if it runs with another configuration.
#                                          Waits for /readyz; prints the configuration file's path
#   deploy/local/scheduler.sh stop         stop it (apiserver.sh stop stops it too)
#   deploy/local/scheduler.sh status       prints the configuration file's path if it runs
#   deploy/local/scheduler.sh build        only build (or find cached) kube-scheduler
#
# The extender entry is the one deploy/README.md recommends: filter, prioritize, preempt and bind
# verbs, nodeCacheCapable (node names, not whole Node objects, in each request), ignorable
# (scheduling goes on without the extender when it is down or slow), httpTimeout
# GPUFRAG_SCHEDULER_TIMEOUT (default 5s) and weight GPUFRAG_SCHEDULER_WEIGHT (default 100: the
# extender's 0-10 score counts score x weight x 10, so one step of it, 1,000, outweighs what the
# default plugins' scores vary by between nodes, about 200: least allocated and balanced
# allocation, 0-100 each).
# GPUFRAG_SCHEDULER_PRIORITIZE=0 leaves prioritize out (the scheduler's default scoring decides;
# the extender still filters and binds). Every pod goes to the extender, CPU-only ones included
# (FGD keeps them off the CPU a GPU node's cards need); GPUFRAG_SCHEDULER_MANAGED names the
# resources that make a pod go there instead (managedResources). HAMi's per-card resources,
# which no node advertises, are left out of the in-tree fit check (NodeResourcesFit's
# ignoredResources): GPUFRAG_SCHEDULER_IGNORED, default nvidia.com/gpucores nvidia.com/gpumem
# nvidia.com/gpumem-percentage.
#
# It runs with leader election off and the apiserver's admin token (system:masters: no RBAC to set
# up), serves /readyz on a loopback port of its own, and logs to $RUN/logs/scheduler.log, $RUN
# being apiserver.sh's run directory (GPUFRAG_APISERVER_DIR).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN=${GPUFRAG_APISERVER_DIR:-${TMPDIR:-/tmp}/gpufrag-apiserver-$(id -u)}
CONFIG="$RUN/scheduler-config.yaml"
IGNORED="nvidia.com/gpucores nvidia.com/gpumem nvidia.com/gpumem-percentage"

die() { echo "scheduler.sh: $*" >&2; exit 1; }

alive() { [ -f "$RUN/scheduler.pid" ] && kill -0 "$(cat "$RUN/scheduler.pid")" 2>/dev/null; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

stop() {
  [ -f "$RUN/scheduler.pid" ] || return 0
  local pid
  pid=$(cat "$RUN/scheduler.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$RUN/scheduler.pid"
}

# The configuration for extender URL $1 (empty: none) on stdout.
config() {
  local url=$1 kc=$2
  printf '%s\n' \
    "apiVersion: kubescheduler.config.k8s.io/v1" \
    "kind: KubeSchedulerConfiguration" \
    "clientConnection:" \
    "  kubeconfig: \"$kc\"" \
    "leaderElection:" \
    "  leaderElect: false"
  [ -n "$url" ] || return 0
  printf '%s\n' \
    "extenders:" \
    "- urlPrefix: \"$url\"" \
    "  filterVerb: filter" \
    "  preemptVerb: preempt" \
    "  bindVerb: bind" \
    "  httpTimeout: ${GPUFRAG_SCHEDULER_TIMEOUT:-5s}" \
    "  nodeCacheCapable: true" \
    "  ignorable: true"
  if [ "${GPUFRAG_SCHEDULER_PRIORITIZE:-1}" != 0 ]; then
    printf '%s\n' "  prioritizeVerb: prioritize" "  weight: ${GPUFRAG_SCHEDULER_WEIGHT:-100}"
  fi
  local name
  if [ -n "${GPUFRAG_SCHEDULER_MANAGED:-}" ]; then
    printf '%s\n' "  managedResources:"
    for name in $GPUFRAG_SCHEDULER_MANAGED; do printf '%s\n' "  - name: $name"; done
  fi
  if [ -n "${GPUFRAG_SCHEDULER_IGNORED-$IGNORED}" ]; then
    # no node advertises HAMi's per-card resources: the in-tree fit check must not count them
    printf '%s\n' "profiles:" "- schedulerName: default-scheduler" "  pluginConfig:" \
      "  - name: NodeResourcesFit" "    args:" "      ignoredResources:"
    for name in ${GPUFRAG_SCHEDULER_IGNORED-$IGNORED}; do printf '%s\n' "      - $name"; done
  fi
}

ready() {
  [ "$(curl -sSk --max-time 2 "https://127.0.0.1:$PORT/readyz" 2>/dev/null)" = ok ]
}

start() {
  local url=${1:-} bin api kc="$RUN/scheduler.kubeconfig" wanted deadline
  command -v curl >/dev/null || die "curl is needed to wait for readiness"
  [ -f "$RUN/address" ] || die "kube-apiserver is not running (deploy/local/apiserver.sh start)"
  read -r api _ < "$RUN/address"
  wanted=$(config "$url" "$kc")
  if alive && [ "$(cat "$CONFIG" 2>/dev/null)" = "$wanted" ]; then echo "$CONFIG"; return 0; fi
  stop
  bin=$(bash "$HERE/apiserver.sh" build-scheduler | tail -n 1)
  printf '%s\n' \
    "apiVersion: v1" "kind: Config" \
    "clusters: [{name: local, cluster: {server: \"$api\", certificate-authority: \"$RUN/certs/apiserver.crt\"}}]" \
    "users: [{name: gpufrag-admin, user: {tokenFile: \"$RUN/token\"}}]" \
    "contexts: [{name: local, context: {cluster: local, user: gpufrag-admin}}]" \
    "current-context: local" > "$kc"
  printf '%s\n' "$wanted" > "$CONFIG"
  PORT=$(free_port)
  mkdir -p "$RUN/logs"
  # with --config the kubeconfig comes from clientConnection (the --kubeconfig flag is ignored)
  setsid nohup "$bin" --config "$CONFIG" \
    --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --bind-address 127.0.0.1 --secure-port "$PORT" \
    >"$RUN/logs/scheduler.log" 2>&1 < /dev/null &
  echo $! > "$RUN/scheduler.pid"
  deadline=$((SECONDS + 90))
  until ready; do
    if ! alive; then
      tail -n 40 "$RUN/logs/scheduler.log" >&2 || true
      stop; die "kube-scheduler exited during start (log $RUN/logs/scheduler.log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 40 "$RUN/logs/scheduler.log" >&2 || true
      stop; die "kube-scheduler was not ready within 90 s (log $RUN/logs/scheduler.log)"
    fi
    sleep 0.2
  done
  echo "scheduler.sh: kube-scheduler ready on 127.0.0.1:$PORT" \
       "(extender: ${url:-none})" >&2
  echo "$CONFIG"
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop ;;
  status) if alive; then echo "$CONFIG"; else echo "not running" >&2; exit 1; fi ;;
  build) bash "$HERE/apiserver.sh" build-scheduler ;;
  *) echo "usage: $0 start [EXTENDER_URL] | stop | status | build" >&2; exit 2 ;;
esac
