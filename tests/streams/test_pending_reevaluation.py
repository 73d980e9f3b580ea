"""The pending queue is evaluated again only after something an explanation reads changed:
a pod entering or leaving it, a verdict, a queue, the typical pods, or a node's row in the
capacity index. A GPU sample changes a node's profile (memory in use, the health clock) but no
row, so on a live cluster, where most node changes are samples, it starts no evaluation; a
bind on the node does (two nodes, one free card each: a pod asking for two is stranded)."""

from __future__ import annotations

from models.settings import UnplaceablePendingSettings
from streams.cluster_analysis import ClusterAnalysis
from streams.profiles.join import NodeProfileUpdate, TaskProfileUpdate
from tests.streams.profiles_helpers import at, node, only_detector, task

EVERY_60_S = only_detector("unplaceable_pending", UnplaceablePendingSettings(evaluate_every_s=60))
KEY = "ml/big"


def _ready() -> ClusterAnalysis:
    a = ClusterAnalysis(detectors=EVERY_60_S)
    a.apply(NodeProfileUpdate("a", node("a", gpus=(1000, 0)), at(0)))
    a.apply(NodeProfileUpdate("b", node("b", gpus=(0, 1000)), at(0)))
    a.apply(TaskProfileUpdate(KEY, task(KEY, gpus=2, milli=1000), at(0)))
    a.advance(at(0))
    assert a.evaluations == 1 and a.explanations[KEY].unplaceable
    return a


def _sampled(used_mib: float) -> NodeProfileUpdate:
    profile = node("a", gpus=(1000, 0))
    cards = tuple(
        g.model_copy(update={"memory_total_mib": 16_384.0, "memory_used_mib": used_mib})
        for g in profile.gpus
    )
    return NodeProfileUpdate("a", profile.model_copy(update={"gpus": cards}), at(61))


def _evaluations_after(a: ClusterAnalysis, update: NodeProfileUpdate) -> int:
    a.apply(update)
    a.advance(at(61))
    a.advance(at(200))
    return a.evaluations


def test_a_gpu_sample_starts_no_evaluation() -> None:
    a = _ready()
    assert _evaluations_after(a, _sampled(900.0)) == 1
    assert a.next_due() is None


def test_a_change_of_capacity_does() -> None:
    a = _ready()
    freed = NodeProfileUpdate("a", node("a", gpus=(1000, 1000)), at(61))
    assert _evaluations_after(a, freed) == 2
    assert not a.explanations[KEY].unplaceable
    # and so does a card that failed, though its free share is the same
    b = _ready()
    broken = node("a", gpus=(1000, 0), healthy=(False, True))
    assert _evaluations_after(b, NodeProfileUpdate("a", broken, at(61))) == 2
    assert not b.explanations[KEY].fits_cluster_total
