"""The four verbs as decisions on the cluster view: which nodes can take the pod and why not,
how each scores, which cards a bind takes, and which preemption victims to keep.

The scheduler already checked what it can see (CPU, memory, taints, the device count it is
told); its cache is fresher than this view for those. The filter adds what it cannot see:
the cards' own room in the node's sharing mode (shares, replicas, HAMi cores and memory, MIG
profiles), cards out of service, the GPU model. A node this view does not know yet passes: the
extender has nothing to say about it, and the scheduler's own checks stand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

from models import TaskProfile
from models.analysis import BlockReason
from models.settings import GuardrailSettings
from streams.cluster.view import ClusterView
from streams.extender.assumed import AssumeCache, Assumed
from streams.extender.room import Room
from streams.extender.scores import NodeScorer, extender_range
from streams.fragmentation import masks as mk
from streams.fragmentation.capacity import CapacityIndex, IntArray
from streams.fragmentation.pending import HARD_REASONS
from streams.guardrails.gate import never_evicted
from streams.planners.trial_capacity import Scratch, cards_of

__all__ = ["BindChoice", "Extender", "FilterOutcome", "Victims"]

FGD = "fgd"
EXACT_VICTIMS = 10
"""Victims on one node up to which every subset is weighed (1,024 what-ifs of a few
microseconds each); the scheduler proposes a node's lowest-priority pods, usually a few."""
ROW_LISTS = 8
"""Node lists whose rows are kept (``Extender._rows``)."""

GPU_REASONS = (
    BlockReason.GPU_MODEL,
    BlockReason.GPU_COUNT,
    BlockReason.GPU_SHARE,
    BlockReason.GPU_MEMORY,
    BlockReason.MIG_PROFILE,
)

REASON_TEXT: dict[BlockReason, str] = {
    # in kube-scheduler's FailedScheduling message: short, in gpufrag's words
    BlockReason.GPU_MODEL: "gpufrag: gpu_model (no card of the GPU model the pod asks for)",
    BlockReason.GPU_COUNT: "gpufrag: gpu_count (too few cards with room)",
    BlockReason.GPU_SHARE: "gpufrag: gpu_share (enough free GPU, split across cards)",
    BlockReason.GPU_MEMORY: "gpufrag: gpu_memory (cards with the compute share lack the memory)",
    BlockReason.MIG_PROFILE: "gpufrag: mig_profile (free MIG instances of other profiles)",
}

ObjArray = npt.NDArray[np.object_]
HARD_INDEX = [i for i, r in enumerate(GPU_REASONS) if r in HARD_REASONS]
REASON_TEXTS: ObjArray = np.array([REASON_TEXT[r] for r in GPU_REASONS], dtype=object)


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    passed: tuple[str, ...]
    failed: dict[str, str]
    """Nodes preemption could help on (the cards are taken by pods), with the reason."""
    unresolvable: dict[str, str]
    """Nodes no eviction helps (the GPU model), with the reason."""
    unknown: int = 0
    """Nodes passed because the view does not know them."""


@dataclass(frozen=True, slots=True)
class BindChoice:
    node: str
    cards: tuple[int, ...]
    """Empty where the pod takes no device this view tracks by card (MIG, none)."""


@dataclass(frozen=True, slots=True)
class Victims:
    """The victims to evict on the node preemption keeps, and the PDB violations they make."""

    node: str
    uids: tuple[str, ...]
    pdb_violations: int


