"""A mixed fleet as a DRA cluster publishes it: ResourceSlices in the NVIDIA GPU driver's naming
(``gpu-<minor>``; ``type``, ``uuid``, ``productName``, ``parentUUID``, ``profile``), MIG shapes of
a partitionable H100 on shared counters, one GPU shared by memory capacity, and beside them a
device-plugin node with time-slicing. No driver runs: the test writes what one would."""

from __future__ import annotations

from typing import Any

from tests.scheduler.trace_objects import ready_status

DRIVER = "gpu.nvidia.com"
SHARE_DRIVER = "gpu-share.example.com"
"""The NVIDIA driver does not publish memory-shared GPUs; this stands for a driver that does."""
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
MEMORY_SLICES = 8
"""An H100's memory is cut in eight slices: a 3g.40gb shape takes four, a 1g.10gb one."""
H100_SMS = 132
RESOURCE = "resource.k8s.io/v1"


def node(
    name: str, *, labels: dict[str, str] | None = None, gpus: str | None = None
) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    if gpus is not None:
        resources["nvidia.com/gpu"] = gpus
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": ready_status(resources),
    }


def _attrs(**values: str) -> dict[str, Any]:
    return {k: {"string": v} for k, v in values.items()}


def _slice(
    name: str, node_name: str, *, driver: str = DRIVER, count: int = 1, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": count},
            **spec,
        },
    }


def whole_gpus(node_name: str, cards: int) -> list[dict[str, Any]]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": _attrs(type="gpu", uuid=f"GPU-{node_name}-{i}", productName=A100),
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(cards)
    ]
    return [_slice(f"{node_name}-gpus", node_name, devices=devices)]


def _counters(memory: str, sms: int, slices: range) -> dict[str, Any]:
    out: dict[str, Any] = {"memory": {"value": memory}, "multiprocessors": {"value": str(sms)}}
    out.update({f"memory-slice-{s}": {"value": "1"} for s in slices})
    return out


def _shape(g: int, uuid: str, profile: str, sms: int, slices: range) -> dict[str, Any]:
    memory = f"{len(slices) * 10}Gi"
    return {
        "name": f"gpu-{g}-mig-{profile.replace('.', '')}-{slices.start}",
        "attributes": _attrs(type="mig", parentUUID=uuid, profile=profile, productName=H100),
        "capacity": {"memory": {"value": memory}},
        "consumesCounters": [
            {"counterSet": f"gpu-{g}-counter-set", "counters": _counters(memory, sms, slices)}
        ],
    }


def partitionable_h100s(node_name: str, cards: int) -> list[dict[str, Any]]:
    """Each H100 as its full GPU, two 3g.40gb shapes and seven 1g.10gb shapes on one counter
    set; the counters go in a slice of their own (the API refuses both in one slice)."""
    sets = [
        {
            "name": f"gpu-{g}-counter-set",
            "counters": _counters("80Gi", H100_SMS, range(MEMORY_SLICES)),
        }
        for g in range(cards)
    ]
    devices = []
    for g in range(cards):
        uuid = f"GPU-{node_name}-{g}"

        devices.append(
            {
                "name": f"gpu-{g}",
                "attributes": _attrs(type="gpu", uuid=uuid, productName=H100),
                "capacity": {"memory": {"value": "80Gi"}},
                "consumesCounters": [
                    {
                        "counterSet": f"gpu-{g}-counter-set",
                        "counters": _counters("80Gi", H100_SMS, range(MEMORY_SLICES)),
                    }
                ],
            }
        )
        devices += [_shape(g, uuid, "3g.40gb", 60, range(s, s + 4)) for s in (0, 4)]
        devices += [_shape(g, uuid, "1g.10gb", 16, range(s, s + 1)) for s in range(7)]
    return [
        _slice(f"{node_name}-counters", node_name, count=2, sharedCounters=sets),
        _slice(f"{node_name}-devices", node_name, count=2, devices=devices),
    ]


def shared_gpu(node_name: str) -> list[dict[str, Any]]:
    device = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "attributes": _attrs(type="gpu", uuid=f"GPU-{node_name}-0", productName=A100),
        "capacity": {
            "memory": {
                "value": "80Gi",
                "requestPolicy": {"default": "10Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
            }
        },
    }
    return [_slice(f"{node_name}-share", node_name, driver=SHARE_DRIVER, devices=[device])]


def device_class(name: str, expression: str, *, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": RESOURCE, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def classes() -> list[dict[str, Any]]:
    typed = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == '
    return [
        device_class("gpu.nvidia.com", typed + '"gpu"'),
        device_class("mig.nvidia.com", typed + '"mig"'),
        device_class(
            "gpu-share.example.com",
            f'device.driver == "{SHARE_DRIVER}"',
            extended="example.com/gpu-share",
        ),
    ]


def claim(
    namespace: str,
    name: str,
    device_class_name: str,
    *,
    count: int = 1,
    selector: str | None = None,
    memory: str | None = None,
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    if memory:
        exactly["capacity"] = {"requests": {"memory": memory}}
    return {
        "apiVersion": RESOURCE,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": exactly}]}},
    }


def pod(
    namespace: str,
    name: str,
    *,
    claim_name: str | None = None,
    resources: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "registry.invalid/gpufrag/none:0",
        "resources": {
            "requests": {"cpu": "1", **(resources or {})},
            "limits": dict(resources or {}),
        },
    }
    spec: dict[str, Any] = {"containers": [container]}
    if claim_name:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim_name}]
        container["resources"]["claims"] = [{"name": "gpus"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
