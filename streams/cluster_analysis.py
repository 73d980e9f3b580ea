"""The cluster operator: the cluster view, the signal book and the enabled detectors as one
operator over profile deltas.

Per-node work (a node's fragment, whether it strands GPUs) happens on that node's change; the
checks that look at every node run when a detector says they fall due, which keeps the cost per
event independent of the cluster's size. Hosts ask for the cluster's state after an instant
(``report``), with the pending explanations when they were re-evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from models import (
    MILLI_PER_GPU,
    AnalysisSettings,
    DetectorSettings,
    NodeProfile,
    QueueObject,
    Signal,
    TaskProfile,
    from_json,
    to_json,
)
from models.actions import NoFix
from models.analysis import (
    ClusterBreakdown,
    ClusterFragmentation,
    Explanation,
    GroupGpus,
    InstantReport,
)
from streams.cluster.book import SignalBook
from streams.cluster.view import ClusterView
from streams.detectors.detector import Detector
from streams.detectors.detector_registry import DETECTORS
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.shapes import TypicalPods
from streams.operator import StateChanges
from streams.profiles.join import (
    NodeProfileUpdate,
    PeakReport,
    ProfileUpdate,
    QueueUpdate,
    QuotaRefused,
    TaskProfileUpdate,
)

CLOCK = "clock"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""A restored queue object's time: objects carry none, and ``see`` never moves time back."""


HOOKS = ("on_node", "on_queue", "on_refusal", "on_task", "advance", "flush", "on_typical")


def _overrides(d: Detector[Any], name: str) -> bool:
    return getattr(type(d), name) is not getattr(Detector, name)


def _hears(d: Detector[Any], hook: str) -> bool:
    return _overrides(d, hook) or _overrides(d, "on_signals")


