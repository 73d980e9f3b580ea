"""Event-time windows per key, as an operator any detector can host (issue 13).

Faust's windowed tables expire windows by wall clock, so a replay at 100x, a worker that was
down for a minute or a backlog after a broker outage would close windows at the wrong time.
Here every boundary is event time: windows open and take items by their event time, and close
when the operator's event time (the latest seen, by item or by ``advance``) passes their end
plus the allowed lateness. The definition (``WindowSpec``) is kept apart from the runtime
state (``WindowOperator``), and the state snapshots per key, so the Faust runner keeps it in a
changelog table like the profiles.

Two shapes:

- hopping (``step_s`` set): windows ``[k*step, k*step + length)``; an item updates every window
  it falls in, a window closes once event time reaches its end plus the lateness;
- sliding (``step_s`` None): at each item, the window is the ``length_s`` up to it, ``(t -
  length, t]``; the key's window closes when its last item is ``length_s`` plus the lateness
  behind event time, i.e. after a quiet period as long as the window.

An item older than anything still open is not dropped silently: it comes out as a ``late``
event naming its key and time.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Generic, Literal, TypeVar

import orjson

from streams.operator import StateChanges

__all__ = ["Keyed", "WindowEvent", "WindowOperator", "WindowSpec"]

V = TypeVar("V")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CLOCK = "clock"


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """A window's shape, in event-time seconds."""

    length_s: float
    step_s: float | None = None
    """None: sliding, one window ending at each item."""
    lateness_s: float = 0.0
    """How far behind event time an item may arrive and still count."""

    def __post_init__(self) -> None:
        problems = []
        if not self.length_s > 0:
            problems.append(f"length_s={self.length_s} must be above 0")
        if self.step_s is not None and not 0 < self.step_s <= self.length_s:
            problems.append(f"step_s={self.step_s} must be above 0 and at most length_s")
        if not self.lateness_s >= 0:
            problems.append(f"lateness_s={self.lateness_s} must be 0 or more")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def length(self) -> timedelta:
        return timedelta(seconds=self.length_s)

    @property
    def lateness(self) -> timedelta:
        return timedelta(seconds=self.lateness_s)

    def starts(self, at: datetime) -> list[datetime]:
        """Hopping: the starts of the windows ``at`` falls in, earliest first."""
        assert self.step_s is not None
        t = (at - _EPOCH).total_seconds()
        last = math.floor(t / self.step_s)
        first = math.floor((t - self.length_s) / self.step_s) + 1
        return [_EPOCH + timedelta(seconds=k * self.step_s) for k in range(first, last + 1)]


@dataclass(frozen=True, slots=True)
class Keyed(Generic[V]):
    """One item for the windows of ``key`` (a card, a node, a namespace), at event time ``at``."""

    key: str
    at: datetime
    value: V


@dataclass(frozen=True, slots=True)
class WindowEvent(Generic[V]):
    kind: Literal["open", "update", "close", "late"]
    key: str
    start: datetime
    end: datetime
    values: tuple[V, ...]
    """The window's items in event-time order (for ``late``: the item refused)."""


@dataclass(slots=True)
class _KeyState(Generic[V]):
    times: list[datetime] = field(default_factory=list)
    values: list[V] = field(default_factory=list)
    open: set[datetime] = field(default_factory=set)
    """Hopping: starts of the windows open; sliding: {start of the live window}."""

    def insert(self, at: datetime, value: V) -> None:
        i = bisect.bisect_right(self.times, at)
        self.times.insert(i, at)
        self.values.insert(i, value)

    def between(self, start: datetime, end: datetime, *, closed_end: bool) -> tuple[V, ...]:
        lo = (
            bisect.bisect_right(self.times, start)
            if closed_end
            else bisect.bisect_left(self.times, start)
        )
        hi = (
            bisect.bisect_right(self.times, end)
            if closed_end
            else bisect.bisect_left(self.times, end)
        )
        return tuple(self.values[lo:hi])

    def drop_before(self, cut: datetime, *, inclusive: bool) -> None:
        n = (
            bisect.bisect_right(self.times, cut)
            if inclusive
            else bisect.bisect_left(self.times, cut)
        )
        del self.times[:n], self.values[:n]


