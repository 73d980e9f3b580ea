"""Headless Chromium for the tests that load a report page in a real browser.

Chromium comes from Debian's ``chromium`` package, which ``.ci/run`` installs. Without it the
tests that call it fail rather than skip, so a CI image that lost the browser is noticed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_S = 60


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium once with a fresh profile and no network chatter."""
    assert CHROMIUM.exists(), (
        f"{CHROMIUM} not found: install Debian's chromium package "
        "(apt-get install -y chromium), as .ci/run does"
    )
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
        *args,
    ]
    try:
        result = subprocess.run(
            cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False, env=os.environ
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        print(stderr)
        pytest.fail(f"chromium did not finish in {TIMEOUT_S} s: {cmd}\n{stderr}")
    if result.returncode != 0:
        print(result.stderr)
    assert result.returncode == 0, f"chromium exited {result.returncode}\n{result.stderr}"
    return result
