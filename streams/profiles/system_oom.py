"""The kernel's OOM killer on a node (the kubelet's ``SystemOOM`` event), as the node's join
state counts it.

The kubelet reports a kill outside any container's own limit on the node, not on a pod:
"System OOM encountered, victim process: python, pid: 12345". The victim is named by its
process; a pod may not be known at all. Each event is counted once by its id (a watcher's
re-list or a redelivery sends it again) and by its ``count`` (Kubernetes folds repeats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from models import SchedulerEvent

__all__ = ["COUNTED_SYSTEM_OOMS", "SYSTEM_OOM", "SystemOoms", "system_oom_step", "victim_of"]

SYSTEM_OOM = "SystemOOM"
COUNTED_SYSTEM_OOMS = 16
"""Event ids remembered per node to count each kill once: a re-list sends the node's recent
events again, and a node rarely has more than a few kills in its events' one-hour TTL."""
_VICTIM = re.compile(r"victim process:\s*([^,]+?)\s*,\s*pid:\s*(\d+)")
VICTIM_MAX = 120


@dataclass(frozen=True, slots=True)
class SystemOoms:
    count: int = 0
    last_victim: str | None = None
    counted: tuple[str, ...] = ()

    def to_json(self) -> list[object]:
        return [self.count, self.last_victim, list(self.counted)]

    @classmethod
    def from_json(cls, raw: object) -> SystemOoms:
        if not isinstance(raw, list) or len(raw) != 3:
            return cls()
        count, last, counted = raw
        return cls(int(str(count)), None if last is None else str(last), tuple(map(str, counted)))


def victim_of(node: str, message: str) -> str:
    """The victim as the storm's evidence names it: "node: process (pid N)", or the message."""
    m = _VICTIM.search(message)
    text = f"{m.group(1)} (pid {m.group(2)})" if m else (message.strip() or "unknown process")
    return f"{node}: {text}"[:VICTIM_MAX]


def system_oom_step(
    prev: SystemOoms, node: str, event: SchedulerEvent, event_id: str | None
) -> SystemOoms | None:
    """The node's count after one kill; None when it is one already counted."""
    if event_id is not None and event_id in prev.counted:
        return None
    counted = prev.counted if event_id is None else (*prev.counted, event_id)
    return SystemOoms(
        prev.count + event.count,
        victim_of(node, event.message),
        counted[-COUNTED_SYSTEM_OOMS:],
    )
