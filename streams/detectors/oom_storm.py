"""OOM storms: at least K OOM events within W on one card, one node or one namespace (its
Kueue/Volcano queue where it has one), with the victims and the suspect.

Time-slicing isolates no memory: one pod that grabs the card's memory kills its neighbours,
and they come back and die again. An OOM event is a container OOM-killed or exiting on a GPU
out-of-memory error (a task's ``oom_count`` going up; the join counts each kill once), a kill
by the node's kernel OOM killer (the node profile's ``system_oom_count``; node scope only, the
victim named by its process), or a pod held at its GPU memory limit (a ``near_memory_limit``
signal opening). Each is put into sliding event-time windows per scope
(``streams/windows.py``). The suspected aggressor is the co-located pod, not itself a victim,
whose own GPU memory grew most in the window before the first kill, from the per-pod figures
of the node profiles; "unknown" when there are none. A storm resolves after ``quiet_s``
without a new OOM in its scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from models import Scope, Severity, Signal, SignalKind
from models.settings import OomStormSettings
from streams.cluster.book import SignalBook
from streams.cluster.view import ClusterView, TaskChange
from streams.detectors.detector import Detector
from streams.windows import Keyed, WindowEvent, WindowOperator, WindowSpec

KIND = SignalKind.OOM_STORM
Kill = tuple[str, str]
"""(pod, event time ISO): one OOM in a window."""


@dataclass(frozen=True, slots=True)
class _Scope:
    scope: Scope
    events: int
    window_s: float
    severity: Severity


@dataclass(slots=True)
class _Storm:
    scope: Scope
    scope_id: str
    first: datetime
    last: datetime
    kills: int = 0
    """OOM kills counted in the storm: its window's at opening, one more for each since."""


def _kill_json(kill: Kill) -> object:
    return list(kill)


def _kill_of(raw: object) -> Kill:
    assert isinstance(raw, list)
    return str(raw[0]), str(raw[1])


