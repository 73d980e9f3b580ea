"""Debian's promtool (package `prometheus`, installed by .ci/run): the rule checker and the
rule unit-test runner the deploy tests use."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["promtool"]

BINARY = os.environ.get("GPUFRAG_TEST_PROMTOOL_BIN", "promtool")
TIMEOUT_S = 120.0
"""`promtool test rules` on the rule tests takes about 0.1 s; a busy 2-core machine, longer."""


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run promtool; its exit status and output are the caller's to judge."""
    found = shutil.which(BINARY)
    if found is None:
        raise AssertionError(
            f"{BINARY} not found: .ci/run installs Debian's prometheus package "
            "(apt-get install prometheus), which has promtool"
        )
    return subprocess.run(
        [found, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
