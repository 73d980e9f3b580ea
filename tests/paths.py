"""Where the tests find the repository and the data the project ships (nothing outside it)."""

from __future__ import annotations

from pathlib import Path

from connectors.trace import bundled_nodes_path

REPO_ROOT = Path(__file__).resolve().parents[1]

TRACE_DIR = bundled_nodes_path().parent
"""The slice of Alibaba cluster-trace-gpu-v2023 shipped in connectors/trace/data/."""

PUBLISHED_DIR = TRACE_DIR / "fgd-expected"
"""The FGD simulator's published results for the same workloads, shipped beside the trace."""

H200_DIR = REPO_ROOT / "tests" / "connectors" / "gpu" / "fixtures" / "h200"
"""Readings captured on a real NVIDIA H200 (see the README there)."""
