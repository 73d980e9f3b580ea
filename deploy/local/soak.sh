#!/usr/bin/env bash
# The chaos soak's long form: the whole bundled trace published over MINUTES minutes to three
# Faust workers, the sink, the alerter and the actuator (enforce mode) on a broker and a
# kube-apiserver of its own, a round of faults every four minutes (a worker killed and
# restarted, a worker added and removed, the broker stopped for 30 s, the sink killed and
# restarted, malformed records, Alertmanager stopped for a minute under the alerter, the
# actuator's Lease lost to a second actuator), then the history compared with the embedded
# runner's, row for row, what Alertmanager lists with the signals still open, and the
# evictions with the pods the API server lost (tests/chaos/test_soak.py; the short form:
# GPUFRAG_SOAK=1 pytest tests/chaos, in .ci/run).
#
#   deploy/local/soak.sh MINUTES [SEED]
#
# Needs what .ci/run installs and builds (.venv, Java, Alertmanager; the broker's jars are
# fetched and cached by kafka.sh, kube-apiserver and etcd built and cached by apiserver.sh).
# Exit status: pytest's.
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes=${1:?usage: deploy/local/soak.sh MINUTES [SEED]}
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "soak.sh: MINUTES must be a number, got '$minutes'" >&2; exit 2; }
export GPUFRAG_SOAK=1 GPUFRAG_SOAK_MINUTES=$minutes GPUFRAG_SOAK_SEED=${2:-7}
exec .venv/bin/python -m pytest -q -s -x tests/chaos/test_soak.py -m chaos
