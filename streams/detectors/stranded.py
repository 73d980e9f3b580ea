"""Stranded GPUs: a node with idle GPUs but too little CPU or memory left for any typical GPU
pod, so its GPUs look free and are not."""

from __future__ import annotations

from collections.abc import Mapping

from models import Scope, Severity, Signal, SignalKind
from models.settings import StrandedGpusSettings
from streams.cluster.book import SignalBook
from streams.cluster.view import ClusterView
from streams.detectors.detector import Detector


class StrandedGpus(Detector[StrandedGpusSettings]):
    name = "stranded_gpus"

    def __init__(self, view: ClusterView, book: SignalBook, settings: StrandedGpusSettings):
        super().__init__(view, book, settings)
        self.stranded: dict[str, dict[str, object]] = {}
        self.idle_by_group: dict[tuple[str, str], int] = {}
        """Idle milli-GPU on the stranded nodes by (pool, GPU model), kept with ``stranded``
        so a report reads it without a pass over the nodes."""
        self._counted: dict[str, tuple[tuple[str, str], int]] = {}
        """Each stranded node's group and idle milli-GPU as added to ``idle_by_group``."""

    def on_node(self, name: str) -> list[Signal]:
        i = self.view.index.slot.get(name)
        return self._set(name, None if i is None else self._evidence(i))

    def on_typical(self) -> list[Signal]:
        out: list[Signal] = []
        for name, i in list(self.view.index.slot.items()):
            out += self._set(name, self._evidence(i))
        return out

    def counts(self) -> Mapping[str, int]:
        return {
            "stranded_nodes": len(self.stranded),
            "stranded_gpu_milli": sum(self.idle_by_group.values()),
        }

    def figures(self) -> Mapping[tuple[str, ...], float]:
        return {("stranded_milli", *group): milli for group, milli in self.idle_by_group.items()}

    def _recount(self, name: str, evidence: dict[str, object] | None) -> None:
        old = self._counted.pop(name, None)
        if old is not None:
            left = self.idle_by_group[old[0]] - old[1]
            if left:
                self.idle_by_group[old[0]] = left
            else:
                del self.idle_by_group[old[0]]
        if evidence is None:
            return
        ix = self.view.index
        group = ix.group_of(ix.slot[name])
        idle = evidence["idle_gpu_milli"]
        assert isinstance(idle, int)
        self._counted[name] = (group, idle)
        self.idle_by_group[group] = self.idle_by_group.get(group, 0) + idle

    def _evidence(self, i: int) -> dict[str, object] | None:
        ix = self.view.index
        smallest = self.view.smallest_gpu_pod()
        idle = int(ix.node_idle[i])
        cpu_free = int(ix.cpu_free[i])
        mem_free = int(ix.mem_free[i])
        if smallest is None or idle == 0 or ix.unschedulable[i]:
            return None
        lacks = []
        if cpu_free < smallest.cpu_milli:
            lacks.append("cpu")
        if mem_free < smallest.memory_mib:
            lacks.append("memory")
        if not lacks:
            return None
        return {
            "idle_gpu_milli": idle,
            "cpu_milli_free": cpu_free,
            "memory_mib_free": mem_free,
            "lacks": lacks,
            "smallest_gpu_pod_cpu_milli": smallest.cpu_milli,
            "smallest_gpu_pod_memory_mib": smallest.memory_mib,
            "pool": ix.pools[i],
        }

    def _set(self, name: str, evidence: dict[str, object] | None) -> list[Signal]:
        self._recount(name, evidence)
        if evidence is None:
            self.stranded.pop(name, None)
            return self.book.resolved(SignalKind.STRANDED_GPUS, Scope.NODE, name)
        self.stranded[name] = evidence
        lacks = " and ".join(evidence["lacks"])  # type: ignore[arg-type]
        return self.book.opened(
            SignalKind.STRANDED_GPUS,
            Scope.NODE,
            name,
            severity=Severity.WARNING,
            summary=(
                f"{name}: {evidence['idle_gpu_milli']} milli-GPU idle but too little {lacks} "
                "for any typical GPU pod"
            ),
            evidence=evidence,
        )
