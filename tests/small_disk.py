"""A real full disk for tests: a small tmpfs mounted under the test's tmp_path.

The tests run as root (as CI does), where ``mount -t tmpfs`` works; the disk is unmounted
however the test ends (lazily if something still holds it)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SmallDisk", "small_disk_at"]


@dataclass(frozen=True, slots=True)
class SmallDisk:
    path: Path

    def grow(self, size: str) -> None:
        """Free space the way an operator would: a bigger disk under the same path."""
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)


@contextmanager
def small_disk_at(path: Path, size: str) -> Iterator[SmallDisk]:
    """A tmpfs of ``size`` (``6m``) mounted at ``path`` (created) while the block runs."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield SmallDisk(path)
    finally:
        if subprocess.run(["umount", str(path)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)
