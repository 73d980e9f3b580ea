"""Cluster fragmentation: much of the cluster's idle GPU is fragment for the typical pods (the
FGD measure), with hysteresis so a ratio hovering at the threshold does not flap."""

from __future__ import annotations

from datetime import datetime

from models import MILLI_PER_GPU, Scope, Severity, Signal, SignalKind
from models.settings import FragmentationSettings
from streams.detectors.detector import Detector

CLUSTER = "cluster"


class ClusterFragmentationDetector(Detector[FragmentationSettings]):
    name = "fragmentation"

    def advance(self, at: datetime) -> list[Signal]:
        return self._check()

    def flush(self) -> list[Signal]:
        return self._check()

    def _check(self) -> list[Signal]:
        ix = self.view.index
        ratio = ix.frag_ratio_pct
        idle_gpus = ix.idle_milli / MILLI_PER_GPU
        s = self.settings
        if self.book.is_open(SignalKind.FRAGMENTATION, Scope.CLUSTER, CLUSTER):
            if ratio < s.ratio_resolve_pct or idle_gpus < s.min_idle_gpus:
                return self.book.resolved(SignalKind.FRAGMENTATION, Scope.CLUSTER, CLUSTER)
            return []
        if ratio < s.ratio_open_pct or idle_gpus < s.min_idle_gpus:
            return []
        frag_gpus = ix.frag_milli / MILLI_PER_GPU
        return self.book.opened(
            SignalKind.FRAGMENTATION,
            Scope.CLUSTER,
            CLUSTER,
            severity=Severity.WARNING,
            summary=(
                f"{ratio:.1f} % of idle GPU ({frag_gpus:.1f} of {idle_gpus:.1f} GPUs) is "
                "fragment for the typical pods"
            ),
            evidence={
                "frag_ratio_pct": round(ratio, 4),
                "frag_amount_pct": round(ix.frag_amount_pct, 4),
                "idle_gpus": idle_gpus,
                "frag_gpus": round(frag_gpus, 4),
                "typical_pods": len(self.view.typical),
            },
        )
