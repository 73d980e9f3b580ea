"""DRA objects, as the real kube-apiserver and kube-scheduler left them (fixtures/dra/), read
into nodes and pods: the cards each node has and what each pod's claims hold or ask for."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from connectors.kube.dra.cel import CelUnsupported, Subject, compile_selector
from connectors.kube.watch.snapshot import Snapshot, SnapshotError, read_snapshot
from models import MILLI_PER_GPU, Node
from models.cards import SharingMode
from models.dra import DeviceKind, DraDevice
from streams.profiles.join import task_profile
from streams.profiles.node_profile import node_profile
from tests.dra.device_checks import check_profiles

SNAPSHOT = Path(__file__).parent / "fixtures" / "dra" / "snapshot.json"
AT = datetime(2026, 12, 7, 19, 0, tzinfo=UTC)


def _items() -> list[dict[str, Any]]:
    return list(orjson.loads(SNAPSHOT.read_bytes())["items"])


def _read(items: list[dict[str, Any]]) -> Snapshot:
    data = orjson.dumps({"kind": "List", "items": items})
    return read_snapshot(data, source="dra.json", now=AT, pool_label=None)


def _profiles(snap: Snapshot) -> dict[str, Any]:
    tasks = [task_profile(p, None, at=AT) for p in snap.pods]
    return {
        n.name: node_profile(n, [t for t in tasks if t.node == n.name], {}, at=AT)
        for n in snap.nodes
    }


def _nodes(snap: Snapshot) -> dict[str, Node]:
    return {n.name: n for n in snap.nodes}


def test_whole_gpus_shared_memory_and_mig_shapes_become_cards() -> None:
    snap = _read(_items())
    nodes = _nodes(snap)
    for name in ("gpu-node-a", "gpu-node-b", "gpu-node-d"):
        n = nodes[name]
        assert (n.gpu_model, n.gpu_count, n.sharing) == ("A100-80GB", 4, SharingMode.EXCLUSIVE)
        assert n.gpu_memory_mib == 80 * 1024 and not n.mig_devices
    c = nodes["gpu-node-c"]
    # vgpu-0 shared by capacity; gpu-0 cut into two 3g.40gb shapes, which use up its eight
    # memory slices: the 1g.10gb shapes listed beside them are not free as well
    assert (c.gpu_count, c.sharing, c.mig_cards) == (1, SharingMode.HAMI, 1)
    assert c.mig_devices == {"3g.40gb": 2}


def test_pods_hold_the_devices_their_claims_were_allocated() -> None:
    pods = {p.name: p for p in _read(_items()).pods}
    two = pods["pod-two-gpus"]
    assert (two.node, two.requests.gpu_count, two.gpu_indices) == ("gpu-node-a", 2, (0, 1))
    # firstAvailable took the A100 alternative; its second request took the next card
    assert pods["pod-prioritized"].gpu_indices == (2, 3)
    assert pods["pod-from-template"].gpu_indices == (0,)  # the controller's claim, by status
    assert pods["pod-all"].gpu_indices == (0, 1, 2, 3)  # allocationMode All on gpu-node-d
    assert pods["pod-mig-3g"].requests.mig == {"3g.40gb": 2}
    assert pods["pod-mig-3g"].requests.gpu_count == 0
    shared = pods["pod-shared-20g"].requests
    assert (shared.gpu_count, shared.gpu_memory_mib) == (1, 20 * 1024)
    # the scheduler's claim for an extended resource replaces the container's own count
    extended = pods["pod-extended"].requests
    assert (extended.gpu_count, extended.gpu_memory_mib) == (1, 10 * 1024)


def test_profiles_count_every_device_as_the_allocations_say() -> None:
    snap = _read(_items())
    profiles = _profiles(snap)
    assert check_profiles(snap.dra.book, profiles) == 14
    c = profiles["gpu-node-c"]
    shared = next(g for g in c.gpus if g.mode is SharingMode.HAMI)
    assert shared.memory_free_mib == 80 * 1024 - 20 * 1024 - 10 * 1024
    assert shared.pods == ("dra-test/pod-extended", "dra-test/pod-shared-20g")
    b = profiles["gpu-node-b"]
    assert [g.milli_free for g in b.gpus] == [0] + [MILLI_PER_GPU] * 3
    # the DeviceTaintRule (NoSchedule) on gpu-3 keeps new work off that card only
    assert [g.healthy for g in b.gpus] == [True, True, True, False]
    assert _nodes(snap)["gpu-node-b"].card_taints == {3: "example.com/unhealthy=ecc:NoSchedule"}


def test_a_taint_with_effect_none_only_shows_and_takes_no_card_out() -> None:
    items = _items()
    rule = next(i for i in items if i["kind"] == "DeviceTaintRule")
    rule["spec"]["taint"]["effect"] = "None"
    snap = _read(items)
    assert _nodes(snap)["gpu-node-b"].card_taints == {}
    assert all(g.healthy for g in _profiles(snap)["gpu-node-b"].gpus)


def _without(items: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [i for i in items if i["metadata"]["name"] != name]


def test_an_incomplete_pool_counts_for_nothing_until_its_last_slice() -> None:
    # node c's partitionable pool is two slices; with the devices slice missing the pool is
    # still being published, and its one GPU must not appear as free MIG shapes or a card
    items = _without(_without(_items(), "gpu-node-c-gpu.nvidia.com-devices"), "gpu-node-c-shared")
    snap = _read(items)
    c = _nodes(snap)["gpu-node-c"]
    assert (c.gpu_count, c.mig_cards, c.mig_devices) == (0, 0, {})
    mig_pod = next(p for p in snap.pods if p.name == "pod-mig-3g")
    assert mig_pod.requests.mig == {}  # its shapes are not counted while the pool is not


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    items = _items()
    a = next(i for i in items if i["metadata"]["name"] == "gpu-node-a-gpu.nvidia.com")
    newer = copy.deepcopy(a)
    newer["metadata"]["name"] = "gpu-node-a-gpu.nvidia.com-2"
    newer["spec"]["pool"]["generation"] = 2
    newer["spec"]["devices"] = newer["spec"]["devices"][:2]  # two cards left in generation 2
    node = _nodes(_read([*items, newer]))["gpu-node-a"]
    assert node.gpu_count == 2


def test_a_slice_that_cannot_be_read_names_its_field() -> None:
    items = _items()
    bad = next(i for i in items if i["kind"] == "ResourceSlice")
    bad["spec"]["devices"][0]["capacity"]["memory"]["value"] = "lots"
    with pytest.raises(SnapshotError, match=r"ResourceSlice .*capacity.memory"):
        _read(items)


def _device(**attributes: str | int | bool) -> DraDevice:
    qualified = {f"gpu.nvidia.com/{k}": v for k, v in attributes.items()}
    return DraDevice(name="gpu-0", kind=DeviceKind.GPU, attributes=qualified)


A100 = _device(type="gpu", productName="NVIDIA A100-SXM4-80GB", index=0, mig=False, vendor="café")
MIG = _device(type="mig", profile="3g.40gb", productName="NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize(
    ("expression", "a100", "mig"),
    [
        ('device.driver == "gpu.nvidia.com"', True, True),
        ('device.driver != "gpu.nvidia.com"', False, False),
        ('device.attributes["gpu.nvidia.com"].type == "gpu"', True, False),
        ("device.attributes['gpu.nvidia.com']['type'] == 'mig'", False, True),
        ('device.attributes["gpu.nvidia.com"].profile in ["1g.10gb", "3g.40gb"]', False, True),
        (
            'device.driver == "gpu.nvidia.com" && (device.attributes["gpu.nvidia.com"].type'
            ' == "mig" || device.attributes["gpu.nvidia.com"].index == 0)',
            True,
            True,
        ),
        ('!(device.attributes["gpu.nvidia.com"].type == "gpu")', False, True),
        ('device.attributes["gpu.nvidia.com"].mig', False, False),  # a bool attribute, false
        ('device.attributes["gpu.nvidia.com"].missing == "x"', False, False),
        ('device.attributes["gpu.nvidia.com"].index == "0"', False, False),  # no coercion
        # reading a missing attribute is CEL's error, not "unequal": a full GPU has no profile
        ('device.attributes["gpu.nvidia.com"].profile != "1g.10gb"', False, True),
        ('!(device.attributes["gpu.nvidia.com"].profile == "1g.10gb")', False, True),
        # ... and || and && absorb it where their other side decides
        (
            'device.attributes["gpu.nvidia.com"].type == "gpu" || '
            'device.attributes["gpu.nvidia.com"].profile == "3g.40gb"',
            True,
            True,
        ),
        (
            'device.attributes["gpu.nvidia.com"].type == "mig" && '
            'device.attributes["gpu.nvidia.com"].profile == "3g.40gb"',
            False,
            True,
        ),
        ('device.attributes["gpu.nvidia.com"].vendor == "café"', True, False),
    ],
)
def test_selectors_in_the_subset_read_as_the_scheduler_reads_them(
    expression: str, a100: bool, mig: bool
) -> None:
    selector = compile_selector(expression)
    assert selector(Subject("gpu.nvidia.com", A100)) is a100
    assert selector(Subject("gpu.nvidia.com", MIG)) is mig


@pytest.mark.parametrize(
    "expression",
    [
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
        'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))',
        'device.attributes["gpu.nvidia.com"].type == "gpu" &&',
        'device.attributes["gpu.nvidia.com"].profile in ["1g.10gb" "3g.40gb"]',
        '!device.attributes["gpu.nvidia.com"].mig == true',
    ],
)
def test_selectors_outside_the_subset_are_refused_not_guessed(expression: str) -> None:
    with pytest.raises(CelUnsupported):
        compile_selector(expression)


def _named(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["metadata"]["name"] == name)


def _pods(snap: Snapshot) -> dict[str, Any]:
    return {p.name: p for p in snap.pods}


def test_a_claim_two_pods_share_holds_its_cards_once() -> None:
    items = _items()
    twin = copy.deepcopy(_named(items, "pod-two-gpus"))
    twin["metadata"].update(name="pod-two-twin", uid="twin-uid")
    claim = _named(items, "two-gpus")
    claim["status"]["reservedFor"].append({"name": "pod-two-twin", "resource": "pods", "uid": "t"})
    snap = _read([*items, twin])
    assert _pods(snap)["pod-two-twin"].requests.gpu_count == 0
    assert check_profiles(snap.dra.book, _profiles(snap)) == 14  # node a: 4 cards used, not 6


def test_monitoring_access_takes_no_card() -> None:
    items = _items()
    _named(items, "two-gpus")["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    snap = _read(items)
    assert _pods(snap)["pod-two-gpus"].gpu_indices == (1,)
    assert [g.milli_free for g in _profiles(snap)["gpu-node-a"].gpus][:2] == [MILLI_PER_GPU, 0]


def test_a_claim_for_another_kind_of_device_asks_for_no_gpu() -> None:
    items = _items()
    nic = copy.deepcopy(_named(items, "gpu-node-a-gpu.nvidia.com"))
    nic["metadata"]["name"] = "gpu-node-a-nic"
    nic["spec"].update(driver="nic.example.com", pool={**nic["spec"]["pool"], "name": "nic-a"})
    nic["spec"]["devices"] = [{"name": "nic-0", "attributes": {"speed": {"int": 400}}}]
    nic_class = copy.deepcopy(_named(items, "gpu.nvidia.com"))
    nic_class["metadata"]["name"] = "nic.example.com"
    nic_class["spec"]["selectors"] = [{"cel": {"expression": 'device.driver == "nic.example.com"'}}]
    claim = copy.deepcopy(_named(items, "two-gpus"))
    claim["metadata"]["name"] = "nic"
    claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nic.example.com"
    del claim["status"]
    pod = copy.deepcopy(_named(items, "pod-two-gpus"))
    pod["metadata"].update(name="pod-nic", uid="nic-uid")
    pod["spec"]["resourceClaims"] = [{"name": "nic", "resourceClaimName": "nic"}]
    del pod["spec"]["nodeName"]
    snap = _read([*items, nic, nic_class, claim, pod])
    asked = _pods(snap)["pod-nic"].requests
    assert (asked.gpu_count, asked.mig, asked.gpu_dra) == (0, {}, False)


def test_a_template_claim_the_status_says_is_not_needed_asks_for_nothing() -> None:
    items = _items()
    pod = copy.deepcopy(_named(items, "pod-from-template"))
    pod["metadata"].update(name="pod-skipped", uid="skipped-uid")
    pod["status"]["resourceClaimStatuses"] = [{"name": pod["spec"]["resourceClaims"][0]["name"]}]
    snap = _read([*items, pod])
    assert _pods(snap)["pod-skipped"].requests.gpu_count == 0


def test_shapes_on_a_counter_set_the_pool_does_not_list_are_never_free() -> None:
    items = _items()
    results = _named(items, "mig-3g")["status"]["allocation"]["devices"]["results"]
    del results[1]  # one 3g.40gb shape held: with the counters, the other half is free
    assert _nodes(_read(copy.deepcopy(items)))["gpu-node-c"].mig_devices["3g.40gb"] == 2
    counters = _named(items, "gpu-node-c-gpu.nvidia.com-counters")
    counters["spec"]["sharedCounters"][0]["name"] = "another-set"
    assert _nodes(_read(items))["gpu-node-c"].mig_devices == {"3g.40gb": 1}


def test_an_allocation_result_out_of_bounds_is_refused_by_name() -> None:
    items = _items()
    result = _named(items, "shared-20g")["status"]["allocation"]["devices"]["results"][0]
    result["consumedCapacity"]["memory"] = "2Ti"
    with pytest.raises(SnapshotError, match=r"ResourceClaim .*status.allocation"):
        _read(items)