class ClusterAnalysis:
    """State entries: ``n/<node>`` and ``t/<pod>`` (the profiles it holds), ``q/<queue>`` (the
    quota and queue objects), ``o/<fingerprint>``
    (open signals) and ``clock`` (what decides when deferred work falls due)."""

    def __init__(
        self,
        *,
        view: AnalysisSettings | None = None,
        detectors: DetectorSettings | None = None,
        typical: TypicalPods | None = None,
        kinds: Sequence[type[Detector[Any]]] | None = None,
    ) -> None:
        """``kinds``: the detectors to host, in hearing order; None: every registered one."""
        self.view = ClusterView(settings=view or AnalysisSettings(), typical=typical)
        self.book = SignalBook(clock=lambda: self.view.now)
        settings = detectors or DetectorSettings()
        DETECTORS.check(list(settings.extensions))  # a misspelt extension is not left off
        if kinds is None:
            kinds = [kind for _, kind in DETECTORS.items()]
        built = (kind.build(self.view, self.book, settings) for kind in kinds)
        self.detectors: list[Detector[Any]] = [d for d in built if d is not None]
        # Only the detectors that override a hook (or hear other detectors' signals) are
        # called for it: a replay calls the hooks 460,000 times, most of them the base's no-op.
        self._hearing = {h: [d for d in self.detectors if _hears(d, h)] for h in HOOKS}
        self._timed = [d for d in self.detectors if _overrides(d, "next_due")]
        self._counted = [d for d in self.detectors if _overrides(d, "counts")]
        self._figured = [d for d in self.detectors if _overrides(d, "figures")]
        self._gpus_key: object = None
        self._gpus: tuple[GroupGpus, ...] = ()
        self._due: tuple[datetime | None] | None = None
        """``next_due`` until the next change: a release asks twice per instant."""
        self._unplaceable = next(
            (e for d in self.detectors if (e := d.explainer()) is not None), None
        )
        self._evaluated = False
        self._snapshot_clock = b""

    # --- views for hosts and tests -----------------------------------------------------------

    @property
    def now(self) -> datetime | None:
        return self.view.now

    @property
    def index(self) -> CapacityIndex:
        return self.view.index

    @property
    def open(self) -> dict[str, Signal]:
        return self.book.open

    @property
    def explanations(self) -> Mapping[str, Explanation]:
        return {} if self._unplaceable is None else self._unplaceable.explanations

    @property
    def disagreements(self) -> Mapping[str, int]:
        """Scheduler verdicts that disagreed with gpufrag's explanation, by the scheduler's
        reason (``BlockReason`` words), since this operator was built; hosts expose them as
        a counter (``gpufrag_explanation_disagreements_total``)."""
        return {} if self._unplaceable is None else self._unplaceable.disagreements

    @property
    def evaluations(self) -> int:
        return 0 if self._unplaceable is None else self._unplaceable.evaluations

    def summary(self) -> ClusterFragmentation:
        ix = self.view.index
        counts: dict[str, int] = {
            "unplaceable_pods": 0,
            "stranded_nodes": 0,
            "stranded_gpu_milli": 0,
        }
        for d in self._counted:
            counts.update(d.counts())
        return ClusterFragmentation(
            nodes=len(ix),
            capacity_gpus=ix.capacity_milli / MILLI_PER_GPU,
            idle_gpus=ix.idle_milli / MILLI_PER_GPU,
            frag_gpus=ix.frag_milli / MILLI_PER_GPU,
            frag_amount_pct=ix.frag_amount_pct,
            frag_ratio_pct=ix.frag_ratio_pct,
            typical_pods=len(self.view.typical),
            pending_pods=len(self.view.pending),
            unplaceable_pods=counts["unplaceable_pods"],
            stranded_nodes=counts["stranded_nodes"],
            arrived_gpus=self.view.arrived_gpu_milli / MILLI_PER_GPU,
            stranded_gpus=counts["stranded_gpu_milli"] / MILLI_PER_GPU,
        )

    def breakdown(self) -> ClusterBreakdown:
        """The figures by pool and model, block reason and signal kind: running totals of the
        index, the book and the detectors, so a report costs no pass over the nodes."""
        figures: dict[tuple[str, ...], float] = {}
        for d in self._figured:
            figures.update(d.figures())
        stranded_by = tuple(
            sorted((k, int(v)) for k, v in figures.items() if k[0] == "stranded_milli")
        )
        key = (self.view.index.version, stranded_by)
        if key != self._gpus_key:  # the groups' totals move only with a node's change
            self._gpus_key, self._gpus = key, self._group_gpus(figures)
        reasons = sorted((k[1], int(v)) for k, v in figures.items() if k[0] == "unplaceable")
        signals = sorted((kind, sev, n) for (kind, sev), n in self.book.tally.items())
        return ClusterBreakdown(
            gpus=self._gpus,
            unplaceable=tuple(reasons),
            signals_open=tuple(signals),
            oom_storms_open=int(figures.get(("oom_storms",), 0)),
            oom_storm_kills=int(figures.get(("oom_storm_kills",), 0)),
            idle_whole_gpus=self.view.index.whole_idle_cards,
        )

    def _group_gpus(self, figures: Mapping[tuple[str, ...], float]) -> tuple[GroupGpus, ...]:
        gpus = []
        for (pool, model), t in sorted(self.view.index.groups.items()):
            stranded = int(figures.get(("stranded_milli", pool, model), 0))
            gpus.append(
                GroupGpus(
                    pool=pool,
                    gpu_model=model,
                    allocated=t.cards - t.unhealthy - t.idle_milli / MILLI_PER_GPU,
                    idle=(t.idle_milli - stranded) / MILLI_PER_GPU,
                    stranded=stranded / MILLI_PER_GPU,
                    unhealthy=float(t.unhealthy),
                )
            )
        return tuple(gpus)

    # --- the operator ------------------------------------------------------------------------

    def apply(self, item: ProfileUpdate) -> list[Signal]:
        self._due = None
        view = self.view
        view.see(item.at)
        if isinstance(item, NodeProfileUpdate):
            view.put_node(item.name, item.profile)
            return self._each("on_node", lambda d: d.on_node(item.name))
        if isinstance(item, QueueUpdate):
            view.put_queue(item.key, item.queue)
            return self._each("on_queue", lambda d: d.on_queue(item.key))
        if isinstance(item, QuotaRefused):
            return self._each("on_refusal", lambda d: d.on_refusal(item.event, item.at))
        if isinstance(item, PeakReport):
            return []  # history only: no detector reads a pod's memory peak
        change = view.put_task(item.key, item.profile)
        return self._each("on_task", lambda d: d.on_task(item.key, change))

    def _each(self, name: str, hook: Callable[[Detector[Any]], list[Signal]]) -> list[Signal]:
        """Every detector hears the change, and what the detectors before it made of it (those
        that override neither ``name`` nor ``on_signals`` would add nothing)."""
        out: list[Signal] = []
        for d in self._hearing[name]:
            own = d.on_signals(out) if out else []
            out += own + hook(d)
        return out

    def advance(self, event_time: datetime) -> list[Signal]:
        self._due = None
        view = self.view
        if view.now is not None and event_time < view.now:
            # late input never moves the clock back, but its changes are still checked now
            event_time = view.now
        view.now = event_time
        out: list[Signal] = []
        evaluations = self.evaluations
        if view.typical_due(event_time):
            out += self._rebuild_typical(event_time)
        out += self._each("advance", lambda d: d.advance(event_time))
        self._evaluated = self.evaluations != evaluations
        return out

    def next_due(self) -> datetime | None:
        if self._due is None:
            self._due = (self._next_due(),)
        return self._due[0]

    def _next_due(self) -> datetime | None:
        dues = [self.view.typical_next_due(), *(d.next_due() for d in self._timed)]
        present = [d for d in dues if d is not None]
        return min(present) if present else None

    def flush(self) -> list[Signal]:
        """Evaluate whatever is outstanding now, e.g. at the end of a replay."""
        self._due = None
        now = self.view.now
        if now is None:
            return []
        out: list[Signal] = []
        if self.view.typical_dirty:
            out += self._rebuild_typical(now)
        return out + self._each("flush", lambda d: d.flush())

    def note_no_fixes(self, no_fixes: Mapping[str, tuple[NoFix, ...]]) -> None:
        """Why the planners found no fix for these pods (or gangs, by scope), set on their
        explanations of this instant: kept there, a verdict joined later (``take_joined``)
        rewrites the row with the reasons still on it."""
        if self._unplaceable is not None and no_fixes:
            self._due = None
            self._unplaceable.note_no_fixes(no_fixes)

    def report(self, at: datetime, *, explain: bool | None = None) -> InstantReport:
        """The cluster's state at ``at``, with the pending explanations when the last
        ``advance`` re-evaluated them (``explain`` decides instead when given)."""
        explanations = None
        if self._evaluated if explain is None else explain:
            tasks = self.view.tasks
            # a gang's row shows one member's request: the member its explanation names
            explanations = {
                k: (e, tasks[who])
                for k, e in self.explanations.items()
                if (who := k if e.gang is None else e.gang.shown) in tasks
            }
        joined = {} if self._unplaceable is None else self._unplaceable.take_joined()
        if joined:
            # a verdict joined to an earlier evaluation, the pod perhaps gone since: its row
            # replaces that evaluation's (same instant); one re-evaluated now has it already
            explanations = {**joined, **(explanations or {})}
        return InstantReport(
            at=at,
            summary=self.summary(),
            explanations=explanations,
            breakdown=self.breakdown(),
        )

    def _rebuild_typical(self, at: datetime) -> list[Signal]:
        self.view.rebuild_typical(at)
        return self._each("on_typical", lambda d: d.on_typical())

    # --- state -------------------------------------------------------------------------------

    def snapshot(self) -> StateChanges:
        out: StateChanges = {}
        view = self.view
        for entry in sorted(view.dirty):
            name = entry[2:]
            held: NodeProfile | TaskProfile | QueueObject | None = (
                view.nodes.get(name)
                if entry.startswith("n/")
                else view.queues.get(name)
                if entry.startswith("q/")
                else view.tasks.get(name)
            )
            out[entry] = None if held is None else held.model_dump_json().encode()
        for fp in sorted(self.book.dirty):
            sig = self.book.open.get(fp)
            out[f"o/{fp}"] = None if sig is None else to_json(sig)
        view.dirty.clear()
        self.book.dirty.clear()
        clock = orjson.dumps(self._clock_state())
        if clock != self._snapshot_clock:  # most deltas move no schedule: no write for them
            out[CLOCK] = self._snapshot_clock = clock
        return out

    def clock_entry(self) -> bytes:
        """The schedule as ``snapshot`` writes it under ``CLOCK``, changed or not: a host that
        tags it with its release mark writes it at every release."""
        return orjson.dumps(self._clock_state())

    def restore(self, entries: Mapping[str, bytes]) -> None:
        """The view as it was: its profiles applied again silently, the open signals and the
        schedule of deferred work put back. Learned typical pods come back from the tasks still
        held, not from every pod ever seen. From here on the operator records its changes for
        ``snapshot`` (a host that never restores, the embedded runner, has them kept for
        nothing)."""
        self.view.tracking = self.book.tracking = True
        self._due = None
        raw_clock = entries.get(CLOCK)
        if raw_clock is None:
            return
        opened: dict[str, Signal] = {}
        for k in sorted(entries):
            raw = entries[k]
            if k.startswith("n/"):
                node = NodeProfile.model_validate_json(raw)
                self.apply(NodeProfileUpdate(k[2:], node, node.updated_at))
            elif k.startswith("t/"):
                task = TaskProfile.model_validate_json(raw)
                self.apply(TaskProfileUpdate(k[2:], task, task.created_at))
            elif k.startswith("q/"):
                queue = QueueObject.model_validate_json(raw)
                self.apply(QueueUpdate(k[2:], queue, self.view.now or _EPOCH))
            elif k.startswith("o/"):
                opened[k[2:]] = from_json(Signal, raw)
        clock = orjson.loads(raw_clock)
        view_clock = clock["view"]
        if view_clock.get("now") and self.view.fixed_typical is None:
            self._rebuild_typical(datetime.fromisoformat(view_clock["now"]))
        self.view.restore_clock(view_clock)
        for d in self.detectors:
            d.rebuilt()
            if d.name in clock:
                d.restore_clock(clock[d.name])
        self.book.open = opened
        self.view.dirty.clear()
        self.book.dirty.clear()
        self._due = None

    def _clock_state(self) -> dict[str, object]:
        state: dict[str, object] = {"view": self.view.clock_state()}
        for d in self.detectors:
            if s := d.clock_state():
                state[d.name] = s
        return state