class Extender:
    def __init__(self, *, scorer: NodeScorer, assumed: AssumeCache) -> None:
        self.scorer = scorer
        self.assumed = assumed
        self._room: Room | None = None
        self._row_lists: dict[tuple[object, ...], tuple[IntArray, ObjArray]] = {}

    def room(self, view: ClusterView) -> Room:
        room = self._room
        if room is not None and room.current(view, self.assumed):
            return room
        if room is not None and room.extends_to(view, self.assumed):
            room.charge(self.assumed)
            return room
        room = self._room = Room(view, self.assumed)
        return room

    def _rows(self, index: CapacityIndex, names: Sequence[str]) -> tuple[IntArray, ObjArray]:
        """Each name's row (-1: not in the view), and the names as an array, kept for the
        last few node lists: the scheduler sends the same feasible nodes for pod after pod
        (and to prioritize the ones the filter passed); looking up 10,000 names was a third
        of a filter call."""
        key = (tuple(names), id(index), index.names_version)
        found = self._row_lists.get(key)
        if found is None:
            slot = index.slot
            rows = np.fromiter((slot.get(n, -1) for n in names), dtype=np.int64, count=len(names))
            found = self._keep(key, rows, np.array(names, dtype=object))
        return found

    def _keep(
        self, key: tuple[object, ...], rows: IntArray, names: ObjArray
    ) -> tuple[IntArray, ObjArray]:
        self._row_lists[key] = (rows, names)
        if len(self._row_lists) > ROW_LISTS:
            del self._row_lists[next(iter(self._row_lists))]
        return rows, names

    # --- filter ---------------------------------------------------------------------------

    def filter(self, view: ClusterView, task: TaskProfile, names: Sequence[str]) -> FilterOutcome:
        room = self.room(view)
        index = room.index
        req = task.requests
        if req.gpu_count == 0 and not req.mig:
            return FilterOutcome(tuple(names), {}, {})
        masks = mk.masks(index, req, task.gpu_models, task.tolerations, room.free).reasons
        blocked = np.zeros(len(index.active) + 1, dtype=bool)  # the last: unknown nodes
        for r in GPU_REASONS:
            blocked[:-1] |= masks[r]
        rows, name_array = self._rows(index, names)
        first = np.zeros(len(index.active), dtype=np.int64)  # each row's first reason
        for i in range(len(GPU_REASONS) - 1, -1, -1):
            first[masks[GPU_REASONS[i]]] = i
        out = blocked[rows]
        reasons = first[rows[out]]
        hard = np.isin(reasons, HARD_INDEX)
        texts = REASON_TEXTS[reasons]
        failed = dict(zip(name_array[out][~hard].tolist(), texts[~hard].tolist(), strict=True))
        unresolvable = dict(zip(name_array[out][hard].tolist(), texts[hard].tolist(), strict=True))
        unknown = int((rows < 0).sum())
        ok = ~blocked[rows]
        passed = tuple(name_array[ok].tolist())
        # prioritize comes next with the names that passed: their rows are known now
        self._keep((passed, id(index), index.names_version), rows[ok], name_array[ok])
        return FilterOutcome(passed, failed, unresolvable, unknown)

    # --- prioritize -----------------------------------------------------------------------

    def prioritize(
        self, view: ClusterView, task: TaskProfile, names: Sequence[str]
    ) -> list[tuple[str, int]]:
        """Each node's score, 0..10; nodes the view does not know score 0."""
        room = self.room(view)
        rows, _ = self._rows(room.index, names)
        known = np.flatnonzero(rows >= 0)
        scores = np.zeros(len(names), dtype=np.int64)
        if len(known):
            raw = self.scorer.raw(room, task, rows[known])
            scores[known] = extender_range(raw)
        return list(zip(names, scores.tolist(), strict=True))

    # --- bind -----------------------------------------------------------------------------

    def choose_cards(self, view: ClusterView, task: TaskProfile, node: str) -> BindChoice:
        """The cards the pod takes on ``node``: under fgd, for a share, the one whose landing
        leaves the node least fragmented (lowest index among equals); otherwise, and for whole
        cards, the device plugin's tightest. ValueError (said to the scheduler, which retries
        the pod) where the node has no room for it now: a bind since the filter took it."""
        room = self.room(view)
        row = room.index.slot.get(node)
        req = task.requests
        if row is None or (req.gpu_count == 0 and not req.mig):
            return BindChoice(node, ())
        if self.scorer.name != FGD:
            # the other policies leave the card to the device plugin's rule, the tightest
            # card with room (the simulator's default card choice)
            tightest = room.tightest(row, req)
            if tightest is None:
                raise ValueError(f"node {node} has no room for {task.key} any more")
            return BindChoice(node, tightest)
        landings = room.landings(row, req)
        if not landings:
            raise ValueError(f"node {node} has no room for {task.key} any more")
        best = min(landings, key=lambda landing: (landing.frag_after_milli, landing.cards))
        return BindChoice(node, best.cards)

    def assume(self, task: TaskProfile, choice: BindChoice, *, now_s: float) -> None:
        self.assumed.add(
            Assumed(
                key=task.key,
                node=choice.node,
                request=task.requests,
                cards=choice.cards,
                at_s=now_s,
            )
        )

    # --- preempt --------------------------------------------------------------------------

    def preempt(
        self,
        view: ClusterView,
        task: TaskProfile,
        proposed: Mapping[str, tuple[Sequence[str], int]],
        *,
        guardrails: GuardrailSettings,
    ) -> list[Victims]:
        """Of the scheduler's candidates (node -> victim UIDs, PDB violations), the one whose
        victims violate the fewest PodDisruptionBudgets (as the scheduler counted them for
        its whole set), then, narrowed to those the pod needs gone, leave the node least
        fragmented with the pod on it (``_narrowed``); [] when none can be kept.

        A candidate is dropped when a victim is one the guardrails protect (protected
        namespace, exempt label, priority gap: evicting the others would not free what the
        scheduler counted on) or one this view has not seen. A node whose
        release the planners do not model (MIG or HAMi cards: ``NodeRoom``) keeps the
        scheduler's set and comes after every node that could be weighed."""
        by_uid = {t.uid: t for t in view.tasks.values() if t.uid}
        scratch = Scratch(view, self.room(view).free)
        ranked: list[tuple[int, float, int, str, Victims]] = []
        for node, (uids, pdb) in proposed.items():
            victims = [by_uid.get(uid) for uid in uids]
            if any(v is None or self._protected(v, task, guardrails) for v in victims):
                continue
            held = [v for v in victims if v is not None]
            narrowed = self._narrowed(view, scratch, node, task, held)
            if narrowed is None:
                whole = Victims(node, tuple(uids), pdb)
                ranked.append((pdb, float("inf"), len(held), node, whole))
                continue
            frag, kept = narrowed
            keep = tuple(v.uid for v in kept)
            ranked.append((pdb, frag, len(kept), node, Victims(node, keep, min(pdb, len(keep)))))
        ranked.sort(key=lambda r: r[:4])
        return [ranked[0][4]] if ranked else []

    @staticmethod
    def _narrowed(
        view: ClusterView,
        scratch: Scratch,
        node: str,
        task: TaskProfile,
        victims: list[TaskProfile],
    ) -> tuple[float, list[TaskProfile]] | None:
        """The victims to evict on ``node`` and the node's fragment once ``task`` is on it;
        None where the node's release is not modelled, or where this view sees no room even
        with every victim gone (the scheduler's set then stands).

        Up to ``EXACT_VICTIMS`` victims every subset is tried, and the one leaving the least
        fragment wins, then the fewest pods, then the lowest priorities; past that, victims
        are kept back one by one (highest priority and largest first) while the pod still
        fits."""
        row = scratch.index.slot.get(node)
        room = None if row is None else scratch.room(row)
        held = [(v, cards_of(view, v)) for v in victims]
        if room is None or any(cards is None for _, cards in held):
            return None
        release = [(v, cards) for v, cards in held if cards is not None]
        req = task.requests
        if not room.without(release).fits(req):
            return None
        if len(release) > EXACT_VICTIMS:
            order = sorted(release, key=lambda p: (-p[0].priority, -p[0].requests.total_gpu_milli))
            for pair in order:
                trial = [p for p in release if p is not pair]
                if room.without(trial).fits(req):
                    release = trial
            return scratch.frag_milli(room.without(release).placed(req)), [v for v, _ in release]
        best: tuple[float, int, int, list[TaskProfile]] | None = None
        for size in range(len(release) + 1):
            for subset in combinations(release, size):
                freed = room.without(list(subset))
                if not freed.fits(req):
                    continue
                frag = scratch.frag_milli(freed.placed(req))
                key = (frag, size, sum(v.priority for v, _ in subset), [v for v, _ in subset])
                if best is None or key[:3] < best[:3]:
                    best = key
        assert best is not None  # the full set fits
        return best[0], best[3]

    @staticmethod
    def _protected(victim: TaskProfile, task: TaskProfile, s: GuardrailSettings) -> bool:
        if never_evicted(s, pod=victim.key, labels=victim.labels) is not None:
            return True
        return task.priority - victim.priority < s.min_priority_gap