class WindowOperator(Generic[V]):
    """Windows of one shape over many keys. ``encode``/``decode`` turn an item's value into
    JSON and back, for the snapshot."""

    def __init__(
        self,
        spec: WindowSpec,
        *,
        encode: Callable[[V], object],
        decode: Callable[[object], V],
    ) -> None:
        self.spec = spec
        self._encode = encode
        self._decode = decode
        self.keys: dict[str, _KeyState[V]] = {}
        self._now: datetime | None = None
        self._dirty: set[str] = set()
        self._tracking = False
        self.late = 0
        """Items refused as too late, for a metric."""

    @property
    def now(self) -> datetime | None:
        return self._now

    # --- input ---------------------------------------------------------------------------------

    def apply(self, item: Keyed[V]) -> list[WindowEvent[V]]:
        if self._now is None or item.at > self._now:
            self._now = item.at
        floor = self._now - self.spec.lateness
        closed = self._close_due()  # what the item's time ends goes first
        if self.spec.step_s is None:
            return closed + self._apply_sliding(item, floor)
        return closed + self._apply_hopping(item, floor)

    def _apply_hopping(self, item: Keyed[V], floor: datetime) -> list[WindowEvent[V]]:
        length = self.spec.length
        starts = [s for s in self.spec.starts(item.at) if s + length > floor]
        if not starts:
            return [self._late(item)]
        st = self.keys.setdefault(item.key, _KeyState())
        st.insert(item.at, item.value)
        self._touch(item.key)
        out = []
        for s in starts:
            kind: Literal["open", "update"] = "update" if s in st.open else "open"
            st.open.add(s)
            out.append(
                WindowEvent(
                    kind, item.key, s, s + length, st.between(s, s + length, closed_end=False)
                )
            )
        return out + self._close_due()

    def _apply_sliding(self, item: Keyed[V], floor: datetime) -> list[WindowEvent[V]]:
        if item.at < floor:
            return [self._late(item)]
        st = self.keys.setdefault(item.key, _KeyState())
        kind: Literal["open", "update"] = "update" if st.times else "open"
        st.insert(item.at, item.value)
        # an item a whole window behind the lateness floor is in no window still to come
        st.drop_before(floor - self.spec.length, inclusive=True)
        st.open = {st.times[0]}
        self._touch(item.key)
        start = item.at - self.spec.length
        values = st.between(start, item.at, closed_end=True)
        return [WindowEvent(kind, item.key, start, item.at, values)]

    def _late(self, item: Keyed[V]) -> WindowEvent[V]:
        self.late += 1
        return WindowEvent("late", item.key, item.at, item.at, (item.value,))

    # --- time ----------------------------------------------------------------------------------

    def advance(self, event_time: datetime) -> list[WindowEvent[V]]:
        if self._now is None or event_time > self._now:
            self._now = event_time
        return self._close_due()

    def next_due(self) -> datetime | None:
        dues = [d for st in self.keys.values() if (d := self._due(st)) is not None]
        return min(dues) if dues else None

    def flush(self) -> list[WindowEvent[V]]:
        out: list[WindowEvent[V]] = []
        for key in sorted(self.keys):
            out += self._close(key, self.keys[key], until=None)
        return out

    def _due(self, st: _KeyState[V]) -> datetime | None:
        if not st.open:
            return None
        if self.spec.step_s is None:
            return st.times[-1] + self.spec.length + self.spec.lateness
        return min(st.open) + self.spec.length + self.spec.lateness

    def _close_due(self) -> list[WindowEvent[V]]:
        now = self._now
        if now is None:
            return []
        out: list[WindowEvent[V]] = []
        for key in sorted(self.keys):
            st = self.keys[key]
            due = self._due(st)
            if due is not None and due <= now:
                out += self._close(key, st, until=now)
        out.sort(key=lambda e: (e.end, e.key, e.start))
        return out

    def _close(self, key: str, st: _KeyState[V], *, until: datetime | None) -> list[WindowEvent[V]]:
        """Close the key's windows due by ``until`` (all of them when None)."""
        length, lateness = self.spec.length, self.spec.lateness
        out: list[WindowEvent[V]] = []
        if self.spec.step_s is None:
            if st.times and (until is None or st.times[-1] + length + lateness <= until):
                out.append(WindowEvent("close", key, st.times[0], st.times[-1], tuple(st.values)))
                st.times.clear()
                st.values.clear()
                st.open.clear()
        else:
            for s in sorted(st.open):
                if until is None or s + length + lateness <= until:
                    values = st.between(s, s + length, closed_end=False)
                    out.append(WindowEvent("close", key, s, s + length, values))
                    st.open.discard(s)
            # items no open window (and no window still to be opened by a late item) needs
            keep_from = min(st.open) if st.open else (until - lateness - length if until else None)
            if keep_from is None:
                st.times.clear()
                st.values.clear()
            else:
                st.drop_before(keep_from, inclusive=False)
        if out:
            self._touch(key)
        if not st.times and not st.open:
            del self.keys[key]
        return out

    # --- state ---------------------------------------------------------------------------------

    def _touch(self, key: str) -> None:
        if self._tracking:
            self._dirty.add(key)

    def snapshot(self) -> StateChanges:
        out: StateChanges = {}
        for key in sorted(self._dirty):
            st = self.keys.get(key)
            out[f"w/{key}"] = None if st is None else self._encode_key(st)
        self._dirty.clear()
        out[CLOCK] = self._clock_entry()
        return out

    def _clock_entry(self) -> bytes:
        return orjson.dumps({"now": None if self._now is None else self._now.isoformat()})

    def _encode_key(self, st: _KeyState[V]) -> bytes:
        return orjson.dumps(
            {
                "items": [
                    [t.isoformat(), self._encode(v)]
                    for t, v in zip(st.times, st.values, strict=True)
                ],
                "open": sorted(s.isoformat() for s in st.open),
            }
        )

    def restore(self, entries: Mapping[str, bytes]) -> None:
        self._tracking = True
        for name, raw in entries.items():
            body = orjson.loads(raw)
            if name == CLOCK:
                self._now = None if body["now"] is None else datetime.fromisoformat(body["now"])
                continue
            st: _KeyState[V] = _KeyState()
            for t, v in body["items"]:
                st.times.append(datetime.fromisoformat(t))
                st.values.append(self._decode(v))
            st.open = {datetime.fromisoformat(s) for s in body["open"]}
            self.keys[name.removeprefix("w/")] = st

    def state_entries(self) -> dict[str, bytes]:
        """All of the state as entries ``restore`` takes, for a host that keeps it whole
        rather than by changes (a detector with a few keys)."""
        out = {f"w/{key}": self._encode_key(st) for key, st in sorted(self.keys.items())}
        out[CLOCK] = self._clock_entry()
        return out

    def values_of(self, key: str) -> Sequence[V]:
        """The items the key holds now (for a detector that reads its window between events)."""
        st = self.keys.get(key)
        return () if st is None else tuple(st.values)
