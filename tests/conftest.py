"""Session fixtures shared by all tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_path() -> Path:
    """The project's read-only shared folder: beside the checkout, as CI lays it out."""
    override = os.environ.get("GPUFRAG_SHARED_DIR")
    return Path(override) if override else REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    path = shared_path()
    if not path.is_dir():
        raise RuntimeError(
            f"shared folder {path} is missing; clone beside it or set GPUFRAG_SHARED_DIR"
        )
    return path


@pytest.fixture(scope="session")
def trace_dir(shared_dir: Path) -> Path:
    """The slice of Alibaba cluster-trace-gpu-v2023 kept in the shared folder."""
    return shared_dir / "traces" / "alibaba-gpu-v2023"


@pytest.fixture(scope="session")
def published_dir(shared_dir: Path) -> Path:
    """The FGD simulator's published results for the same workloads."""
    return shared_dir / "traces" / "fgd-expected"
