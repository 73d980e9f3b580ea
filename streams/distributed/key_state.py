"""A keyed stage's table entry for one key: the operator's state, tagged with the release mark
it was written at.

A release writes the states of the keys it changed and then the partition's release mark, each
its own changelog record. A worker killed between the two (the chaos soak's SIGKILL) leaves
some states newer than the mark; its successor restores the older mark, reads the release's
items again and used to apply them again onto states that already held them. A pod's creation
applied again to a state that already had its binding gave a profile row at the creation's
instant with the binding's time in it, where the embedded runner's has none (3 pods, in the
soak under load). The tag says how far a key's state goes: the successor skips, for that key,
the items at or before it. Nothing is lost by the skip: a release's outputs are acknowledged
before its states are written (``stages.persist``).

An entry without the tag (written before it existed, or by ``persist`` of a stage that keeps
no mark) reads as it always did.
"""

from __future__ import annotations

from datetime import datetime

TAG = b"@"
"""No operator state starts with it: they are JSON objects."""


def tagged(mark: datetime, state: bytes) -> bytes:
    return TAG + mark.isoformat().encode() + b"\n" + state


def untagged(raw: bytes) -> tuple[datetime | None, bytes]:
    """The mark a state was written at (None: not tagged) and the state."""
    if not raw.startswith(TAG):
        return None, raw
    head, _, state = raw[len(TAG) :].partition(b"\n")
    return datetime.fromisoformat(head.decode()), state
