"""GPU out-of-memory exits found in termination messages: the real PyTorch message captured on
an H200 (tests/connectors/gpu/fixtures/h200), HAMi's in-container line, and what is not one."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from kubernetes_asyncio.client import (
    V1ContainerState,
    V1ContainerStateTerminated,
    V1ContainerStatus,
)

from connectors.kube.gpu.oom_messages import CUDA_OOM, gpu_oom_reason
from connectors.kube.watch.pods import oom_kills
from connectors.kube.watch.scheduling import oom_event
from tests.kube_fake.objects import T0, pod
from tests.paths import H200_DIR

TORCH = json.loads((H200_DIR / "nvml_oom.txt").read_text())
REAL = f"{TORCH['torch_oom_type']}: {TORCH['torch_oom_message']}"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (REAL, CUDA_OOM),
        ("RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be ...", CUDA_OOM),
        (
            "[HAMI-core ERROR (pid:41 thread=1 allocator.c:49)]: "
            "Device 0 OOM 9663676416 / 8589934592",
            CUDA_OOM,
        ),
        ("cudaErrorMemoryAllocation: out of memory", CUDA_OOM),
        ("Traceback ...\nValueError: bad batch size", None),
        ("Killed", None),
        ("", None),
        (None, None),
    ],
)
def test_gpu_oom_messages(message: str | None, reason: str | None) -> None:
    assert gpu_oom_reason(message) == reason


def exited(message: str, *, reason: str = "Error", code: int = 1) -> V1ContainerStatus:
    done = V1ContainerState(
        terminated=V1ContainerStateTerminated(
            exit_code=code,
            reason=reason,
            message=message,
            finished_at=datetime(2026, 12, 2, 3, 4, tzinfo=UTC),
            started_at=T0,
            container_id="containerd://ccc",
        )
    )
    return V1ContainerStatus(
        name="trainer",
        image="nvcr.io/nvidia/pytorch:25.09-py3",
        image_id="sha256:abc",
        ready=False,
        restart_count=1,
        state=V1ContainerState(),
        last_state=done,
    )


def test_a_container_that_exited_out_of_gpu_memory_is_a_gpu_oom_event() -> None:
    p = pod("ft", gpus=1, node="n1", phase="Running", container_statuses=[exited(REAL)])
    (kill,) = oom_kills(p)
    assert kill.reason == CUDA_OOM
    event = oom_event(kill, namespace="ml", name="ft", uid="u", node="n1")
    assert event.reason == "CudaOOM" and event.node == "n1"
    assert event.message.startswith("container trainer was out of GPU memory (exit code 1): ")
    assert "CUDA out of memory. Tried to allocate 100.00 GiB" in event.message


def test_a_container_that_failed_otherwise_is_no_oom() -> None:
    p = pod("ft", gpus=1, node="n1", phase="Running", container_statuses=[exited("bad config")])
    assert oom_kills(p) == []
