"""kube-scheduler's FailedScheduling message read into counted reasons (issue 13, part 6).

The scheduler says why a pod did not fit in one line: ``0/N nodes are available: 2 Insufficient
nvidia.com/gpu, 1 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: 0/N nodes
are available: 3 No preemption victims found for incoming pod.`` Each part counts the nodes a
filter rejected (a node counts once, under its first failing filter). Reading it lets gpufrag
set its own explanation beside the scheduler's and count where they disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from models.analysis import BlockReason

__all__ = ["SchedulerVerdict", "parse_failed_scheduling"]

_HEAD = re.compile(r"^\s*0/(\d+) nodes are available(?::\s*(.*))?$", re.DOTALL)
_ITEM = re.compile(r"^(\d+)\s+(.+)$", re.DOTALL)
_SPLIT = re.compile(r",\s+(?=\d+\s)")
"""Parts are joined by ", " before a count; a taint's text ({key: value}) has no count after
its comma, so it stays whole."""

_REASONS: tuple[tuple[re.Pattern[str], BlockReason], ...] = (
    (re.compile(r"^Insufficient cpu$"), BlockReason.CPU),
    (re.compile(r"^Insufficient memory$"), BlockReason.MEMORY),
    (re.compile(r"^Insufficient nvidia\.com/(?:gpu|gpu\.shared|mig-.+)$"), BlockReason.GPU_COUNT),
    (re.compile(r"untolerated taint|had taint|didn't tolerate"), BlockReason.TAINT),
    (re.compile(r"were unschedulable|unschedulable"), BlockReason.UNSCHEDULABLE),
    # HAMi's scheduler extender: a card with the cores but not the memory
    (re.compile(r"^CardInsufficientMemory$"), BlockReason.GPU_MEMORY),
)


@dataclass(frozen=True, slots=True)
class SchedulerVerdict:
    nodes: int
    """N of "0/N nodes are available"."""
    reasons: dict[str, int]
    """Each part's text -> the nodes it names, as the scheduler wrote them."""
    preemption: dict[str, int]
    """The preemption post-filter's parts, the same way."""

    def blocking(self) -> dict[str, int]:
        """The reasons in gpufrag's words (``BlockReason`` values) where they have one, else the
        scheduler's text (node affinity, volumes, ports, ...), summed."""
        out: dict[str, int] = {}
        for text, n in self.reasons.items():
            name = next((r.value for p, r in _REASONS if p.search(text)), text)
            out[name] = out.get(name, 0) + n
        return out


def _parts(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    body = text.strip().rstrip(".").strip()
    if not body:
        return out
    for part in _SPLIT.split(body):
        match = _ITEM.match(part.strip())
        if match is None:
            continue  # a part without a count ("pod has unbound PVCs"): not a node count
        reason = match.group(2).strip().rstrip(".")
        out[reason] = out.get(reason, 0) + int(match.group(1))
    return out


def parse_failed_scheduling(message: str) -> SchedulerVerdict | None:
    """The verdict in a FailedScheduling message; None for a message of another shape."""
    head, sep, tail = message.partition(" preemption: ")
    match = _HEAD.match(head)
    if match is None:
        return None
    preemption: dict[str, int] = {}
    if sep:
        inner = _HEAD.match(tail)
        preemption = _parts(inner.group(2) or "") if inner else {}
    return SchedulerVerdict(
        nodes=int(match.group(1)), reasons=_parts(match.group(2) or ""), preemption=preemption
    )
