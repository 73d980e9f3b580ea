"""Near memory limit: a pod whose own GPU memory has stayed above a share of its enforced limit
(HAMi's gpumem, CUDA MPS's pinned device memory) for a while.

Such a pod gets out-of-memory errors while its card still shows free memory, so card-level
figures never warn of it. The pod's figure is its own (NVML's per-process memory, or the one
pod of a card or MIG instance); a card shared without per-pod figures gives none, and no signal.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from models import Scope, Severity, Signal, SignalKind
from models.settings import NearMemoryLimitSettings
from streams.cluster.book import SignalBook
from streams.cluster.view import ClusterView, TaskChange
from streams.detectors.detector import Detector

KIND = SignalKind.NEAR_MEMORY_LIMIT


@dataclass(frozen=True, slots=True)
class _Use:
    node: str
    gpu_index: int
    used_mib: float


class NearMemoryLimit(Detector[NearMemoryLimitSettings]):
    name = "near_memory_limit"

    def __init__(self, view: ClusterView, book: SignalBook, settings: NearMemoryLimitSettings):
        super().__init__(view, book, settings)
        self.use: dict[str, _Use] = {}
        """Each pod's latest own figure (its largest over the cards it is on)."""
        self.since: dict[str, datetime] = {}
        """Pods above the threshold, and since when (event time)."""

    @property
    def _hold(self) -> timedelta:
        return timedelta(seconds=self.settings.for_s)

    def on_node(self, name: str) -> list[Signal]:
        profile = self.view.nodes.get(name)
        figures = profile.pod_memory() if profile is not None else {}
        seen = {pod: _Use(name, index, mib) for pod, (index, mib) in figures.items()}
        out: list[Signal] = []
        for pod in [p for p, u in self.use.items() if u.node == name and p not in seen]:
            del self.use[pod]
            out += self._check(pod)
        for pod, use in seen.items():
            self.use[pod] = use
            out += self._check(pod)
        return out

    def on_task(self, key: str, change: TaskChange) -> list[Signal]:
        del change
        if key not in self.use and key not in self.since:
            return []
        if key not in self.view.tasks:
            self.use.pop(key, None)
        return self._check(key)

    def advance(self, at: datetime) -> list[Signal]:
        out: list[Signal] = []
        for pod, since in sorted(self.since.items()):
            if at - since >= self._hold:
                out += self._open(pod, since)
        return out

    def next_due(self) -> datetime | None:
        waiting = [
            since + self._hold
            for pod, since in self.since.items()
            if not self.book.is_open(KIND, Scope.POD, pod)
        ]
        return min(waiting) if waiting else None

    def clock_state(self) -> dict[str, object]:
        return {"since": {pod: t.isoformat() for pod, t in sorted(self.since.items())}}

    def restore_clock(self, state: dict[str, object]) -> None:
        since = state.get("since")
        if isinstance(since, dict):
            self.since = {str(p): datetime.fromisoformat(str(t)) for p, t in since.items()}

    def _limit(self, pod: str) -> int | None:
        task = self.view.tasks.get(pod)
        return None if task is None else task.gpu_memory_limit_mib

    def _check(self, pod: str) -> list[Signal]:
        use, limit, now = self.use.get(pod), self._limit(pod), self.view.now
        if use is None or not limit or now is None:
            self.since.pop(pod, None)
            return self.book.resolved(KIND, Scope.POD, pod)
        if use.used_mib * 100.0 < self.settings.threshold_pct * limit:
            self.since.pop(pod, None)
            return self.book.resolved(KIND, Scope.POD, pod)
        since = self.since.setdefault(pod, now)
        return self._open(pod, since) if now - since >= self._hold else []

    def _open(self, pod: str, since: datetime) -> list[Signal]:
        use, limit = self.use.get(pod), self._limit(pod)
        if use is None or not limit:
            return []
        pct = use.used_mib / limit * 100.0
        return self.book.opened(
            KIND,
            Scope.POD,
            pod,
            severity=Severity.WARNING,
            summary=(
                f"{pod}: {use.used_mib:.0f} of its {limit} MiB GPU memory limit ({pct:.0f} %) on "
                f"{use.node} GPU {use.gpu_index} since {since.isoformat()}"
            ),
            evidence={
                "node": use.node,
                "gpu_index": use.gpu_index,
                "used_mib": round(use.used_mib, 1),
                "limit_mib": limit,
                "used_pct": round(pct, 1),
                "above_since": since.isoformat(),
                "threshold_pct": self.settings.threshold_pct,
            },
        )
