"""Blocking reasons, near misses and gangs on clusters small enough to check by hand."""

from __future__ import annotations

import pytest

from models import GangRef, NodeProfile, Taint, TaskProfile, Toleration
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.pending import BlockReason, check_gang, explain_task
from streams.fragmentation.shapes import TypicalPods
from tests.streams.profiles_helpers import node, task

R = BlockReason
NO_SCHEDULE = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")


def index_of(*profiles: NodeProfile) -> CapacityIndex:
    ix = CapacityIndex(FragMeasure(TypicalPods(pods=(), coverage=0.95, observed_pods=0)))
    for p in profiles:
        ix.upsert(p)
    return ix


CASES: list[tuple[str, list[NodeProfile], TaskProfile, dict[BlockReason, int], bool]] = [
    (
        "cpu split across nodes",
        [node("a", cpu_free=3_000), node("b", cpu_free=3_000)],
        task("ns/p", cpu=4_000),
        {R.CPU: 2},
        True,
    ),
    (
        "memory split across nodes",
        [node("a", mem_free=2_048), node("b", mem_free=2_048)],
        task("ns/p", mem=3_000),
        {R.MEMORY: 2},
        True,
    ),
    (
        "two whole cards wanted, one free on each node",
        [node("a", gpus=(1000, 0)), node("b", gpus=(0, 1000))],
        task("ns/p", gpus=2, milli=1000),
        {R.GPU_COUNT: 2},
        True,
    ),
    (
        "a share bigger than any card's free part",
        [node("a", gpus=(400, 400)), node("b", gpus=(500,))],
        task("ns/p", gpus=1, milli=600),
        {R.GPU_SHARE: 1, R.GPU_COUNT: 1},
        True,
    ),
    (
        "only another GPU model is free",
        [node("a", gpus=(1000, 1000)), node("b", gpus=(1000,))],
        task("ns/p", gpus=1, milli=1000, models=("V100M32",)),
        {R.GPU_MODEL: 2},
        True,
    ),
    (
        "untolerated taint and a cordoned node",
        [
            node("a", gpus=(1000,), taints=(NO_SCHEDULE,)),
            node("b", gpus=(1000,), unschedulable=True),
        ],
        task("ns/p", gpus=1, milli=1000),
        {R.TAINT: 1, R.UNSCHEDULABLE: 1},
        True,
    ),
    (
        "a node lacking two things counts for both",
        [node("a", gpus=(1000,), cpu_free=500), node("b", gpus=(300,), cpu_free=8_000)],
        task("ns/p", cpu=2_000, gpus=1, milli=1000),
        {R.CPU: 1, R.GPU_COUNT: 1},
        True,
    ),
    (
        "unhealthy card is not capacity",
        [node("a", gpus=(1000, 1000), healthy=(False, True)), node("b", gpus=(1000,))],
        task("ns/p", gpus=2, milli=1000),
        {R.GPU_COUNT: 2},
        True,
    ),
    (
        "fits a node: not unplaceable",
        [node("a", gpus=(1000, 1000)), node("b", gpus=(0,))],
        task("ns/p", gpus=2, milli=1000),
        {R.GPU_COUNT: 1},
        False,
    ),
    (
        "more than the free total: full, not fragmented",
        [node("a", gpus=(1000,)), node("b", gpus=(1000,))],
        task("ns/p", gpus=3, milli=1000),
        {R.GPU_COUNT: 2},
        False,
    ),
]


