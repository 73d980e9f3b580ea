"""Readers for public cluster traces, validated so bad input fails loudly."""

from connectors.trace.alibaba_csv import (
    TraceFormatError,
    TraceNode,
    TracePod,
    read_nodes,
    read_pods,
)
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path

__all__ = [
    "TraceFormatError",
    "TraceNode",
    "TracePod",
    "bundled_nodes_path",
    "bundled_pods_path",
    "read_nodes",
    "read_pods",
]
