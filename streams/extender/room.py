"""The free capacity the extender decides on: the view's, less what it bound and the view does
not show yet; and what one request would leave of one node's room.

The per-node what-if works on a scratch copy of the free arrays, one row at a time (the row is
put back after), so scoring a node costs its own few cards, not a copy of the cluster: at
10,000 nodes a copy of the free arrays is 3 MB, and a prioritize call may score them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models import ResourceRequest
from streams.cluster.view import ClusterView
from streams.extender.assumed import AssumeCache, Assumed
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.masks import Free
from streams.fragmentation.measure import RULE_FIXED, RULE_MIG_SINGLE, NodeState
from streams.fragmentation.pending import take
from streams.fragmentation.request_class import class_key

RequestKey = tuple[object, ...]


def request_key(req: ResourceRequest) -> RequestKey:
    """What of a request a node's what-if depends on: its GPU class and its CPU (memory is
    not in a node's state)."""
    return (req.cpu_milli, *class_key(req, (), ()))


@dataclass(frozen=True, slots=True)
class Landing:
    """One way a request lands on a node: the cards it takes and the node's fragment after."""

    cards: tuple[int, ...]
    frag_after_milli: float


class Room:
    """The free capacity at one (index version, assumptions) pair, and what-ifs on it."""

    def __init__(self, view: ClusterView, assumed: AssumeCache) -> None:
        self.view = view
        self.index: CapacityIndex = view.index
        self.key = (id(view.index), view.index.version, assumed.generation)
        self.changed: set[int] = set()
        """Rows whose free figures differ from the index's (an assumed pod is on them)."""
        self.applied: dict[str, Assumed] = {}
        self.free = Free.of(self.index)
        self._scratch: Free | None = None
        self.charge(assumed)

    def current(self, view: ClusterView, assumed: AssumeCache) -> bool:
        return self.key == (id(view.index), view.index.version, assumed.generation)

    def extends_to(self, view: ClusterView, assumed: AssumeCache) -> bool:
        """Whether only assumptions were added since (a bind, the view unchanged): then
        charging those few is enough, instead of a copy of the cluster's free arrays (3 MB at
        10,000 nodes) and every assumption again for each pod the scheduler binds."""
        same_view = self.key[:2] == (id(view.index), view.index.version)
        return same_view and all(assumed.get(k) is a for k, a in self.applied.items())

    def charge(self, assumed: AssumeCache) -> None:
        """Charge the assumptions not charged yet."""
        fresh = [a for a in assumed if self.applied.get(a.key) is not a]
        if fresh and self.free.cpu is self.index.cpu_free:
            self.free = self.free.copy()  # the index's own arrays are never written
        for item in fresh:
            self.applied[item.key] = item
            row = self.index.slot.get(item.node)
            if row is None:
                continue  # a node gone since: nothing left to charge
            copies = [self.free] if self._scratch is None else [self.free, self._scratch]
            for free in copies:  # the scratch copy too, so it need not be made again
                try:
                    take(self.index, free, row, item.request, cards=item.cards)
                except ValueError:
                    # the view already shows other pods on those cards (it moved on since
                    # the bind): the tightest cards instead, so the room is not overstated
                    take(self.index, free, row, item.request)
            self.changed.add(row)
        self.key = (*self.key[:2], assumed.generation)

    def state(self, row: int) -> NodeState:
        """The row's state now: the index's own when nothing is assumed on it (kept, not
        rebuilt)."""
        if row in self.changed:
            return self.free.state(self.index, row)
        return self.index.states[row]

    def landings(self, row: int, req: ResourceRequest, *, own: bool = False) -> list[Landing]:
        """Each distinct way ``req`` can land on the node: for one device of a shared card,
        every card it fits (cards with equal free figures count once, the lowest index);
        otherwise the device plugin's choice, the tightest cards. Empty: it does not fit.
        ``own``: from the index's own figures, not those with the assumed pods charged."""
        index, scratch = self.index, self._scratch_free()
        outer = None
        if own and row in self.changed:
            outer = _save(scratch, row)
            _restore(scratch, row, _save(Free.of(index), row))
        try:
            return self._landings(scratch, row, req)
        finally:
            if outer is not None:
                _restore(scratch, row, outer)

    def tightest(self, row: int, req: ResourceRequest) -> tuple[int, ...] | None:
        """The cards ``req`` takes on the node by the device plugin's rule (the tightest with
        room); None: it does not fit."""
        scratch = self._scratch_free()
        saved = _save(scratch, row)
        try:
            return take(self.index, scratch, row, req)
        except ValueError:
            return None
        finally:
            _restore(scratch, row, saved)

    def _landings(self, scratch: Free, row: int, req: ResourceRequest) -> list[Landing]:
        index = self.index
        options: list[tuple[int, ...] | None] = [None]
        single_shared = (
            req.gpu_count == 1
            and not req.mig
            and int(index.rule[row]) not in (RULE_FIXED, RULE_MIG_SINGLE)
        )
        if single_shared:
            seen: set[tuple[int, int, int, int]] = set()
            options = []
            figures = zip(
                scratch.gpu[row].tolist(),
                scratch.replicas[row].tolist(),
                scratch.cores[row].tolist(),
                scratch.hmem[row].tolist(),
                strict=True,
            )
            for card, card_figures in enumerate(figures):
                if card < int(index.gpu_count[row]) and card_figures not in seen:
                    seen.add(card_figures)
                    options.append((card,))
        out = []
        measure = index.measure
        for cards in options:
            saved = _save(scratch, row)
            try:
                taken = take(index, scratch, row, req, cards=cards)
            except ValueError:
                continue
            else:
                out.append(Landing(taken, measure.frag_milli(scratch.state(index, row))))
            finally:
                _restore(scratch, row, saved)
        return out

    def _scratch_free(self) -> Free:
        if self._scratch is None:
            self._scratch = self.free.copy()
        return self._scratch


_Row = tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, int]]


def _save(free: Free, row: int) -> _Row:
    return (
        int(free.cpu[row]),
        int(free.mem[row]),
        free.gpu[row].copy(),
        free.replicas[row].copy(),
        free.slots[row].copy(),
        free.cores[row].copy(),
        free.hmem[row].copy(),
        dict(free.mig.get(row, {})),
    )


def _restore(free: Free, row: int, saved: _Row) -> None:
    cpu, mem, gpu, replicas, slots, cores, hmem, mig = saved
    free.cpu[row], free.mem[row] = cpu, mem
    free.gpu[row], free.replicas[row], free.slots[row] = gpu, replicas, slots
    free.cores[row], free.hmem[row] = cores, hmem
    if mig:
        free.mig[row] = mig
