"""The NVML node sampler: periodic GPU samples for nodes without dcgm-exporter.

On a machine without a GPU it says so in one line and, per setting, returns or idles (a
DaemonSet pod on a CPU node should neither crash-loop nor spin).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Literal

from connectors.gpu.cgroup import pod_uid_of_pid
from connectors.gpu.nvml import Nvml, NvmlUnavailable
from connectors.gpu.reading import PodRef, to_sample
from models import Envelope, GpuSampleEvent

log = logging.getLogger(__name__)
NoGpu = Literal["exit", "idle"]


def pod_by_cgroup(pid: int) -> PodRef | None:
    """The pod UID from the process's cgroup; names come from the kube watcher, not from here."""
    found = pod_uid_of_pid(pid)
    if found is None:
        return None
    uid, container = found
    return PodRef(namespace="", pod=f"uid:{uid}", container=container)


class NvmlSampler:
    def __init__(
        self,
        *,
        node: str,
        interval_s: float,
        on_no_gpu: NoGpu,
        emit: Callable[[Envelope], Awaitable[None]],
        pod_of_pid: Callable[[int], PodRef | None] = pod_by_cgroup,
        source: str = "nvml",
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.node = node
        self.interval_s = interval_s
        self.on_no_gpu = on_no_gpu
        self.emit = emit
        self.pod_of_pid = pod_of_pid
        self.source = source
        self.unavailable: str | None = None
        self.samples = 0

    async def run(self, *, stop: asyncio.Event, max_rounds: int | None = None) -> None:
        try:
            nvml = await asyncio.to_thread(Nvml)
        except NvmlUnavailable as exc:
            self.unavailable = str(exc)
            log.warning("%s; %s", exc, "idling" if self.on_no_gpu == "idle" else "exiting")
            if self.on_no_gpu == "idle":
                await stop.wait()
            return
        try:
            rounds = 0
            while not stop.is_set() and (max_rounds is None or rounds < max_rounds):
                await self._round(nvml)
                rounds += 1
                if max_rounds is not None and rounds >= max_rounds:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval_s)
        finally:
            await asyncio.to_thread(nvml.close)

    async def _round(self, nvml: Nvml) -> None:
        xids = await asyncio.to_thread(nvml.poll_xids)
        at = datetime.now(UTC)
        for index in range(len(nvml)):
            reading = await asyncio.to_thread(nvml.read, index)
            if reading.uuid is not None and reading.uuid in xids:
                reading = replace(reading, xid=xids[reading.uuid])
            sample = to_sample(self.node, reading, pod_of_pid=self.pod_of_pid)
            await self.emit(
                Envelope.wrap(GpuSampleEvent(sample=sample), event_time=at, source=self.source)
            )
            self.samples += 1
