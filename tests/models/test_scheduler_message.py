"""kube-scheduler's FailedScheduling messages, as its FitError and the preemption post-filter
write them (kubernetes pkg/scheduler: framework FitError.Error, and the DefaultPreemption
plugin's "preemption: ..." suffix), read into counted reasons."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from models.scheduler import SCHEDULER_REASONS_MAX, SCHEDULER_TEXT_MAX
from models.scheduler_message import (
    OTHER,
    parse_failed_scheduling,
    pending_verdict,
    preemption_of,
)
from streams.placement.sim_scheduler import failed_scheduling_message

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


AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("message", "nodes", "blocking", "preemption"), CASES)
def test_a_task_profile_keeps_the_reasons_in_gpufrag_words(
    message: str, nodes: int, blocking: dict[str, int], preemption: dict[str, int]
) -> None:
    kept = pending_verdict(message, at=AT)
    assert (kept.at, kept.nodes, kept.reasons, kept.message) == (AT, nodes, blocking, None)


def test_a_verdict_of_many_reasons_folds_the_least_common_into_other() -> None:
    # the in-tree filters of a 1.30 scheduler, each ruling out some nodes
    parts = [
        "9 Insufficient nvidia.com/gpu",
        "7 node(s) had untolerated taint {dedicated: infer}",
        "5 node(s) didn't match Pod's node affinity/selector",
        "4 Insufficient cpu",
        "3 Insufficient memory",
        "2 node(s) were unschedulable",
        "2 node(s) didn't have free ports for the requested pod ports",
        "1 node(s) had volume node affinity conflict",
        "1 node(s) exceed max volume count",
        "1 node(s) didn't match pod topology spread constraints",
    ]
    kept = pending_verdict(f"0/35 nodes are available: {', '.join(parts)}.", at=AT)
    assert len(kept.reasons) == SCHEDULER_REASONS_MAX
    assert kept.reasons["gpu_count"] == 9 and kept.reasons["taint"] == 7
    assert kept.reasons[OTHER] == 3  # the three 1-node reasons, the smallest
    assert sum(kept.reasons.values()) == 35


@pytest.mark.parametrize(
    "message",
    [
        # Volcano's wording, and a scheduler plugin's error: not kube-scheduler's FitError
        "0/3 nodes are unavailable: 3 Insufficient nvidia.com/gpu.",
        'running PreBind plugin "VolumeBinding": binding volumes: timed out waiting',
        "0/99999999999 nodes are available: 99999999999 Insufficient cpu.",
        "0/" + "9" * 5000 + " nodes are available: 1 Insufficient cpu.",
        "x" * 10_000,
    ],
)
def test_an_unread_verdict_is_kept_as_cut_text(message: str) -> None:
    kept = pending_verdict(message, at=AT)
    assert kept.nodes is None and kept.reasons == {}
    assert kept.message is not None and len(kept.message) <= SCHEDULER_TEXT_MAX
    assert message.startswith(kept.message.removesuffix("..."))


@pytest.mark.parametrize(
    ("message", "node", "by", "where"),
    [
        # kube-scheduler since 1.22 (preemption.go: "Preempted by pod %v on node %v", UID)
        (
            "Preempted by pod 4b0a1e8c-1d2f-4a55-9c1e-2f7d9b8e6a10 on node gpu-a100-3",
            None,
            "uid:4b0a1e8c-1d2f-4a55-9c1e-2f7d9b8e6a10",
            "gpu-a100-3",
        ),
        # before 1.22: "Preempted by %v/%v on node %v", namespace and name
        ("Preempted by ml/train-big-0 on node gpu-a100-3", None, "ml/train-big-0", "gpu-a100-3"),
    ],
)
def test_a_preemption_names_the_preemptor_and_the_node(
    message: str, node: str | None, by: str, where: str
) -> None:
    p = preemption_of(message, at=AT, node=node)
    assert (p.at, p.by, p.node, p.message) == (AT, by, where, None)


def test_a_preemption_in_other_words_is_kept_as_text_with_the_event_node() -> None:
    # Kueue's preemption of a workload, worded its own way
    text = (
        "Preempted to accommodate a workload (UID: 7f1c) due to prioritization in the ClusterQueue"
    )
    p = preemption_of(text, at=AT, node="gpu-7")
    assert (p.by, p.node, p.message) == (None, "gpu-7", text)
