"""Turns trace records into the simulator's node and pod specs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from connectors.trace.alibaba_csv import TraceNode, TracePod, read_nodes, read_pods
from streams.fragmentation.shapes import PodShape
from streams.placement.spec import NodeSpec, PodSpec


def node_spec(node: TraceNode) -> NodeSpec:
    return NodeSpec(
        name=node.name,
        cpu_milli=node.cpu_milli,
        memory_mib=node.memory_mib,
        gpu_count=node.gpu_count,
        gpu_model=node.gpu_model,
    )


def pod_shape(pod: TracePod) -> PodShape:
    return PodShape(
        cpu_milli=pod.cpu_milli,
        gpu_milli=pod.gpu_milli,
        gpu_count=pod.num_gpu,
        gpu_models="|".join(pod.gpu_spec),
    )


def pod_spec(pod: TracePod) -> PodSpec:
    return PodSpec(name=pod.name, shape=pod_shape(pod), memory_mib=pod.memory_mib)


def load_nodes(path: Path) -> list[NodeSpec]:
    return [node_spec(n) for n in read_nodes(path)]


def load_pods(path: Path) -> list[TracePod]:
    return read_pods(path)


def specs(pods: Sequence[TracePod]) -> list[PodSpec]:
    return [pod_spec(p) for p in pods]
