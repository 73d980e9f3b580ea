"""The kubelet pod-resources client against a real gRPC server on a unix socket, and its wire
format against the protobuf library's encoder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from connectors.gpu.podresources import (
    ContainerDevices,
    ContainerResources,
    PodResources,
    PodResourcesClient,
    PodResourcesUnavailable,
    decode_list_response,
    encode_list_response,
    gpu_owners,
)
from connectors.gpu.protowire import WireError
from connectors.gpu.reading import PodRef, card_owner
from tests.connectors.gpu.kubelet_fake import (
    IDLE,
    INFER,
    MIG_A,
    MIG_B,
    NB_A,
    NB_B,
    PODS,
    RESERVED,
    SLICED,
    TRAIN,
    WHOLE,
    FakeKubelet,
)

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
