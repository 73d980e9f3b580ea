"""Which layouts of a worker group's stored state this version reads, decided before it starts.

A worker group's state is its Faust tables' changelogs (``topics.changelogs``). Each entry
is read by a decoder that accepts every earlier form of it (``node_state``, ``TaskJoin``,
``Watermarks.load``), but the cluster view restores as a whole: without its release mark and
its schedule (``clock``) it cannot be placed in event time, and a worker used to start with an
empty view then, silently. So the app id carries a schema version (its own compacted topic,
``topics.state_schema``), checked by ``gpufrag worker`` before Faust starts: the same version goes
on; an older one is migrated where a step exists, else refused; a newer one is refused. A
refusal is one line naming the way to rebuild: a new ``--app-id``, whose workers read the input
topics from their start (within their retention) into fresh tables.

Versions: 1 is every layout written before the version was recorded; 2 recorded it; 3 tags
each pod and node state with the release mark it was written at (``key_state.py``), which a
version-2 worker cannot read, so it must refuse a group a version-3 worker has joined.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

STATE_SCHEMA = 3
SCHEMA_KEY = b"schema"
CLUSTER_CLOCK = "clock"
VIEW_PREFIXES = ("n/", "t/", "q/", "o/")
"""The cluster view's entries: nodes, tasks, quota objects, open signals."""


class StateSchemaError(Exception):
    """The stored state cannot be read by this version; the message is the one line to show."""


@dataclass(frozen=True, slots=True)
class StoredState:
    """What the broker holds for one app id, as ``verdict`` needs it."""

    schema: int | None
    """The version recorded for it; None: none recorded."""
    written: bool
    """Any of its changelogs was ever written to (an app id with none is new)."""
    cluster_keys: frozenset[str] | None = None
    """The keys its cluster view's changelog holds now; None: not read (only a migration
    reads it)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    record: bool
    """Write ``STATE_SCHEMA`` as the app id's version before starting."""
    why: str
    """For the log: what was found."""


Step = Callable[[StoredState, str], None]
"""A migration from one version to the next: raises ``StateSchemaError`` when it cannot."""


def _rebuild(app_id: str) -> str:
    return (
        f"start the workers with a new --app-id (e.g. `gpufrag worker --app-id {app_id}-v"
        f"{STATE_SCHEMA}`): they rebuild the state from the input topics, as far back as kept"
    )


def _from_1(found: StoredState, app_id: str) -> None:
    """Version 1's entries are read as they are; only a cluster view saved without its schedule
    (``clock``, kept since 2026-12-02) cannot be restored. A view without a release mark is one
    whose worker stopped before its first mark: nothing of its input was committed, so it is
    rebuilt from the start, as before."""
    keys = found.cluster_keys or frozenset()
    if any(k.startswith(VIEW_PREFIXES) for k in keys) and CLUSTER_CLOCK not in keys:
        raise StateSchemaError(
            f"app id {app_id!r} holds a cluster view saved without its schedule ({CLUSTER_CLOCK}"
            f"; state schema 1, an older gpufrag); this version cannot place it in event time: "
            f"{_rebuild(app_id)}"
        )


def _from_2(found: StoredState, app_id: str) -> None:
    """Version 2's pod and node entries carry no release mark: they are read as they are and
    hold nothing back (``key_state.untagged``); each is tagged when next written."""


MIGRATIONS: Mapping[int, Step] = {1: _from_1, 2: _from_2}
"""Version -> the step to the next one."""


def needs_cluster_keys(found: StoredState) -> bool:
    """Whether ``verdict`` must see the cluster changelog's keys: only to migrate."""
    return found.written and _version(found) < STATE_SCHEMA


def verdict(found: StoredState, *, app_id: str) -> Verdict:
    """Go on (recording the version where it is new or migrated), or raise
    ``StateSchemaError``."""
    if found.schema == STATE_SCHEMA:
        return Verdict(record=False, why=f"state schema {STATE_SCHEMA}")
    if found.schema is not None and found.schema > STATE_SCHEMA:
        raise StateSchemaError(
            f"app id {app_id!r} holds state schema {found.schema}, written by a newer gpufrag; "
            f"this version reads up to {STATE_SCHEMA}: run the newer version, or "
            f"{_rebuild(app_id)}"
        )
    if not found.written:
        return Verdict(record=True, why="a new app id")
    version = first = _version(found)
    while version < STATE_SCHEMA:
        step = MIGRATIONS.get(version)
        if step is None:
            raise StateSchemaError(
                f"app id {app_id!r} holds state schema {version}, which this version cannot "
                f"migrate: {_rebuild(app_id)}"
            )
        step(found, app_id)
        version += 1
    return Verdict(record=True, why=f"state schema {first} migrated to {STATE_SCHEMA}")


def _version(found: StoredState) -> int:
    """None recorded: written before versions were (1)."""
    return 1 if found.schema is None else found.schema
