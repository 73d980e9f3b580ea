"""Paths to the trace files shipped inside the package.

Tests and demos need a real trace without a network or anything outside the package;
importlib.resources keeps this working from a wheel too.
"""

from __future__ import annotations

import atexit
from contextlib import ExitStack
from functools import cache
from importlib.resources import as_file, files
from pathlib import Path

__all__ = ["BUNDLED_NODES", "BUNDLED_PODS", "bundled_nodes_path", "bundled_pods_path"]

BUNDLED_NODES = "openb_node_list_gpu_node.csv"
BUNDLED_PODS = "openb_pod_list_default.csv"

_extracted = ExitStack()
atexit.register(_extracted.close)


@cache
def _data_path(name: str) -> Path:
    # A zipped install has no real file; as_file extracts one that lives until exit.
    resource = files(__package__ or "connectors.trace").joinpath("data", name)
    if isinstance(resource, Path):
        return resource
    return _extracted.enter_context(as_file(resource))


def bundled_nodes_path() -> Path:
    """The GPU node list (1213 nodes) of cluster-trace-gpu-v2023, unchanged."""
    return _data_path(BUNDLED_NODES)


def bundled_pods_path() -> Path:
    """The default pod list (8152 pods) of cluster-trace-gpu-v2023, unchanged."""
    return _data_path(BUNDLED_PODS)
