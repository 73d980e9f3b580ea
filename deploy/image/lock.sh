#!/usr/bin/env bash
# Rewrites requirements.lock: the exact versions of gpufrag's runtime dependencies (no test
# extras), as pip resolves pyproject's ranges today, from wheels only, in a fresh venv of PYTHON
# (default python3; it must be CPython 3.11, the image's python3). Both image builds install exactly
# these, with --no-deps, so a new release on PyPI changes nothing until this is run again.
#
#   deploy/image/lock.sh
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "lock.sh: $PY is not CPython 3.11, the image's Python" >&2; exit 1; }
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
"$PY" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: "$ROOT"
{
  echo "# gpufrag's runtime dependencies, pinned: written by deploy/image/lock.sh (pip freeze of a"
  echo "# fresh CPython 3.11 venv holding the project without its test extras). Read by build.sh and"
  echo "# the Dockerfile, which install exactly these with --no-deps."
  "$venv/bin/python" -m pip freeze --disable-pip-version-check --all \
    | grep -v -e '^gpufrag' -e '^pip==' -e '^setuptools==' -e '^wheel=='
} > "$HERE/requirements.lock"
echo "lock.sh: $(grep -vc '^#' "$HERE/requirements.lock") packages in $HERE/requirements.lock" >&2
