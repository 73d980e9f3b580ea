"""Source progress: how far in event time a source's output is complete.

Events of one instant, or of nearby instants, take different topics and partitions on the bus
and reach a stage in any interleaving. A stage can only put them back in event-time order if
every source says, now and then, "everything I publish up to here is sent": that is this
message. A stage releases buffered input up to the lowest progress of the sources it hears
from, and passes its own progress downstream, so the cluster view sees deltas in the order the
embedded runner would have produced them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from models.base import Frozen, UtcDatetime
from models.events import EventKind

__all__ = ["SourceProgress"]


class SourceProgress(Frozen):
    """Sent to every partition of every topic the source writes, after the events it covers
    (one producer keeps a partition's order, so a stage that reads it has read them all)."""

    kind: Literal["progress"] = "progress"
    source: Annotated[str, Field(min_length=1)]
    upto: UtcDatetime
    """Every event the source has with event time at or before this has been sent."""
    kinds: tuple[EventKind, ...]
    """The event kinds the source publishes: a stage waits for its progress on each of them."""
