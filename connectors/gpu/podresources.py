"""Which pod the kubelet gave each GPU: a client of its PodResources API (v1).

A process's cgroup names only a pod UID, and only while the card has a process on it; the
kubelet knows the device plugin's assignment itself (GPU UUID -> namespace/pod/container), idle
cards included. It serves it on a unix socket of the node, which a DaemonSet mounts read-only.

Wire: service ``v1.PodResourcesLister``, method ``List``, messages as in
``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto`` (only the fields read here; a newer
kubelet's other fields, CPU ids, memory, dynamic resources, are skipped).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from connectors.gpu.protowire import WireError, as_bytes, as_str, fields, len_field, str_field
from connectors.gpu.reading import PodRef
from models.settings import NvmlSettings

log = logging.getLogger(__name__)

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
LIST_METHOD = "/v1.PodResourcesLister/List"
MAX_MESSAGE = 16 * 1024 * 1024  # the kubelet's own limit; gRPC's default 4 MiB is too small
GPU_RESOURCE_PREFIX = "nvidia.com/"  # gpu, gpu.shared (renamed time-slicing), mig-<profile>

GpuOwners = Mapping[str, frozenset[PodRef]]
"""GPU or MIG device UUID -> the containers it is assigned to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerDevices:
    resource_name: str
    device_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerResources:
    name: str
    devices: tuple[ContainerDevices, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PodResources:
    name: str
    namespace: str
    containers: tuple[ContainerResources, ...] = ()


# Field numbers are the wire interface of api.proto (v1).
def _encode_devices(d: ContainerDevices) -> bytes:
    ids = b"".join(len_field(2, i.encode()) for i in d.device_ids)  # repeated: empties kept
    return str_field(1, d.resource_name) + ids


def _encode_container(c: ContainerResources) -> bytes:
    return str_field(1, c.name) + b"".join(len_field(2, _encode_devices(d)) for d in c.devices)


def _encode_pod(p: PodResources) -> bytes:
    containers = b"".join(len_field(3, _encode_container(c)) for c in p.containers)
    return str_field(1, p.name) + str_field(2, p.namespace) + containers


def encode_list_response(pods: Iterable[PodResources]) -> bytes:
    """ListPodResourcesResponse; what a kubelet sends (the tests serve it)."""
    return b"".join(len_field(1, _encode_pod(p)) for p in pods)


def _decode_devices(data: bytes) -> ContainerDevices:
    name, ids = "", []
    for number, value in fields(data):
        if number == 1:
            name = as_str(value)
        elif number == 2:
            ids.append(as_str(value))
    return ContainerDevices(resource_name=name, device_ids=tuple(ids))


def _decode_container(data: bytes) -> ContainerResources:
    name, devices = "", []
    for number, value in fields(data):
        if number == 1:
            name = as_str(value)
        elif number == 2:
            devices.append(_decode_devices(as_bytes(value)))
    return ContainerResources(name=name, devices=tuple(devices))


def _decode_pod(data: bytes) -> PodResources:
    name = namespace = ""
    containers = []
    for number, value in fields(data):
        if number == 1:
            name = as_str(value)
        elif number == 2:
            namespace = as_str(value)
        elif number == 3:
            containers.append(_decode_container(as_bytes(value)))
    return PodResources(name=name, namespace=namespace, containers=tuple(containers))


def decode_list_response(data: bytes) -> tuple[PodResources, ...]:
    return tuple(_decode_pod(as_bytes(v)) for n, v in fields(data) if n == 1)


def _encode_list_request(_: object) -> bytes:
    return b""  # ListPodResourcesRequest has no fields


def gpu_owners(pods: Iterable[PodResources]) -> dict[str, frozenset[PodRef]]:
    """Device UUID -> containers. Time-sliced replicas (``GPU-<uuid>::<n>``) are one card, so
    the pods sharing it are gathered under the card's UUID; MIG devices keep their own UUID."""
    out: dict[str, set[PodRef]] = {}
    for pod in pods:
        for c in pod.containers:
            for d in c.devices:
                if not d.resource_name.startswith(GPU_RESOURCE_PREFIX):
                    continue
                ref = PodRef(namespace=pod.namespace, pod=pod.name, container=c.name or None)
                for device in d.device_ids:
                    out.setdefault(device.split("::", 1)[0], set()).add(ref)
    return {uuid: frozenset(refs) for uuid, refs in out.items()}


def assigned(owners: GpuOwners, uuids: Iterable[str | None]) -> frozenset[PodRef]:
    """The containers holding a card, or any of its MIG devices."""
    found: set[PodRef] = set()
    for uuid in uuids:
        if uuid is not None:
            found |= owners.get(uuid, frozenset())
    return frozenset(found)


class PodResourcesUnavailable(RuntimeError):
    """The kubelet did not answer: no socket, refused, too slow, or not understood."""


class PodResourcesClient:
    """One channel, opened on first use in the running event loop (grpc.aio binds a channel to
    its loop) and dropped after a failure, so that a restarted kubelet is met afresh."""

    def __init__(self, *, socket_path: str = SOCKET, timeout_s: float = 2.0) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self._channel: Any = None
        self._list: Any = None

    async def list(self) -> tuple[PodResources, ...]:
        path = Path(self.socket_path)
        if not path.exists():
            raise PodResourcesUnavailable(f"no socket at {path}")
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(
                f"unix:{path.absolute()}",
                options=[("grpc.max_receive_message_length", MAX_MESSAGE)],
            )
            self._list = self._channel.unary_unary(
                LIST_METHOD,
                request_serializer=_encode_list_request,
                response_deserializer=None,  # decoded below: gRPC would log and return None
            )
        try:
            answer: bytes = await self._list(None, timeout=self.timeout_s)
            pods = decode_list_response(answer)
        except grpc.RpcError as exc:
            await self.close()
            code, details = exc.code(), exc.details()
            raise PodResourcesUnavailable(f"{getattr(code, 'name', code)}: {details}") from None
        except WireError as exc:
            await self.close()
            raise PodResourcesUnavailable(f"unreadable answer: {exc}") from None
        return pods

    async def close(self) -> None:
        channel, self._channel, self._list = self._channel, None, None
        if channel is not None:
            await channel.close()


class KubeletAssignments:
    """The kubelet's GPU assignments, asked each round; on failure the sampler falls back to
    the cgroup rule, and the socket is asked again after a doubling backoff, so a node without
    a kubelet costs one stat per backoff and one log line, not a timeout per round."""

    def __init__(
        self,
        *,
        client: PodResourcesClient,
        backoff_initial_s: float = 30.0,
        backoff_max_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = max(backoff_max_s, backoff_initial_s)
        self.clock = clock
        self.answers = 0
        self.failures = 0
        """Failed asks, in total (the NVML sampler has no metrics registry of its own)."""
        self.last_error: str | None = None
        self._streak = 0
        self._retry_at = -math.inf

    async def owners(self) -> GpuOwners | None:
        """This round's assignments, or None: unavailable, or not to be asked yet."""
        if self.clock() < self._retry_at:
            return None
        try:
            pods = await self.client.list()
        except PodResourcesUnavailable as exc:
            self._failed(str(exc))
            return None
        if self._streak:
            log.info("kubelet pod-resources answers again: attributing GPUs by assignment")
        self.answers += 1
        self._streak = 0
        self._retry_at = -math.inf
        self.last_error = None
        return gpu_owners(pods)

    def _failed(self, reason: str) -> None:
        self.failures += 1
        self._streak += 1
        self.last_error = reason
        delay = min(self.backoff_max_s, self.backoff_initial_s * 2.0 ** min(self._streak - 1, 30))
        self._retry_at = self.clock() + delay
        if self._streak == 1:
            log.warning(
                "kubelet pod-resources at %s unavailable (%s): attributing GPUs by process "
                "cgroup; asking again in %.0f s, then less often",
                self.client.socket_path,
                reason,
                delay,
            )
        else:
            log.debug("kubelet pod-resources still unavailable (%s)", reason)

    async def close(self) -> None:
        await self.client.close()


def kubelet_assignments(settings: NvmlSettings) -> KubeletAssignments | None:
    """What the nvml settings ask for; None when pod-resources is turned off."""
    if not settings.pod_resources:
        return None
    client = PodResourcesClient(
        socket_path=settings.pod_resources_socket, timeout_s=settings.pod_resources_timeout_s
    )
    return KubeletAssignments(
        client=client,
        backoff_initial_s=settings.pod_resources_backoff_initial_s,
        backoff_max_s=settings.pod_resources_backoff_max_s,
    )
