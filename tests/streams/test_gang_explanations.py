"""A gang waiting for room has one explanation of its own, keyed ``namespace/gang:NAME``,
placeable or not, as every pending single pod has; its members have none."""

from __future__ import annotations

from models import DetectorSettings, GangRef, PodPhase, SignalKind
from models.analysis import GangFigures
from models.settings import UnplaceablePendingSettings
from streams.cluster_analysis import ClusterAnalysis
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate, TaskProfileUpdate
from tests.streams.profiles_helpers import at, node, task

SETTINGS = DetectorSettings(unplaceable_pending=UnplaceablePendingSettings(evaluate_every_s=0))


def analysed(*updates: ProfileUpdate) -> tuple[ClusterAnalysis, set[tuple[str, str]]]:
    """The updates applied in order; the analysis and its unplaceable_pending signals."""
    a = ClusterAnalysis(detectors=SETTINGS)
    opened: set[tuple[str, str]] = set()
    for u in updates:
        for s in a.apply(u) + a.advance(u.at):
            if s.kind == SignalKind.UNPLACEABLE_PENDING:
                opened.add((s.scope_id, s.state))
    return a, opened


def two_nodes() -> list[ProfileUpdate]:
    return [
        NodeProfileUpdate("n1", node("n1", gpus=(1000, 1000)), at(0)),
        NodeProfileUpdate("n2", node("n2", gpus=(1000, 1000)), at(0)),
    ]


def test_a_gang_that_fits_together_but_waits_is_explained_without_a_signal() -> None:
    ref = GangRef(name="job", min_member=2)
    a, opened = analysed(
        *two_nodes(),
        TaskProfileUpdate("ml/w0", task("ml/w0", gpus=2, milli=1000, gang=ref), at(1)),
        TaskProfileUpdate("ml/w1", task("ml/w1", gpus=2, milli=1000, cpu=2_000, gang=ref), at(2)),
    )
    assert opened == set()
    assert set(a.explanations) == {"ml/gang:job"}  # the members have none of their own
    exp = a.explanations["ml/gang:job"]
    assert (exp.fits_cluster_total, exp.fits_some_node, exp.unplaceable) == (True, True, False)
    # all fit: the row shows the largest member (more CPU for the same GPUs), placed first
    assert exp.gang == GangFigures(
        name="job",
        min_member=2,
        bound=0,
        members=("ml/w0", "ml/w1"),
        placeable_together=2,
        needed=2,
        shown="ml/w1",
    )
    assert exp.blocking == () and exp.nodes_checked == 2
    report = a.report(at(2), explain=True).explanations
    assert report is not None
    (got, member) = report["ml/gang:job"]
    assert got == exp and member.key == "ml/w1"  # its request is the shown member's
    assert a.summary().unplaceable_pods == 0


def test_a_bound_member_leaves_the_rest_of_the_gang_to_place() -> None:
    ref = GangRef(name="job", min_member=3)
    bound = task("ml/w0", gpus=2, milli=1000, gang=ref, node_name="n1", phase=PodPhase.RUNNING)
    a, opened = analysed(
        NodeProfileUpdate("n1", node("n1", gpus=(0, 0)), at(0)),
        NodeProfileUpdate("n2", node("n2", gpus=(1000, 1000)), at(0)),
        NodeProfileUpdate("n3", node("n3", gpus=(1000,)), at(0)),
        NodeProfileUpdate("n4", node("n4", gpus=(1000,)), at(0)),
        TaskProfileUpdate("ml/w0", bound, at(1)),
        TaskProfileUpdate("ml/w1", task("ml/w1", gpus=2, milli=1000, gang=ref), at(1)),
        TaskProfileUpdate("ml/w2", task("ml/w2", gpus=2, milli=1000, gang=ref), at(2)),
    )
    assert opened == {("ml/gang:job", "open")}
    exp = a.explanations["ml/gang:job"]
    assert exp.unplaceable
    assert exp.gang is not None
    g = exp.gang
    assert (g.bound, g.members, g.needed, g.placeable_together) == (1, ("ml/w1", "ml/w2"), 2, 1)
    # the member that found no room, checked alone: only n2 has two cards for it
    assert g.shown == "ml/w2" and dict(exp.blocking) == {"gpu_count": 3}


def test_a_gang_still_missing_members_is_explained_once_they_are_all_there() -> None:
    ref = GangRef(name="job", min_member=3)
    members = [task(f"ml/w{i}", gpus=1, milli=1000, gang=ref) for i in range(3)]
    a, opened = analysed(
        *two_nodes(),
        *(TaskProfileUpdate(m.key, m, at(1 + i)) for i, m in enumerate(members[:2])),
    )
    # 2 of 3 members exist: it waits for its third pod, not for room
    assert a.explanations == {} and opened == set()
    a.apply(TaskProfileUpdate("ml/w2", members[2], at(5)))
    a.advance(at(5))
    exp = a.explanations["ml/gang:job"]
    assert exp.gang is not None and exp.gang.placeable_together == 3 and exp.fits_some_node