class OomStorm(Detector[OomStormSettings]):
    name = "oom_storm"

    def __init__(self, view: ClusterView, book: SignalBook, settings: OomStormSettings):
        super().__init__(view, book, settings)
        self.scopes = {
            s.scope: s
            for s in (
                _Scope(Scope.GPU, settings.card_events, settings.card_window_s, Severity.CRITICAL),
                _Scope(Scope.NODE, settings.node_events, settings.node_window_s, Severity.CRITICAL),
                _Scope(
                    Scope.NAMESPACE,
                    settings.namespace_events,
                    settings.namespace_window_s,
                    Severity.WARNING,
                ),
            )
        }
        self.windows = {
            scope: WindowOperator[Kill](
                WindowSpec(length_s=s.window_s), encode=_kill_json, decode=_kill_of
            )
            for scope, s in self.scopes.items()
        }
        self.counted: dict[str, int] = {}
        """Each pod's OOM count last seen, for pods with one: a rise is that many new OOMs;
        ``node:<name>`` keys hold a node's system OOM count the same way."""
        self.memory: dict[str, list[tuple[datetime, float]]] = {}
        """Each pod's own GPU memory over the longest window, from the node profiles."""
        self.storms: dict[str, _Storm] = {}

    # --- inputs -------------------------------------------------------------------------------

    def on_node(self, name: str) -> list[Signal]:
        profile, now = self.view.nodes.get(name), self.view.now
        if profile is None or now is None:
            self.counted.pop(f"node:{name}", None)
            return []
        out = self._system_ooms(name, profile.system_oom_count, profile.last_system_oom, now)
        keep = now - timedelta(seconds=max(s.window_s for s in self.scopes.values()))
        for pod, (_, mib) in profile.pod_memory().items():
            seen = self.memory.setdefault(pod, [])
            if not seen or seen[-1] != (now, mib):
                seen.append((now, mib))
            while seen and seen[0][0] < keep:
                seen.pop(0)
        return out

    def _system_ooms(
        self, name: str, count: int, victim: str | None, now: datetime
    ) -> list[Signal]:
        key = f"node:{name}"
        before = self.counted.get(key, 0)
        if count:
            self.counted[key] = count
        out: list[Signal] = []
        for _ in range(count - before):
            label = victim or f"{name}: unknown process"
            out += self._take(Scope.NODE, name, Keyed(name, now, (label, now.isoformat())))
        return out

    def on_signals(self, signals: list[Signal]) -> list[Signal]:
        now = self.view.now
        out: list[Signal] = []
        for sig in signals:
            if sig.kind == SignalKind.NEAR_MEMORY_LIMIT and sig.state == "open" and now:
                pod = sig.scope_id
                if pod in self.view.tasks:
                    for scope, scope_id in self._scopes_of(pod):
                        out += self._take(
                            scope, scope_id, Keyed(scope_id, now, (pod, now.isoformat()))
                        )
        return out

    def on_task(self, key: str, change: TaskChange) -> list[Signal]:
        del change
        task = self.view.tasks.get(key)
        if task is None:
            self.counted.pop(key, None)
            self.memory.pop(key, None)
            return []
        before = self.counted.get(key, 0)
        # only pods that had an OOM: the counts persist with the clock, which is written
        # whenever it changes, and a cluster's pods are mostly never killed
        if task.oom_count:
            self.counted[key] = task.oom_count
        else:
            self.counted.pop(key, None)
        now = self.view.now
        if task.oom_count <= before or now is None:
            return []
        out: list[Signal] = []
        for _ in range(task.oom_count - before):
            for scope, scope_id in self._scopes_of(key):
                out += self._take(scope, scope_id, Keyed(scope_id, now, (key, now.isoformat())))
        return out

    def _scopes_of(self, key: str) -> list[tuple[Scope, str]]:
        task = self.view.tasks[key]
        out: list[tuple[Scope, str]] = []
        if task.node is not None:
            profile = self.view.nodes.get(task.node)
            for g in profile.gpus if profile is not None else ():
                if key in g.pods:
                    out.append((Scope.GPU, f"{task.node}/{g.index}"))
            out.append((Scope.NODE, task.node))
        namespace = key.split("/", 1)[0]
        out.append((Scope.NAMESPACE, f"{namespace}/{task.queue}" if task.queue else namespace))
        return out

    def _take(self, scope: Scope, scope_id: str, item: Keyed[Kill]) -> list[Signal]:
        spec = self.scopes[scope]
        out: list[Signal] = []
        for event in self.windows[scope].apply(item):
            if event.kind == "update" or event.kind == "open":
                out += self._check(spec, event)
        return out

    # --- storms -------------------------------------------------------------------------------

    def _check(self, spec: _Scope, event: WindowEvent[Kill]) -> list[Signal]:
        fp_id = f"{spec.scope.value}:{event.key}"
        storm = self.storms.get(fp_id)
        if storm is not None:
            storm.last = event.end
            storm.kills += 1  # a sliding window reports each kill once
            return []
        if len(event.values) < spec.events:
            return []
        first = datetime.fromisoformat(event.values[0][1])
        self.storms[fp_id] = _Storm(spec.scope, event.key, first, event.end, len(event.values))
        victims = sorted({pod for pod, _ in event.values})
        aggressor, growth = self._aggressor(spec, event.key, victims, first)
        return self.book.opened(
            KIND,
            spec.scope,
            event.key,
            severity=spec.severity,
            summary=(
                f"OOM storm on {spec.scope.value} {event.key}: {len(event.values)} OOMs in "
                f"{spec.window_s:.0f} s, {len(victims)} pods; suspected aggressor {aggressor}"
            ),
            evidence={
                "ooms": len(event.values),
                "window_s": spec.window_s,
                "threshold": spec.events,
                "victims": victims,
                "aggressor": aggressor,
                "aggressor_growth_mib": growth,
                "first_oom_at": first.isoformat(),
            },
        )

    def _aggressor(
        self, spec: _Scope, scope_id: str, victims: list[str], first: datetime
    ) -> tuple[str, float | None]:
        since = first - timedelta(seconds=spec.window_s)
        best: tuple[float, str] | None = None
        for pod in sorted(self._neighbours(spec.scope, scope_id, victims)):
            seen = [mib for at, mib in self.memory.get(pod, []) if since <= at <= first]
            if len(seen) < 2:
                continue
            grew = seen[-1] - min(seen)
            if grew > 0 and (best is None or grew > best[0]):
                best = (grew, pod)
        return ("unknown", None) if best is None else (best[1], round(best[0], 1))

    def _neighbours(self, scope: Scope, scope_id: str, victims: list[str]) -> set[str]:
        """Pods sharing the storm's card, or its victims' nodes, that are not victims."""
        nodes = {self.view.tasks[v].node for v in victims if v in self.view.tasks}
        if scope is Scope.NODE:
            nodes.add(scope_id)  # a kernel OOM's victim is a process, not a pod
        out: set[str] = set()
        for name in nodes:
            profile = self.view.nodes.get(name) if name else None
            for g in profile.gpus if profile is not None else ():
                if scope is Scope.GPU and f"{name}/{g.index}" != scope_id:
                    continue
                out.update(g.pods)
        return out - set(victims)

    # --- time ---------------------------------------------------------------------------------

    def advance(self, at: datetime) -> list[Signal]:
        for w in self.windows.values():
            if w.keys:  # an idle window's clock need not move, nor the state written for it
                w.advance(at)
        quiet = timedelta(seconds=self.settings.quiet_s)
        out: list[Signal] = []
        for fp_id, storm in sorted(self.storms.items()):
            if at - storm.last >= quiet:
                del self.storms[fp_id]
                out += self.book.resolved(KIND, storm.scope, storm.scope_id)
        return out

    def next_due(self) -> datetime | None:
        quiet = timedelta(seconds=self.settings.quiet_s)
        dues = [s.last + quiet for s in self.storms.values()]
        return min(dues) if dues else None

    def figures(self) -> Mapping[tuple[str, ...], float]:
        kills = sum(s.kills for s in self.storms.values())
        return {("oom_storms",): len(self.storms), ("oom_storm_kills",): kills}

    def clock_state(self) -> dict[str, object]:
        # the pods' memory history is not kept: after a restart the aggressor is found from
        # the samples seen since (a window's worth), rather than a table write per sample
        windows = {
            scope.value: {k: v.decode() for k, v in w.state_entries().items() if k != "clock"}
            for scope, w in self.windows.items()
        }
        return {
            "windows": windows,
            "counted": dict(sorted(self.counted.items())),
            "storms": {
                k: [s.scope.value, s.scope_id, s.first.isoformat(), s.last.isoformat(), s.kills]
                for k, s in sorted(self.storms.items())
            },
        }

    def rebuilt(self) -> None:
        # the replayed profiles' OOM counts are history, not new kills: keep the counts, drop
        # the windows and storms they opened
        for w in self.windows.values():
            w.keys.clear()
        self.storms.clear()

    def restore_clock(self, state: dict[str, object]) -> None:
        windows = state.get("windows")
        for scope, w in self.windows.items():
            entries = windows.get(scope.value, {}) if isinstance(windows, dict) else {}
            w.keys.clear()
            w.restore({k: str(v).encode() for k, v in entries.items()})
        counted = state.get("counted")
        self.counted = (
            {str(k): int(v) for k, v in counted.items()} if isinstance(counted, dict) else {}
        )
        storms = state.get("storms")
        self.storms = {}
        for k, (scope, scope_id, first, last, *kills) in (
            storms if isinstance(storms, dict) else {}
        ).items():
            self.storms[k] = _Storm(
                Scope(scope),
                scope_id,
                datetime.fromisoformat(first),
                datetime.fromisoformat(last),
                int(kills[0]) if kills else 0,  # a state written before kills were kept
            )
