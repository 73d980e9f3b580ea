"""Shared cards as capacity (issue 12): each sharing mode laid out by the profile join, then
placed on and explained by the fragmentation core. The nodes and requests are what the kube
mapping makes of real objects; every expected figure is worked out by hand in the comment."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models import Node, PodPhase, ResourceRequest, TaskProfile
from models.analysis import BlockReason
from models.cards import SharingMode
from streams.cluster.view import shape_of
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.pending import check_gang, explain_request
from streams.fragmentation.shapes import PodShape, TypicalPod, TypicalPods
from streams.profiles.join import GpuTelemetry, node_profile

T0 = datetime(2026, 12, 2, tzinfo=UTC)
R = BlockReason


def req(
    *,
    gpus: int = 0,
    milli: int = 1000,
    mig: dict[str, int] | None = None,
    mem_mib: int | None = None,
    cores: int | None = None,
) -> ResourceRequest:
    return ResourceRequest(
        cpu_milli=1_000,
        memory_mib=1_024,
        gpu_count=gpus,
        gpu_milli=milli if gpus else 0,
        mig=mig or {},
        gpu_memory_mib=mem_mib,
        gpu_cores_pct=cores,
    )


def bound(key: str, node: str, request: ResourceRequest) -> TaskProfile:
    return TaskProfile(
        key=key,
        uid=key,
        requests=request,
        phase=PodPhase.RUNNING,
        node=node,
        created_at=T0,
    )


def time_sliced(name: str = "ts", *, cards: int = 1, replicas: int = 4) -> Node:
    return Node(
        name=name,
        cpu_milli=32_000,
        memory_mib=131_072,
        gpu_model="T4",
        gpu_count=cards,
        gpu_replicas=replicas,
        gpu_sharing=SharingMode.TIME_SLICED,
    )


def mig_only(name: str = "mig", **instances: int) -> Node:
    return Node(
        name=name,
        cpu_milli=64_000,
        memory_mib=262_144,
        gpu_model="A100-80GB",
        gpu_count=0,
        mig_devices={p.replace("_", "."): n for p, n in instances.items()},
    )


def hami(name: str = "hami", *, cards: int = 1, memory_mib: int = 32_768, split: int = 10) -> Node:
    return Node(
        name=name,
        cpu_milli=32_000,
        memory_mib=131_072,
        gpu_model="V100M32",
        gpu_count=cards,
        gpu_memory_mib=memory_mib,
        gpu_replicas=split,
        gpu_sharing=SharingMode.HAMI,
    )


def exclusive(name: str = "ex", *, cards: int = 2) -> Node:
    return Node(
        name=name,
        cpu_milli=32_000,
        memory_mib=131_072,
        gpu_model="H100",
        gpu_count=cards,
        gpu_sharing=SharingMode.EXCLUSIVE,
    )


def index_of(
    *nodes: tuple[Node, list[TaskProfile]], typical: TypicalPods | None = None
) -> CapacityIndex:
    ix = CapacityIndex(FragMeasure(typical or TypicalPods(pods=(), coverage=1.0, observed_pods=0)))
    for node, tasks in nodes:
        ix.upsert(node_profile(node, tasks, {}, at=T0))
    return ix


# --- the defects as the issue reported them ---------------------------------------------------


def test_three_replicas_of_a_four_replica_card_leave_one_replica_free() -> None:
    node = time_sliced()
    tasks = [bound(f"ns/p{i}", node.name, req(gpus=1)) for i in range(3)]
    card = node_profile(node, tasks, {}, at=T0).gpus[0]
    assert (card.mode, card.units, card.units_free) == (SharingMode.TIME_SLICED, 4, 1)
    assert card.milli_free == 250 and card.alloc_fraction == pytest.approx(0.75)
    assert card.pods == ("ns/p0", "ns/p1", "ns/p2") and card.memory_shared


def test_a_mig_only_node_has_its_instances_in_capacity_and_fragmentation() -> None:
    # 3g + 2g + 1g on one 7-slice card (1 slice never carved), one 1g instance in use
    node = mig_only(**{"3g_40gb": 1, "2g_20gb": 1, "1g_10gb": 1})
    typical = TypicalPods(
        pods=(TypicalPod(PodShape(1_000, 142, 1, mig="1g.10gb"), 1.0),),
        coverage=1.0,
        observed_pods=1,
    )
    ix = index_of((node, [bound("ns/small", node.name, req(mig={"1g.10gb": 1}))]), typical=typical)
    assert ix.capacity_milli == 1_000  # one card
    # free: the 3g and 2g instances, 5 of 7 slices = 714 milli; only 1g pods are expected and
    # none fits them, so all of it is fragment
    assert ix.idle_milli == 714
    assert ix.frag_milli == pytest.approx(5 * 1_000 / 7)
    card = node_profile(node, [bound("ns/small", node.name, req(mig={"1g.10gb": 1}))], {}, at=T0)
    assert card.gpus[0].mig_free == {"3g.40gb": 1, "2g.20gb": 1}
    assert card.gpus[0].alloc_fraction == pytest.approx(1 / 7)


def test_a_free_mig_instance_of_the_typical_profile_is_not_fragment() -> None:
    node = mig_only(**{"1g_10gb": 7})
    typical = TypicalPods(
        pods=(TypicalPod(PodShape(1_000, 142, 1, mig="1g.10gb"), 1.0),),
        coverage=1.0,
        observed_pods=1,
    )
    ix = index_of((node, []), typical=typical)
    assert ix.idle_milli == 1_000 and ix.frag_milli == pytest.approx(0.0)


# --- placement and explanations, each mode -----------------------------------------------------


def test_a_replica_request_fits_a_card_with_a_free_replica_and_not_a_full_one() -> None:
    node = time_sliced()
    three = [bound(f"ns/p{i}", node.name, req(gpus=1)) for i in range(3)]
    assert explain_request(index_of((node, three)), req(gpus=1)).fits_some_node
    four = [*three, bound("ns/p3", node.name, req(gpus=1))]
    out = explain_request(index_of((node, four)), req(gpus=1))
    assert not out.fits_some_node and dict(out.blocking) == {R.GPU_COUNT: 1}


def test_a_request_for_several_replicas_is_served_by_free_replicas_of_one_card() -> None:
    node = time_sliced(cards=2, replicas=3)
    # 3 replicas taken: the tightest card fills first, the other keeps its 3
    tasks = [bound(f"ns/p{i}", node.name, req(gpus=1)) for i in range(3)]
    free = [g.units_free for g in node_profile(node, tasks, {}, at=T0).gpus]
    assert sorted(free) == [0, 3]
    # the device plugin hands one pod several replicas of one card, as the scheduler counts
    # them: 3 replicas free, so 3 fit and 4 do not
    ix = index_of((node, tasks))
    assert explain_request(ix, req(gpus=3)).fits_some_node
    out = explain_request(ix, req(gpus=4))
    assert not out.fits_some_node and dict(out.blocking) == {R.GPU_COUNT: 1}
    assert out.near_misses[0].missing_gpus == 1


def test_a_mig_request_fits_a_free_instance_of_its_profile_only() -> None:
    node = mig_only(**{"3g_40gb": 2, "1g_10gb": 1})
    ix = index_of((node, [bound("ns/a", node.name, req(mig={"1g.10gb": 1}))]))
    assert explain_request(ix, req(mig={"3g.40gb": 2})).fits_some_node
    out = explain_request(ix, req(mig={"1g.10gb": 1}))
    assert not out.fits_some_node and dict(out.blocking) == {R.MIG_PROFILE: 1}
    assert out.near_misses[0].missing_gpus == 1


def test_a_node_with_no_free_instance_lacks_gpus_not_a_profile() -> None:
    node = mig_only(**{"1g_10gb": 1})
    ix = index_of((node, [bound("ns/a", node.name, req(mig={"1g.10gb": 1}))]))
    out = explain_request(ix, req(mig={"1g.10gb": 1}))
    assert dict(out.blocking) == {R.GPU_COUNT: 1} and not out.fits_cluster_total


def test_whole_card_requests_do_not_fit_mig_instances() -> None:
    node = mig_only(**{"7g_80gb": 1})
    out = explain_request(index_of((node, [])), req(gpus=1))
    assert not out.fits_some_node and dict(out.blocking) == {R.GPU_COUNT: 1}


def test_a_hami_request_needs_its_memory_free_on_one_card() -> None:
    node = hami(cards=2)
    # 20,000 MiB promised on each card: 12,768 MiB left on either, 25,536 in all
    tasks = [
        bound("ns/a", node.name, req(gpus=1, mem_mib=20_000)),
        bound("ns/b", node.name, req(gpus=1, mem_mib=20_000)),
    ]
    profile = node_profile(node, tasks, {}, at=T0)
    assert [g.memory_free_mib for g in profile.gpus] == [12_768, 12_768]
    assert [g.units_free for g in profile.gpus] == [1_000, 1_000]  # no cores asked: none taken
    ix = index_of((node, tasks))
    assert explain_request(ix, req(gpus=1, mem_mib=12_000)).fits_some_node
    out = explain_request(ix, req(gpus=1, mem_mib=16_000))
    assert not out.fits_some_node and dict(out.blocking) == {R.GPU_MEMORY: 1}


def test_a_hami_request_without_gpumem_takes_the_whole_cards_memory() -> None:
    node = hami(cards=1)
    profile = node_profile(node, [bound("ns/a", node.name, req(gpus=1, cores=30))], {}, at=T0)
    card = profile.gpus[0]
    assert (card.memory_free_mib, card.units_free, card.milli_free) == (0, 700, 0)
    assert card.alloc_fraction == 1.0


def test_hami_core_shares_add_up_per_card() -> None:
    node = hami(cards=1)
    tasks = [
        bound(f"ns/p{i}", node.name, req(gpus=1, milli=300, mem_mib=4_000, cores=30))
        for i in range(3)
    ]
    ix = index_of((node, tasks))
    # 90 % of the cores promised: 30 % more does not fit, 10 % does
    assert explain_request(ix, req(gpus=1, milli=100, mem_mib=4_000, cores=10)).fits_some_node
    out = explain_request(ix, req(gpus=1, milli=300, mem_mib=4_000, cores=30))
    assert dict(out.blocking) == {R.GPU_COUNT: 1}


def test_a_hami_card_with_no_vgpu_left_takes_nothing_more() -> None:
    node = hami(cards=1, split=2)
    tasks = [bound(f"ns/p{i}", node.name, req(gpus=1, mem_mib=1_000)) for i in range(2)]
    card = node_profile(node, tasks, {}, at=T0).gpus[0]
    assert card.milli_free == 0
    assert not explain_request(index_of((node, tasks)), req(gpus=1, mem_mib=1_000)).fits_some_node


def test_an_exclusive_card_is_taken_whole_even_by_a_share() -> None:
    node = exclusive(cards=2)
    tasks = [bound("ns/a", node.name, req(gpus=1, milli=300, cores=30))]
    profile = node_profile(node, tasks, {}, at=T0)
    assert [g.milli_free for g in profile.gpus] == [0, 1_000]
    out = explain_request(index_of((node, tasks)), req(gpus=2))
    assert dict(out.blocking) == {R.GPU_COUNT: 1}


def test_milli_shares_still_pack_on_the_traces_cards() -> None:
    node = Node(name="m", cpu_milli=32_000, memory_mib=131_072, gpu_model="T4", gpu_count=1)
    tasks = [bound("ns/a", node.name, req(gpus=1, milli=600))]
    ix = index_of((node, tasks))
    assert explain_request(ix, req(gpus=1, milli=400)).fits_some_node
    out = explain_request(ix, req(gpus=1, milli=500))
    assert dict(out.blocking) == {R.GPU_COUNT: 1}


def test_a_gang_of_replica_pods_is_placed_replica_by_replica() -> None:
    node = time_sliced(cards=1, replicas=4)
    ix = index_of((node, [bound("ns/a", node.name, req(gpus=1))]))
    members = [
        TaskProfile(
            key=f"ns/g{i}", uid=str(i), requests=req(gpus=1), phase=PodPhase.PENDING, created_at=T0
        )
        for i in range(4)
    ]
    assert check_gang(ix, members, 3).placed == 3
    four = check_gang(ix, members, 4)
    assert four.placed == 3 and four.first_failure is not None


def test_a_gang_of_mig_pods_takes_instances_one_by_one() -> None:
    node = mig_only(**{"1g_10gb": 2, "2g_20gb": 1})
    ix = index_of((node, []))
    members = [
        TaskProfile(
            key=f"ns/g{i}",
            uid=str(i),
            requests=req(mig={"1g.10gb": 1}),
            phase=PodPhase.PENDING,
            created_at=T0,
        )
        for i in range(3)
    ]
    assert check_gang(ix, members, 2).placed == 2
    three = check_gang(ix, members, 3)
    assert three.placed == 2
    assert three.first_failure is not None and dict(three.first_failure.blocking) == {}


def test_a_hami_request_fits_only_cards_hami_registered() -> None:
    # kube-scheduler finds no nvidia.com/gpumem on a node HAMi does not manage
    node = exclusive(cards=2)
    out = explain_request(index_of((node, [])), req(gpus=1, mem_mib=4_000))
    assert not out.fits_some_node and not out.fits_cluster_total
    assert dict(out.blocking) == {R.GPU_COUNT: 1}


def test_a_free_replica_is_no_fragment_for_typical_replica_pods() -> None:
    # one replica free on each of two cards (250 milli each): a typical pod of one or two
    # replicas uses them (the device plugin hands out replicas, whichever card), one of three
    # can use neither
    node = time_sliced(cards=2, replicas=4)
    tasks = [bound(f"ns/p{i}", node.name, req(gpus=1)) for i in range(6)]

    def frag(replicas: int) -> float:
        shape = PodShape(1_000, 1_000, replicas)
        typical = TypicalPods(pods=(TypicalPod(shape, 1.0),), coverage=1.0, observed_pods=1)
        ix = index_of((node, tasks), typical=typical)
        assert ix.idle_milli == 500
        return ix.frag_milli

    assert frag(1) == pytest.approx(0.0) and frag(2) == pytest.approx(0.0)
    assert frag(3) == pytest.approx(500.0)


def test_two_replicas_of_one_card_serve_a_typical_two_replica_pod() -> None:
    node = time_sliced(cards=1, replicas=4)
    shape = PodShape(1_000, 1_000, 2)
    typical = TypicalPods(pods=(TypicalPod(shape, 1.0),), coverage=1.0, observed_pods=1)
    ix = index_of((node, []), typical=typical)
    assert explain_request(ix, req(gpus=2)).fits_some_node
    assert ix.frag_milli == pytest.approx(0.0)


def test_a_typical_hami_pod_finds_no_room_on_an_exclusive_card() -> None:
    shape = PodShape(1_000, 1_000, 1, gpu_memory_mib=4_000, hami=True)
    typical = TypicalPods(pods=(TypicalPod(shape, 1.0),), coverage=1.0, observed_pods=1)
    ix = index_of((exclusive(cards=1), []), typical=typical)
    assert ix.frag_milli == pytest.approx(1_000.0)
    ix = index_of((hami(cards=1), []), typical=typical)
    assert ix.frag_milli == pytest.approx(0.0)


def test_typical_pods_are_learned_from_mig_and_hami_requests() -> None:
    mig = TaskProfile(
        key="ns/m", uid="m", requests=req(mig={"3g.40gb": 1}), phase=PodPhase.PENDING, created_at=T0
    )
    assert (shape_of(mig).mig, shape_of(mig).gpu_count, shape_of(mig).gpu_milli) == (
        "3g.40gb",
        1,
        428,
    )
    vgpu = TaskProfile(
        key="ns/h",
        uid="h",
        requests=req(gpus=1, mem_mib=8_000),
        phase=PodPhase.PENDING,
        created_at=T0,
    )
    assert (shape_of(vgpu).gpu_memory_mib, shape_of(vgpu).cores_milli) == (8_000, -1)
    assert shape_of(vgpu).hami and not shape_of(mig).hami


# --- found in review: each of these failed before its fix ---------------------------------------


def test_a_hami_card_whose_vgpus_are_all_handed_out_fits_nothing_more() -> None:
    node = hami(cards=1, split=2)
    tasks = [bound(f"ns/p{i}", node.name, req(gpus=1, mem_mib=8_000, cores=50)) for i in range(2)]
    ix = index_of((node, tasks))
    # 16,768 MiB left, but no vGPU; a request reserving no cores must not slip through
    out = explain_request(ix, req(gpus=1, mem_mib=2_000))
    assert not out.fits_some_node and not out.fits_cluster_total


def test_a_gang_of_vgpus_stops_at_the_split_count() -> None:
    ix = index_of((hami(cards=1, split=2), []))
    members = [
        TaskProfile(
            key=f"ns/g{i}",
            uid=str(i),
            requests=req(gpus=1, mem_mib=1_000),
            phase=PodPhase.PENDING,
            created_at=T0,
        )
        for i in range(3)
    ]
    assert check_gang(ix, members, 3).placed == 2


def test_a_gang_that_fits_the_free_total_but_no_node_is_unplaceable() -> None:
    # a CPU-only launcher and a 4-GPU worker; 2 free cards on each of two nodes
    ix = index_of((exclusive("a", cards=2), []), (exclusive("b", cards=2), []))
    members = [
        TaskProfile(
            key="ns/launcher", uid="l", requests=req(), phase=PodPhase.PENDING, created_at=T0
        ),
        TaskProfile(
            key="ns/worker", uid="w", requests=req(gpus=4), phase=PodPhase.PENDING, created_at=T0
        ),
    ]
    check = check_gang(ix, members, 2)
    assert check.fits_cluster_total and check.unplaceable


def test_free_capacity_a_request_cannot_use_does_not_make_it_fit_the_total() -> None:
    # one whole card free, a time-sliced node full: 4 devices are not there in any sense
    full = time_sliced("ts", cards=1, replicas=4)
    held = [bound(f"ns/p{i}", full.name, req(gpus=1)) for i in range(4)]
    ix = index_of((full, held), (exclusive("ex", cards=1), []))
    assert not explain_request(ix, req(gpus=4)).fits_cluster_total
    assert explain_request(ix, req(gpus=1)).fits_some_node


@pytest.mark.parametrize("replicas", [36, 48, 64, 128])
def test_a_gang_takes_no_more_replicas_than_a_card_has(replicas: int) -> None:
    ix = index_of((time_sliced(cards=1, replicas=replicas), []))
    small = ResourceRequest(cpu_milli=100, memory_mib=100, gpu_count=1, gpu_milli=1000)
    members = [
        TaskProfile(
            key=f"ns/g{i:03}",
            uid=str(i),
            requests=small,
            phase=PodPhase.PENDING,
            created_at=T0,
        )
        for i in range(replicas + 2)
    ]
    assert check_gang(ix, members, replicas + 2).placed == replicas


def test_a_hami_memory_share_is_a_share_of_the_card() -> None:
    node = hami(cards=1, memory_mib=32_768)
    quarter = ResourceRequest(
        cpu_milli=1_000, memory_mib=1_024, gpu_count=1, gpu_milli=1000, gpu_memory_pct=25
    )
    card = node_profile(node, [bound("ns/a", node.name, quarter)], {}, at=T0).gpus[0]
    assert card.memory_free_mib == 24_576
    ix = index_of((node, [bound("ns/a", node.name, quarter)]))
    assert explain_request(ix, quarter).fits_some_node


def test_on_a_mig_single_strategy_node_a_whole_gpu_request_takes_an_instance() -> None:
    node = Node(
        name="single",
        cpu_milli=64_000,
        memory_mib=262_144,
        gpu_model="A100-40GB",
        mig_devices={"1g.5gb": 14},
        mig_device_profile="1g.5gb",
    )
    held = [bound(f"ns/p{i}", node.name, req(gpus=1)) for i in range(12)]
    profile = node_profile(node, held, {}, at=T0)
    assert len(profile.gpus) == 2 and [g.mode for g in profile.gpus] == [SharingMode.MIG] * 2
    assert profile.gpus_allocated == pytest.approx(12 / 7)
    ix = index_of((node, held))
    assert explain_request(ix, req(gpus=2)).fits_some_node
    out = explain_request(ix, req(gpus=3))
    assert not out.fits_some_node and dict(out.blocking) == {R.GPU_COUNT: 1}
    assert not out.fits_cluster_total
    # a typical one-instance pod uses the two free instances: no fragment
    one = TypicalPods(
        pods=(TypicalPod(PodShape(1_000, 1_000, 1), 1.0),), coverage=1.0, observed_pods=1
    )
    assert index_of((node, held), typical=one).frag_milli == pytest.approx(0.0)


def test_instance_readings_say_which_card_of_a_mixed_node_is_split() -> None:
    node = Node(
        name="mixed",
        cpu_milli=64_000,
        memory_mib=262_144,
        gpu_model="A100-80GB",
        gpu_count=1,
        gpu_sharing=SharingMode.EXCLUSIVE,
        mig_devices={"3g.40gb": 1, "1g.10gb": 1},
    )
    # the exporter reports instances on physical GPU 0: that is the MIG card
    telemetry = {
        (0, 1): GpuTelemetry(40_448.0, 1_000.0, None),
        (0, 9): GpuTelemetry(9_728.0, 2_000.0, None),
        (1, None): GpuTelemetry(81_920.0, 30_000.0, None),
    }
    cards = node_profile(node, [], telemetry, at=T0).gpus
    assert [(g.index, g.mode) for g in cards] == [(0, SharingMode.MIG), (1, SharingMode.EXCLUSIVE)]
    assert cards[0].memory_used_mib == 3_000.0 and cards[1].memory_used_mib == 30_000.0
    # without readings, the whole cards come first
    plain = node_profile(node, [], {}, at=T0).gpus
    assert [(g.index, g.mode) for g in plain] == [(0, SharingMode.EXCLUSIVE), (1, SharingMode.MIG)]


def test_renamed_replicas_serve_only_pods_that_ask_for_them_by_that_name() -> None:
    # the device plugin's renameByDefault: replicas are advertised as nvidia.com/gpu.shared
    renamed = time_sliced("renamed").model_copy(update={"gpu_shared_resource": True})
    ix = index_of((renamed, []), (exclusive("ex", cards=1), []))
    plain = explain_request(ix, req(gpus=2))
    assert not plain.fits_some_node and dict(plain.blocking) == {R.GPU_COUNT: 2}
    assert not plain.fits_cluster_total  # one nvidia.com/gpu free in the whole cluster
    shared = req(gpus=2).model_copy(update={"gpu_shared_resource": True})
    assert explain_request(ix, shared).fits_some_node
