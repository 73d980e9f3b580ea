"""The kubelet pod-resources client against a real gRPC server on a unix socket, its wire
format against the protobuf library's encoder, and the NVML sampler's attribution with it (on
readings from the real H200 fixtures)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from connectors.gpu.nvml import NvmlUnavailable
from connectors.gpu.podresources import (
    ContainerDevices,
    ContainerResources,
    KubeletAssignments,
    PodResources,
    PodResourcesClient,
    PodResourcesUnavailable,
    decode_list_response,
    encode_list_response,
    gpu_owners,
    kubelet_assignments,
)
from connectors.gpu.protowire import WireError
from connectors.gpu.reading import NvmlReading, PodRef, ProcessUse, card_owner, process_pods
from connectors.gpu.sampler import NvmlSampler
from connectors.refusals import RefusalLog
from models import Envelope, GpuSample, GpuSampleEvent
from models.settings import NvmlSettings
from tests.connectors.gpu.readings import h200_nvml, reading_of

WHOLE = "GPU-fb685150-e4d3-e02d-6582-22ee58c3cad9"  # the H200's UUID in the fixtures
SLICED = "GPU-2b1c0d7e-3f4a-4b5c-8d6e-7f8091a2b3c4"
MIG_CARD = "GPU-9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4"
MIG_A = "MIG-0a1b2c3d-4e5f-5a6b-8c7d-9e0f1a2b3c4d"
MIG_B = "MIG-1b2c3d4e-5f6a-5b7c-9d8e-0f1a2b3c4d5e"
IDLE = "GPU-4c5d6e7f-8091-4a2b-b3c4-d5e6f7a8b9c0"
UNASSIGNED = "GPU-6e7f8091-a2b3-4c4d-95e6-f7a8b9c0d1e2"

PODS = (
    PodResources(
        name="train-0",
        namespace="ml",
        containers=(
            ContainerResources(
                name="main",
                devices=(
                    ContainerDevices(resource_name="nvidia.com/gpu", device_ids=(WHOLE,)),
                    ContainerDevices(resource_name="example.com/nic", device_ids=("eth1",)),
                ),
            ),
            ContainerResources(name="sidecar"),
        ),
    ),
    PodResources(
        name="notebook-a",
        namespace="research",
        containers=(
            ContainerResources(
                name="jupyter",
                devices=(
                    ContainerDevices(resource_name="nvidia.com/gpu", device_ids=(f"{SLICED}::0",)),
                ),
            ),
        ),
    ),
    PodResources(
        name="notebook-b",
        namespace="research",
        containers=(
            ContainerResources(
                name="jupyter",
                devices=(
                    ContainerDevices(
                        resource_name="nvidia.com/gpu", device_ids=(f"{SLICED}::1", f"{SLICED}::2")
                    ),
                ),
            ),
        ),
    ),
    PodResources(
        name="infer-7",
        namespace="serving",
        containers=(
            ContainerResources(
                name="server",
                devices=(
                    ContainerDevices(resource_name="nvidia.com/mig-1g.18gb", device_ids=(MIG_A,)),
                    ContainerDevices(resource_name="nvidia.com/mig-3g.71gb", device_ids=(MIG_B,)),
                ),
            ),
        ),
    ),
    PodResources(
        name="reserved",
        namespace="batch",
        containers=(
            ContainerResources(
                name="worker",
                devices=(ContainerDevices(resource_name="nvidia.com/gpu", device_ids=(IDLE,)),),
            ),
        ),
    ),
)

TRAIN = PodRef("ml", "train-0", "main")
NB_A, NB_B = (
    PodRef("research", "notebook-a", "jupyter"),
    PodRef("research", "notebook-b", "jupyter"),
)
INFER, RESERVED = PodRef("serving", "infer-7", "server"), PodRef("batch", "reserved", "worker")


# -- wire format, against the protobuf library ----------------------------------------------


def _message_classes() -> dict[str, Any]:
    """The api.proto (v1) messages, declared here field by field, including fields a newer
    kubelet sends that the client does not read."""
    T = descriptor_pb2.FieldDescriptorProto
    rep, opt = T.LABEL_REPEATED, T.LABEL_OPTIONAL
    fdp = descriptor_pb2.FileDescriptorProto(
        name="podres_test.proto", package="v1", syntax="proto3"
    )

    def msg(name: str, *spec: tuple[str, int, int, int, str]) -> None:
        m = fdp.message_type.add(name=name)
        for fname, number, ftype, label, type_name in spec:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = f".v1.{type_name}"

    msg("ListPodResourcesResponse", ("pod_resources", 1, T.TYPE_MESSAGE, rep, "PodResources"))
    msg(
        "PodResources",
        ("name", 1, T.TYPE_STRING, opt, ""),
        ("namespace", 2, T.TYPE_STRING, opt, ""),
        ("containers", 3, T.TYPE_MESSAGE, rep, "ContainerResources"),
    )
    msg(
        "ContainerResources",
        ("name", 1, T.TYPE_STRING, opt, ""),
        ("devices", 2, T.TYPE_MESSAGE, rep, "ContainerDevices"),
        ("cpu_ids", 3, T.TYPE_INT64, rep, ""),
        ("memory", 4, T.TYPE_MESSAGE, rep, "ContainerMemory"),
    )
    msg(
        "ContainerDevices",
        ("resource_name", 1, T.TYPE_STRING, opt, ""),
        ("device_ids", 2, T.TYPE_STRING, rep, ""),
        ("topology", 3, T.TYPE_MESSAGE, opt, "TopologyInfo"),
    )
    msg(
        "ContainerMemory",
        ("memory_type", 1, T.TYPE_STRING, opt, ""),
        ("size", 2, T.TYPE_UINT64, opt, ""),
    )
    msg("TopologyInfo", ("nodes", 1, T.TYPE_MESSAGE, rep, "NUMANode"))
    msg("NUMANode", ("ID", 1, T.TYPE_INT64, opt, ""))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    names = ("ListPodResourcesResponse", "ContainerMemory", "TopologyInfo")
    return {
        n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{n}")) for n in names
    }


def _as_protobuf(cls: Any, pods: tuple[PodResources, ...]) -> Any:
    resp = cls()
    for p in pods:
        pm = resp.pod_resources.add(name=p.name, namespace=p.namespace)
        for c in p.containers:
            cm = pm.containers.add(name=c.name)
            for d in c.devices:
                cm.devices.add(resource_name=d.resource_name, device_ids=list(d.device_ids))
    return resp


def test_encoding_is_byte_for_byte_what_protobuf_writes() -> None:
    cls = _message_classes()["ListPodResourcesResponse"]
    ours = encode_list_response(PODS)
    theirs = _as_protobuf(cls, PODS).SerializeToString(deterministic=True)
    assert ours == theirs
    parsed = cls.FromString(ours)
    assert [p.name for p in parsed.pod_resources] == [p.name for p in PODS]
    assert list(parsed.pod_resources[2].containers[0].devices[0].device_ids) == [
        f"{SLICED}::1",
        f"{SLICED}::2",
    ]
    assert decode_list_response(theirs) == PODS


def test_a_newer_kubelets_extra_fields_are_skipped() -> None:
    classes = _message_classes()
    msg = _as_protobuf(classes["ListPodResourcesResponse"], PODS[:1])
    container = msg.pod_resources[0].containers[0]
    container.cpu_ids.extend([2, 3, 70])  # packed varints: a length-delimited field
    container.memory.add(memory_type="hugepages-1Gi", size=2**31)
    container.devices[0].topology.nodes.add(ID=1)
    wire = msg.SerializeToString()
    assert wire != encode_list_response(PODS[:1])
    assert decode_list_response(wire) == PODS[:1]


def test_small_message_by_hand() -> None:
    pods = (
        PodResources(
            name="p",
            namespace="n",
            containers=(
                ContainerResources(
                    name="c", devices=(ContainerDevices(resource_name="r", device_ids=("d",)),)
                ),
            ),
        ),
    )
    # response.1 { pod.1 "p"  pod.2 "n"  pod.3 { container.1 "c"  container.2 { 1 "r"  2 "d" } } }
    wire = bytes.fromhex("0a130a017012016e1a0b0a016312060a0172120164")
    assert encode_list_response(pods) == wire
    assert decode_list_response(wire) == pods
    assert decode_list_response(b"") == ()
    with pytest.raises(WireError):
        decode_list_response(wire[:-1])  # truncated
    with pytest.raises(WireError):
        decode_list_response(b"\x0b")  # wire type 3 (a group): never proto3


# -- the device-id mapping ------------------------------------------------------------------


def test_device_ids_map_to_containers() -> None:
    owners = gpu_owners(PODS)
    assert owners == {
        WHOLE: frozenset({TRAIN}),
        SLICED: frozenset({NB_A, NB_B}),  # the ::N replicas are one card
        MIG_A: frozenset({INFER}),
        MIG_B: frozenset({INFER}),
        IDLE: frozenset({RESERVED}),
    }  # the NIC is not a GPU
    assert card_owner(owners[WHOLE]) == TRAIN
    assert card_owner(owners[SLICED]) is None
    two_containers = frozenset({PodRef("ml", "p", "a"), PodRef("ml", "p", "b")})
    assert card_owner(two_containers) == PodRef("ml", "p", None)


# -- a real gRPC server on a unix socket ----------------------------------------------------


@dataclass
class FakeKubelet:
    pods: tuple[PodResources, ...]
    delay_s: float = 0.0
    calls: int = 0
    serializer: Callable[[tuple[PodResources, ...]], bytes] = encode_list_response

    async def list(self, request: bytes, context: Any) -> tuple[PodResources, ...]:
        self.calls += 1
        assert request == b""  # ListPodResourcesRequest is empty
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self.pods


@pytest.fixture
def kubelet() -> FakeKubelet:
    return FakeKubelet(pods=PODS)


@pytest.fixture
async def socket_path(tmp_path: Path, kubelet: FakeKubelet) -> AsyncIterator[str]:
    path = tmp_path / "kubelet.sock"
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {
            "List": grpc.unary_unary_rpc_method_handler(
                kubelet.list,
                request_deserializer=lambda b: b,
                response_serializer=lambda pods: kubelet.serializer(pods),
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    assert server.add_insecure_port(f"unix:{path}") == 1
    await server.start()
    try:
        yield str(path)
    finally:
        await server.stop(grace=None)


async def test_client_lists_the_kubelets_pods(socket_path: str, kubelet: FakeKubelet) -> None:
    client = PodResourcesClient(socket_path=socket_path, timeout_s=5)
    try:
        assert await client.list() == PODS
        assert gpu_owners(await client.list())[SLICED] == frozenset({NB_A, NB_B})
    finally:
        await client.close()
    assert kubelet.calls == 2


async def test_an_unreadable_answer_is_unavailable(socket_path: str, kubelet: FakeKubelet) -> None:
    kubelet.serializer = lambda _: b"\x0a\x09\x0a\x01"  # a pod cut short
    client = PodResourcesClient(socket_path=socket_path, timeout_s=5)
    with pytest.raises(PodResourcesUnavailable, match="unreadable answer"):
        await client.list()
    await client.close()


async def test_a_socket_nobody_serves_is_unavailable(tmp_path: Path) -> None:
    stale = tmp_path / "kubelet.sock"
    stale.touch()  # left behind by a stopped kubelet
    client = PodResourcesClient(socket_path=str(stale), timeout_s=5)
    with pytest.raises(PodResourcesUnavailable, match="UNAVAILABLE"):
        await client.list()
    await client.close()


# -- the sampler's attribution --------------------------------------------------------------


class FakeNvml:
    def __init__(self, readings: list[NvmlReading]) -> None:
        self.readings = readings
        self.closed = False

    def __len__(self) -> int:
        return len(self.readings)

    def poll_xids(self) -> dict[str, int]:
        return {}

    def read(self, index: int) -> NvmlReading:
        return self.readings[index]

    def close(self) -> None:
        self.closed = True


def _cgroup(uid: str) -> PodRef:
    return PodRef(namespace="", pod=f"uid:{uid}", container=None)


CGROUPS = {430: _cgroup("u-train"), 501: _cgroup("u-nb-a"), 502: _cgroup("u-nb-b")}
CGROUPS |= {601: _cgroup("u-infer"), 700: _cgroup("u-other")}


@pytest.fixture(scope="module")
def readings() -> list[NvmlReading]:
    """Five cards built from the H200's real readings: the busy card itself, and copies that
    are time-sliced, MIG-partitioned, idle-but-assigned and outside the device plugin."""
    meta = h200_nvml()
    busy = reading_of(meta["after_100GiB"], meta)
    idle = reading_of(meta["idle"], meta)
    assert busy.uuid == WHOLE and busy.processes[0].pid == 430
    half = busy.processes[0].used_bytes
    assert half is not None
    return [
        busy,
        replace(
            busy,
            index=1,
            uuid=SLICED,
            processes=(ProcessUse(501, half // 2), ProcessUse(502, half - half // 2)),
        ),
        replace(busy, index=2, uuid=MIG_CARD, mig_enabled=True, mig_uuids=(MIG_A, MIG_B),
                processes=(ProcessUse(601, half),)),
        replace(idle, index=3, uuid=IDLE),
        replace(busy, index=4, uuid=UNASSIGNED, processes=(ProcessUse(700, half),)),
    ]  # fmt: skip


def _owners(samples: list[GpuSample]) -> list[tuple[str | None, str | None, str | None]]:
    return [(s.namespace, s.pod, s.container) for s in samples]


BY_KUBELET = [
    ("ml", "train-0", "main"),
    (None, None, None),  # two pods share the time-sliced card
    ("serving", "infer-7", "server"),
    ("batch", "reserved", "worker"),  # idle, yet held: cgroups cannot tell
    ("", "uid:u-other", None),  # not the device plugin's: cgroup fallback
]
BY_CGROUP = [
    ("", "uid:u-train", None),
    (None, None, None),
    ("", "uid:u-infer", None),
    (None, None, None),
    ("", "uid:u-other", None),
]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _round(sampler: NvmlSampler) -> list[GpuSample]:
    got: list[Envelope] = []

    async def emit(env: Envelope) -> None:
        got.append(env)

    sampler.emit = emit
    await sampler.run(stop=asyncio.Event(), max_rounds=1)
    payloads = [env.payload for env in got]
    assert all(isinstance(p, GpuSampleEvent) for p in payloads)
    return [p.sample for p in payloads if isinstance(p, GpuSampleEvent)]


def _sampler(
    readings: list[NvmlReading], socket_path: str, *, clock: Clock, timeout_s: float = 5
) -> NvmlSampler:
    async def nowhere(env: Envelope) -> None:  # pragma: no cover - replaced per round
        raise AssertionError

    kubelet = KubeletAssignments(
        client=PodResourcesClient(socket_path=socket_path, timeout_s=timeout_s),
        backoff_initial_s=30,
        backoff_max_s=600,
        clock=clock,
    )
    return NvmlSampler(
        node="gpu-node-1",
        interval_s=0.01,
        on_no_gpu="exit",
        emit=nowhere,
        refusals=RefusalLog(),
        pod_of_pid=CGROUPS.get,
        pod_resources=kubelet,
        open_nvml=lambda: FakeNvml(readings),
    )


async def test_sampler_attributes_cards_by_the_kubelets_assignment(
    readings: list[NvmlReading], socket_path: str
) -> None:
    samples = await _round(_sampler(readings, socket_path, clock=Clock()))
    assert _owners(samples) == BY_KUBELET
    assert samples[0].uuid == WHOLE and samples[0].memory_used_mib == pytest.approx(
        108571525120 / 2**20
    )
    assert samples[3].memory_total_mib == 143771.0
    # processes keep their own memory; their pod is the card's assignee, else their cgroup's
    per_process = process_pods(
        readings[1], pod_of_pid=CGROUPS.get, assigned=frozenset({NB_A, NB_B})
    )
    assert [(p.pid, p.used_bytes, pod) for p, pod in per_process] == [
        (501, 107917344768 // 2, CGROUPS[501]),
        (502, 107917344768 - 107917344768 // 2, CGROUPS[502]),
    ]
    assert process_pods(readings[0], pod_of_pid=CGROUPS.get, assigned=frozenset({TRAIN})) == (
        (readings[0].processes[0], TRAIN),
    )


async def test_no_socket_falls_back_to_cgroups_logs_once_and_backs_off(
    readings: list[NvmlReading], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    sampler = _sampler(readings, str(tmp_path / "absent.sock"), clock=clock)
    kubelet = sampler.pod_resources
    assert kubelet is not None
    with caplog.at_level(logging.DEBUG, logger="connectors.gpu.podresources"):
        assert _owners(await _round(sampler)) == BY_CGROUP
        clock.now += 29  # within the backoff: not asked
        assert _owners(await _round(sampler)) == BY_CGROUP
        assert kubelet.failures == 1
        clock.now += 1
        assert _owners(await _round(sampler)) == BY_CGROUP
        assert kubelet.failures == 2  # asked again, and now waits 60 s
        clock.now += 59
        await _round(sampler)
        assert kubelet.failures == 2
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "absent.sock" in warnings[0].getMessage() and "cgroup" in warnings[0].getMessage()
    assert kubelet.last_error is not None and "no socket" in kubelet.last_error


async def test_a_slow_kubelet_falls_back_then_recovers(
    readings: list[NvmlReading],
    socket_path: str,
    kubelet: FakeKubelet,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    sampler = _sampler(readings, socket_path, clock=clock, timeout_s=0.3)
    assignments = sampler.pod_resources
    assert assignments is not None
    kubelet.delay_s = 3.0
    with caplog.at_level(logging.INFO, logger="connectors.gpu.podresources"):
        assert _owners(await asyncio.wait_for(_round(sampler), 2.5)) == BY_CGROUP
        assert assignments.failures == 1
        assert assignments.last_error is not None
        assert "DEADLINE_EXCEEDED" in assignments.last_error
        kubelet.delay_s = 0.0
        assert _owners(await _round(sampler)) == BY_CGROUP  # still backing off: not asked
        assert kubelet.calls == 1
        clock.now += 30
        assert _owners(await _round(sampler)) == BY_KUBELET
    assert assignments.answers == 1 and assignments.last_error is None
    assert kubelet.calls == 2
    assert any("answers again" in r.getMessage() for r in caplog.records)


async def test_without_a_gpu_the_kubelet_is_not_asked(tmp_path: Path) -> None:
    clock = Clock()

    def no_gpu() -> FakeNvml:
        raise NvmlUnavailable("no NVIDIA GPU can be read here")

    sampler = _sampler([], str(tmp_path / "absent.sock"), clock=clock)
    sampler.open_nvml = no_gpu
    assert await _round(sampler) == []
    assert sampler.unavailable is not None
    assert sampler.pod_resources is not None and sampler.pod_resources.failures == 0


def test_settings_turn_it_on_and_off() -> None:
    on = kubelet_assignments(NvmlSettings())
    assert on is not None
    assert on.client.socket_path == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert on.client.timeout_s == 2.0
    assert kubelet_assignments(NvmlSettings(pod_resources=False)) is None
    custom = kubelet_assignments(
        NvmlSettings(pod_resources_socket="/run/k.sock", pod_resources_backoff_max_s=5)
    )
    assert custom is not None and custom.client.socket_path == "/run/k.sock"
    assert custom.backoff_max_s == 30.0  # never below the first wait
