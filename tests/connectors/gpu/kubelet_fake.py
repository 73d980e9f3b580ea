"""The kubelet's pod-resources answer the GPU tests share: pods holding the H200 fixtures'
cards (whole, time-sliced, MIG), and a kubelet served over real gRPC on a unix socket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from connectors.gpu.podresources import (
    ContainerDevices,
    ContainerResources,
    PodResources,
    encode_list_response,
)
from connectors.gpu.reading import PodRef

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


@asynccontextmanager
async def serving(kubelet: FakeKubelet, path: Path) -> AsyncIterator[str]:
    """``kubelet`` answering ``v1.PodResourcesLister/List`` on the unix socket ``path``."""
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
