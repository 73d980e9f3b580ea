"""Cards that do little: whole cards held by small work, and allocated cards left idle.

The join keeps each card's quiet run (``streams/profiles/quiet.py``): how long its activity has
stayed low without a gap in its readings, with the peaks of memory and activity. A pod whose
whole cards have all been quiet for the window is

- held by small work when their peak memory stays below ``memory_pct`` of the card: a
  time-sliced replica or a MIG instance would serve it, and the rest of the card would serve
  others;
- idle when their peak activity stays below ``idle_activity_pct``, whatever memory it holds
  (a notebook parked on a loaded model). A shared card allocated and idle counts too: each pod
  on it is told.

One signal per pod, resolved when a card of it wakes up, has a gap, or the pod leaves. The
state is the view's: a restarted host finds the same pods from the profiles it restores.
"""

from __future__ import annotations

from models import GpuState, Scope, Severity, Signal, SignalKind
from models.cards import SharingMode, card_slices
from models.settings import IdleGpuSettings
from streams.cluster.book import SignalBook
from streams.cluster.view import ClusterView
from streams.detectors.detector import Detector

KIND = SignalKind.IDLE_GPU
MIG_MEMORY_SHARE = {
    7: {1: 1 / 8, 2: 2 / 8, 3: 4 / 8, 4: 4 / 8, 7: 1.0},
    4: {1: 1 / 4, 2: 2 / 4, 4: 1.0},
}
"""Compute slices of the card -> {slices of an instance: its share of the card's memory}: an
80 GB card's 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb; an A30's 1g.6gb, 2g.12gb, 4g.24gb."""
MIG_CAPABLE = ("A100", "A30", "H100", "H200", "H20", "B200", "GB200", "GH200")
HEADROOM = 1.2
"""A smaller share must hold the peak with a fifth to spare: a peak measured over half an
hour is not the most the work will ever ask for."""


class IdleGpu(Detector[IdleGpuSettings]):
    name = "idle_gpu"

    def __init__(self, view: ClusterView, book: SignalBook, settings: IdleGpuSettings):
        super().__init__(view, book, settings)
        self.flagged: dict[str, set[str]] = {}
        """Node -> pods with an open signal, to resolve those no longer found."""

    def on_node(self, name: str) -> list[Signal]:
        profile = self.view.nodes.get(name)
        quiet = profile is not None and any(g.quiet_held for g in profile.gpus)
        if not quiet and name not in self.flagged:
            return []  # every bind of a replay comes here: no card held quiet, nothing to do
        found: dict[str, tuple[str, dict[str, object]]] = {}
        if profile is not None and quiet:
            cards: dict[str, list[GpuState]] = {}
            for g in profile.gpus:
                for pod in g.pods:
                    cards.setdefault(pod, []).append(g)
            for pod, held in sorted(cards.items()):
                verdict = self._verdict(pod, held, profile.gpu_model)
                if verdict is not None:
                    found[pod] = verdict
        out: list[Signal] = []
        for pod in sorted(self.flagged.get(name, set()) - set(found)):
            out += self.book.resolved(KIND, Scope.POD, pod)
        for pod, (summary, evidence) in found.items():
            out += self.book.opened(
                KIND, Scope.POD, pod, severity=Severity.INFO, summary=summary, evidence=evidence
            )
        if found:
            self.flagged[name] = set(found)
        else:
            self.flagged.pop(name, None)
        return out

    def _verdict(
        self, pod: str, cards: list[GpuState], model: str | None
    ) -> tuple[str, dict[str, object]] | None:
        s = self.settings
        if not all(
            g.quiet_held and g.quiet_peak_activity_pct is not None and g.healthy for g in cards
        ):
            return None  # not quiet for the window, or out of service (gpu_unhealthy says so)
        activity = max(g.quiet_peak_activity_pct or 0.0 for g in cards)
        whole = all(_whole(g, pod) for g in cards)
        share = _peak_share(cards)
        evidence: dict[str, object] = {
            "gpus": [g.index for g in cards],
            "whole_cards": whole,
            "window_s": s.window_s,
            "quiet_since": min(g.quiet_since for g in cards if g.quiet_since).isoformat(),
            "peak_memory_mib": _peak_mib(cards),
            "peak_memory_pct": None if share is None else round(100 * share, 1),
            "peak_activity_pct": round(activity, 1),
        }
        where = f"{len(cards)} card(s) ({', '.join(str(g.index) for g in cards)})"
        if whole and share is not None and 100 * share < s.memory_pct:
            evidence["reason"] = "small_work"
            evidence["would_serve"] = _smaller_share(share, model)
            return (
                f"{pod} holds {where} whole with at most {100 * share:.0f} % of their memory "
                f"and {activity:.0f} % activity for {s.window_s / 60:.0f} min",
                evidence,
            )
        if activity < s.idle_activity_pct:
            evidence["reason"] = "idle"
            return (
                f"{pod}: {where} allocated and idle ({activity:.1f} % activity) for "
                f"{s.window_s / 60:.0f} min",
                evidence,
            )
        return None


def _whole(g: GpuState, pod: str) -> bool:
    return (
        g.mode in (SharingMode.EXCLUSIVE, SharingMode.MILLI)
        and g.pods == (pod,)
        and g.free_units == 0
    )


def _peak_mib(cards: list[GpuState]) -> float | None:
    peaks = [g.quiet_peak_mib for g in cards]
    return None if any(p is None for p in peaks) else max(p for p in peaks if p is not None)


def _peak_share(cards: list[GpuState]) -> float | None:
    """The largest share of a card's memory any of them held at its peak; None if unknown."""
    shares = []
    for g in cards:
        if g.quiet_peak_mib is None or not g.memory_total_mib:
            return None
        shares.append(g.quiet_peak_mib / g.memory_total_mib)
    return max(shares) if shares else None


def _smaller_share(share: float, model: str | None) -> dict[str, object]:
    """The smallest shared capacity with the peak's memory (and a fifth to spare)."""
    need = share * HEADROOM
    replicas = next((r for r in (8, 4, 2) if 1 / r >= need), 1)
    out: dict[str, object] = {"time_sliced_replicas": replicas}
    if model is not None and model.startswith(MIG_CAPABLE):
        shares = MIG_MEMORY_SHARE[card_slices(model)]
        fits = [g for g, m in sorted(shares.items()) if m >= need]
        out["mig_compute_slices"] = fits[0]
        out["mig_memory_share"] = shares[fits[0]]
    return out
