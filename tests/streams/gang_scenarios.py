"""A gang waiting for room, as the pod watcher maps real-shaped pods: two 8-GPU nodes held
by low-priority batch pods, and a two-member Volcano gang of 4-GPU workers that fits the
cluster's free total but not together. Shared by the store and `explain` tests and the
codec's.

    gpu-1: batch-a (2 GPUs, priority 5)                      6 free
    gpu-2: batch-b (4 GPUs, priority 5), batch-c (2, prio 0)  2 free

8 GPUs free for the 8 the gang needs, but once llm-w0 takes 4 on gpu-1 no node has 4 left
for llm-w1. Evicting one pod makes room on either node; batch-c has the lowest priority, so
the smallest reclaim evicts it and places llm-w1 on gpu-2. Every batch pod asks 2 GPUs or
more, which is more than a consolidation moves (one card), so reclaim is the only plan.
"""

from __future__ import annotations

from connectors.kube.watch.pods import pod_from_kube
from models import Envelope, PodEvent
from tests.kube_fake.objects import T0, pod
from tests.streams.quota_scenarios import GROUP, gpu_node

__all__ = ["GANG", "GANG_KEY", "MEMBERS", "gang_pod", "steps"]

GANG = "llm"
GANG_KEY = f"ml/gang:{GANG}"
MEMBERS = ("ml/llm-w0", "ml/llm-w1")


def gang_pod(
    name: str,
    *,
    gpus: int,
    priority: int,
    on: str | None = None,
    gang: tuple[str, int] | None = None,
) -> Envelope:
    """A GPU pod in namespace ml with a priority, in a Volcano gang of ``gang[1]`` members
    when given (its group annotation, the PodGroup's minMember as the watcher looks it up)."""
    raw = pod(
        name,
        "ml",
        gpus=gpus,
        node=on,
        phase="Running" if on else "Pending",
        priority=priority,
        annotations=None if gang is None else {GROUP: gang[0]},
        scheduler_name="volcano" if gang else None,
    )
    size = None if gang is None else gang[1]
    p = pod_from_kube(raw, gangs=lambda ns, g: size, now=T0)
    return Envelope.wrap(PodEvent(change="upsert", pod=p), event_time=T0, source="kube")


def steps() -> list[list[Envelope]]:
    """The cluster with its batch pods, then the gang's two members."""
    return [
        [
            gpu_node("gpu-1"),
            gpu_node("gpu-2"),
            gang_pod("batch-a", gpus=2, priority=5, on="gpu-1"),
            gang_pod("batch-b", gpus=4, priority=5, on="gpu-2"),
            gang_pod("batch-c", gpus=2, priority=0, on="gpu-2"),
        ],
        [gang_pod(key.split("/")[1], gpus=4, priority=100, gang=(GANG, 2)) for key in MEMBERS],
    ]