@pytest.mark.parametrize(
    ("nodes", "pod", "blocking", "unplaceable"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_blocking_reasons_by_hand(
    nodes: list[NodeProfile],
    pod: TaskProfile,
    blocking: dict[BlockReason, int],
    unplaceable: bool,
) -> None:
    exp = explain_task(index_of(*nodes), pod)
    assert dict(exp.blocking) == blocking
    assert exp.unplaceable is unplaceable
    assert exp.nodes_checked == len(nodes)


def test_toleration_lets_the_pod_onto_the_tainted_node() -> None:
    ix = index_of(node("a", gpus=(1000,), taints=(NO_SCHEDULE,)))
    tolerant = task(
        "ns/p",
        gpus=1,
        milli=1000,
        tolerations=(Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),),
    )
    assert explain_task(ix, tolerant).fits_some_node
    assert not explain_task(ix, task("ns/q", gpus=1, milli=1000)).fits_some_node


def test_near_misses_name_the_closest_nodes_and_what_they_lack() -> None:
    ix = index_of(
        node("far", gpus=(0, 0), cpu_free=1_000),
        node("close", gpus=(1000, 0), cpu_free=16_000),
        node("closer", gpus=(1000, 1000), cpu_free=6_000),
        node("model", gpus=(1000, 1000), model="P100"),
    )
    exp = explain_task(ix, task("ns/p", cpu=8_000, gpus=2, milli=1000, models=("T4",)))
    assert exp.unplaceable
    assert [m.node for m in exp.near_misses] == ["closer", "close", "model"]
    closer, close, model = exp.near_misses
    assert (closer.missing_cpu_milli, closer.missing_gpus, closer.reasons) == (2_000, 0, (R.CPU,))
    assert (close.missing_cpu_milli, close.missing_gpus, close.reasons) == (0, 1, (R.GPU_COUNT,))
    assert model.reasons == (R.GPU_MODEL,)
    ev = exp.evidence()
    assert ev["blocking"] == {"cpu": 2, "gpu_count": 2, "gpu_model": 1}


def test_gang_fits_alone_but_not_together() -> None:
    ix = index_of(node("a", gpus=(1000, 1000)), node("b", gpus=(1000,)), node("c", gpus=(1000,)))
    ref = GangRef(name="g", min_member=2)
    members = [task(f"ns/m{i}", gpus=2, milli=1000, gang=ref) for i in range(2)]
    # each member alone fits node a; the cluster has 4 free cards for the 4 wanted
    assert all(explain_task(ix, m).fits_some_node for m in members)
    check = check_gang(ix, members, needed=2)
    assert (check.placed, check.needed, check.fits_cluster_total) == (1, 2, True)
    assert check.unplaceable
    assert check.first_failure is not None
    assert dict(check.first_failure.blocking) == {R.GPU_COUNT: 2}


def test_gang_that_fits_on_separate_nodes_is_placeable() -> None:
    ix = index_of(node("a", gpus=(1000,)), node("b", gpus=(1000,)), node("c", gpus=(1000,)))
    ref = GangRef(name="g", min_member=3)
    members = [task(f"ns/m{i}", gpus=1, milli=1000, gang=ref) for i in range(3)]
    check = check_gang(ix, members, needed=3)
    assert (check.placed, check.unplaceable) == (3, False)


def test_gang_blocked_by_cpu_on_one_node() -> None:
    ix = index_of(
        node("a", gpus=(1000,)), node("b", gpus=(1000,)), node("c", gpus=(1000,), cpu_free=500)
    )
    ref = GangRef(name="g", min_member=3)
    members = [task(f"ns/m{i}", cpu=4_000, gpus=1, milli=1000, gang=ref) for i in range(3)]
    check = check_gang(ix, members, needed=3)
    assert (check.placed, check.needed, check.fits_cluster_total) == (2, 3, True)
    assert check.unplaceable


def test_gpu_index_gaps_keep_capacity_and_fragment_right() -> None:
    from models import GpuState

    wide = node("wide", gpus=(1000,) * 8)
    gappy = node("gappy", gpus=(1000, 1000)).model_copy(
        update={"gpus": (GpuState(index=0, milli_free=1000), GpuState(index=5, milli_free=400))}
    )
    for order in ([gappy], [wide, gappy]):
        ix = index_of(*order)
        i = ix.slot["gappy"]
        assert sorted(ix.state(i)[2], reverse=True)[:2] == [1000, 400]
        assert int(ix.node_idle[i]) == 1400
        assert ix.capacity_milli == 1000 * (2 + (8 if len(order) == 2 else 0))
