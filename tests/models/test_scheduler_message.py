"""kube-scheduler's FailedScheduling messages, as its FitError and the preemption post-filter
write them (kubernetes pkg/scheduler: framework FitError.Error, and the DefaultPreemption
plugin's "preemption: ..." suffix), read into counted reasons."""

from __future__ import annotations

from collections import Counter

import pytest

from models.scheduler_message import parse_failed_scheduling
from streams.placement.scheduler import failed_scheduling_message

CASES = [
    (
        # a GPU pod on a cluster whose GPU nodes are full and whose others are tainted
        "0/6 nodes are available: 2 Insufficient nvidia.com/gpu, 4 node(s) had untolerated taint "
        "{nvidia.com/gpu: present}. preemption: 0/6 nodes are available: 2 No preemption victims "
        "found for incoming pod, 4 Preemption is not helpful for scheduling.",
        6,
        {"gpu_count": 2, "taint": 4},
        {
            "No preemption victims found for incoming pod": 2,
            "Preemption is not helpful for scheduling": 4,
        },
    ),
    (
        "0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
        5,
        {"node(s) didn't match Pod's node affinity/selector": 5},
        {"Preemption is not helpful for scheduling": 5},
    ),
    (
        "0/4 nodes are available: 1 node(s) were unschedulable, 3 Insufficient cpu, "
        "3 Insufficient memory.",
        4,
        {"unschedulable": 1, "cpu": 3, "memory": 3},
        {},
    ),
    (
        # a taint with an empty value, as the control plane's
        "0/3 nodes are available: 1 node(s) had untolerated taint "
        "{node-role.kubernetes.io/control-plane: }, 2 Insufficient nvidia.com/mig-1g.10gb. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
        3,
        {"taint": 1, "gpu_count": 2},
        {"Preemption is not helpful for scheduling": 3},
    ),
    (
        "0/4 nodes are available: 4 CardInsufficientMemory.",
        4,
        {"gpu_memory": 4},
        {},
    ),
    (
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        3,
        {},
        {},
    ),
]


@pytest.mark.parametrize(("message", "nodes", "blocking", "preemption"), CASES)
def test_real_messages(
    message: str, nodes: int, blocking: dict[str, int], preemption: dict[str, int]
) -> None:
    verdict = parse_failed_scheduling(message)
    assert verdict is not None
    assert verdict.nodes == nodes
    assert verdict.blocking() == blocking
    assert verdict.preemption == preemption


def test_the_simulated_scheduler_writes_what_the_parser_reads() -> None:
    text = failed_scheduling_message(
        10, Counter({"Insufficient nvidia.com/gpu": 7, "Insufficient cpu": 3})
    )
    verdict = parse_failed_scheduling(text)
    assert verdict is not None and verdict.blocking() == {"gpu_count": 7, "cpu": 3}


@pytest.mark.parametrize("message", ["Successfully assigned ml/p to n1", "", "0/x nodes"])
def test_other_messages_are_not_verdicts(message: str) -> None:
    assert parse_failed_scheduling(message) is None
