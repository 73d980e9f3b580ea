#!/usr/bin/env bash
# The chaos soak's long form: the whole bundled trace published over MINUTES minutes to three
# Faust workers and the sink on a broker of its own, a round of faults every four minutes (a
# worker killed and restarted, a worker added and removed, the broker stopped for 30 s, the
# sink killed and restarted, malformed records, Alertmanager stopped for a minute under the
# alerter), then the history compared with the embedded runner's, row for row, and what
# Alertmanager lists with the signals still open (tests/chaos/test_soak.py; the short form:
# GPUFRAG_SOAK=1 pytest tests/chaos).
#
#   deploy/local/soak.sh MINUTES [SEED]
#
# Needs what .ci/run installs (.venv, Java; the broker's jars are fetched and cached by
# kafka.sh). Exit status: pytest's.
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes=${1:?usage: deploy/local/soak.sh MINUTES [SEED]}
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "soak.sh: MINUTES must be a number, got '$minutes'" >&2; exit 2; }
export GPUFRAG_SOAK=1 GPUFRAG_SOAK_MINUTES=$minutes GPUFRAG_SOAK_SEED=${2:-7}
exec .venv/bin/python -m pytest -q -s -x tests/chaos/test_soak.py -m chaos
