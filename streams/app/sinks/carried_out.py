"""The action ids whose final outcome is already on the actions topic, as an actuator reads it.

An actuator that takes over a partition (after a Lease handover or a crash) reads again what its
predecessor had not committed: requests its predecessor carried out, followed on the same
partition (the topic is keyed by action id) by their outcomes. Its own memory of carried-out ids
(``Actuator``) is per process, and the API server would take the eviction of a terminating pod
again, so the new owner first reads ahead to the partition's end and skips each request whose
final outcome it found there. Bounded like the actuator's memory: the oldest ids go first.
"""

from __future__ import annotations

from collections import OrderedDict

import orjson

from models import ActionOutcome

FINAL = frozenset({ActionOutcome.EXECUTED.value, ActionOutcome.GONE.value})


class CarriedOut:
    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self._ids: OrderedDict[str, None] = OrderedDict()

    def note(self, raw: bytes) -> None:
        """Remember the id of an outcome record (an audit record with a final outcome); any
        other record, or one that does not parse, is no concern here."""
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if not isinstance(body, dict) or "op" in body or body.get("outcome") not in FINAL:
            return
        action_id = body.get("id")
        if isinstance(action_id, str):
            self._ids[action_id] = None
            self._ids.move_to_end(action_id)
            while len(self._ids) > self.limit:
                self._ids.popitem(last=False)

    def __contains__(self, action_id: object) -> bool:
        return action_id in self._ids
