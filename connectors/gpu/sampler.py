"""The NVML node sampler: periodic GPU samples for nodes without dcgm-exporter.

On a machine without a GPU it says so in one line and, per setting, returns or idles (a
DaemonSet pod on a CPU node should neither crash-loop nor spin). A card's pod comes from the
kubelet's pod-resources assignment where the kubelet answers, else from its processes' cgroups.

One card's failure costs that card's sample for the round, never the others': a card NVML
cannot read is counted and logged once until it reads again (the driver's problem, nothing to
keep), and a reading that makes no valid sample (a value out of range, or any exception while
mapping it) is refused through the process's ``RefusalLog`` (source ``nvml``) with the reading
as its raw form. Before, one card's impossible reading raised out of the round, and the
supervisor restarted the sampler every round without a sample from any card.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Literal, Protocol

from connectors.gpu.cgroup import pod_uid_of_pid
from connectors.gpu.nvml import Nvml, NvmlUnavailable
from connectors.gpu.podresources import GpuOwners, KubeletAssignments, assigned
from connectors.gpu.reading import NvmlReading, PodRef, Refused, checked_sample
from connectors.refusals import RefusalLog
from models import Envelope, GpuSampleEvent

log = logging.getLogger(__name__)
NoGpu = Literal["exit", "idle"]


class NvmlDevices(Protocol):
    """What a round reads; ``Nvml`` on a machine, a fake in tests."""

    def __len__(self) -> int: ...
    def poll_xids(self) -> dict[str, int]: ...
    def read(self, index: int) -> NvmlReading: ...
    def close(self) -> None: ...


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
        refusals: RefusalLog,
        pod_of_pid: Callable[[int], PodRef | None] = pod_by_cgroup,
        source: str = "nvml",
        pod_resources: KubeletAssignments | None = None,
        open_nvml: Callable[[], NvmlDevices] = Nvml,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.node = node
        self.interval_s = interval_s
        self.on_no_gpu = on_no_gpu
        self.emit = emit
        self.refusals = refusals
        self.pod_of_pid = pod_of_pid
        self.source = source
        self.pod_resources = pod_resources
        self.open_nvml = open_nvml
        self.unavailable: str | None = None
        self.samples = 0
        self.read_errors = 0
        self._failing: set[str] = set()

    async def run(self, *, stop: asyncio.Event, max_rounds: int | None = None) -> None:
        try:
            nvml = await asyncio.to_thread(self.open_nvml)
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
            if self.pod_resources is not None:
                await self.pod_resources.close()

    async def _round(self, nvml: NvmlDevices) -> None:
        try:
            xids = await asyncio.to_thread(nvml.poll_xids)
        except Exception as exc:  # XIDs are missed this round, samples still go out
            self._failed("xid events", exc)
            xids = {}
        owners = None if self.pod_resources is None else await self.pod_resources.owners()
        at = datetime.now(UTC)
        for index in range(len(nvml)):
            try:
                reading = await asyncio.to_thread(nvml.read, index)
            except Exception as exc:  # a card that fell off the bus must not silence the rest
                self._failed(f"gpu {index}", exc)
                continue
            self._recovered(f"gpu {index}")
            env = self._envelope(reading, xids, owners, at)
            if env is None:
                continue
            await self.emit(env)  # the consumer's failure is the source's: the supervisor's
            self.samples += 1

    def _envelope(
        self,
        reading: NvmlReading,
        xids: dict[str, int],
        owners: GpuOwners | None,
        at: datetime,
    ) -> Envelope | None:
        """The card's envelope, or None with the reading refused."""
        try:
            if reading.uuid is not None and reading.uuid in xids:
                reading = replace(reading, xid=xids[reading.uuid])
            mine = assigned(owners or {}, (reading.uuid, *reading.mig_uuids))
            made = checked_sample(self.node, reading, pod_of_pid=self.pod_of_pid, assigned=mine)
            if not isinstance(made, Refused):
                return Envelope.wrap(GpuSampleEvent(sample=made), event_time=at, source=self.source)
        except Exception as exc:  # our bug on a reading nobody foresaw: costs this card
            why = f"{type(exc).__name__}: {str(exc)[:200]}"  # one line, not a whole repr
            made = Refused("unexpected", f"GPU {reading.index}: {why}")
        self.refusals.refuse(
            source=self.source,
            reason=made.reason,
            detail=f"{self.node} {made.detail}",
            raw=repr(reading),
        )
        return None

    def _failed(self, what: str, exc: Exception) -> None:
        """Counted every time, logged once until it reads again (NVML fails per card)."""
        self.read_errors += 1
        if what not in self._failing:
            self._failing.add(what)
            log.warning("NVML could not read %s on %s: %s", what, self.node, exc)

    def _recovered(self, what: str) -> None:
        if what in self._failing:
            self._failing.discard(what)
            log.info("NVML reads %s on %s again", what, self.node)
