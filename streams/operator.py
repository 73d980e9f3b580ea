"""The operator contract: what every stateful step of the core offers the runners that host it.

Modelled on bytewax's stateful logic: an operator takes items (``apply``), is told that event
time has moved on (``advance``), says when it next needs waking without new input
(``next_due``), empties what it holds at the end of the input (``flush``), and hands its state
out and back (``snapshot`` / ``restore``). It has no clock and does no I/O: both runners host
the same operators, the embedded one on in-process queues and the Faust one with the state in
changelog-backed tables, and neither knows what an operator does.

State travels as entries (a name, JSON bytes) rather than one blob, because the cluster view
holds thousands of profiles and a Faust table write per changed profile costs far less than
re-serialising the whole view on every release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

__all__ = ["Operator", "StateChanges"]

In_contra = TypeVar("In_contra", contravariant=True)
Out_co = TypeVar("Out_co", covariant=True)

StateChanges = dict[str, bytes | None]
"""State entries changed since the last snapshot; None: the entry is gone."""


class Operator(Protocol[In_contra, Out_co]):
    @property
    def now(self) -> datetime | None:
        """The latest event time the operator has seen, by input or by ``advance``."""
        ...

    def apply(self, item: In_contra) -> Sequence[Out_co]:
        """Take one item; returns what it causes at once."""
        ...

    def advance(self, event_time: datetime) -> Sequence[Out_co]:
        """Event time has reached ``event_time``: do the work that falls due by then."""
        ...

    def next_due(self) -> datetime | None:
        """The event time at which ``advance`` next has work that no input will trigger."""
        ...

    def flush(self) -> Sequence[Out_co]:
        """The input has ended: emit whatever is outstanding."""
        ...

    def snapshot(self) -> StateChanges:
        """The state entries changed since the last call (or since ``restore``), for a host
        that persists them."""
        ...

    def restore(self, entries: Mapping[str, bytes]) -> None:
        """Take back entries a snapshot handed out (all of them, or for keyed operators the
        ones of the keys about to be used; none for a fresh start). A host that persists state
        calls it before the first input: only then does the operator record its changes."""
        ...
