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
from datetime import datetime

from models.analysis import BlockReason
from models.scheduler import (
    SCHEDULER_REASONS_MAX,
    SCHEDULER_TEXT_MAX,
    PendingVerdict,
    Preemption,
)

__all__ = [
    "OTHER",
    "SchedulerVerdict",
    "parse_failed_scheduling",
    "pending_verdict",
    "preemption_of",
]

OTHER = "other"
"""The reason the least common parts of a verdict beyond ``SCHEDULER_REASONS_MAX`` fold into."""

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


def _cut(text: str) -> str:
    return text if len(text) <= SCHEDULER_TEXT_MAX else text[: SCHEDULER_TEXT_MAX - 3] + "..."


def pending_verdict(message: str, *, at: datetime) -> PendingVerdict:
    """A FailedScheduling message as a task profile keeps it: its counted reasons in gpufrag's
    words, or, for a message of another shape, the text itself (never an error: a scheduler's
    wording is not gpufrag's to refuse)."""
    unread = PendingVerdict(at=at, message=_cut(message.strip()))
    try:
        verdict = parse_failed_scheduling(message)
        if verdict is None:
            return unread
        ranked = sorted(((_cut(r), n) for r, n in verdict.blocking().items()), key=_most_first)
        keep = SCHEDULER_REASONS_MAX - 1 if len(ranked) > SCHEDULER_REASONS_MAX else len(ranked)
        reasons: dict[str, int] = {}
        for reason, n in ranked[:keep]:
            reasons[reason] = reasons.get(reason, 0) + n
        if rest := sum(n for _, n in ranked[keep:]):
            reasons[OTHER] = reasons.get(OTHER, 0) + rest
        return PendingVerdict(at=at, nodes=verdict.nodes, reasons=reasons)
    except ValueError:
        # counts no cluster has (over 10^9 nodes, or past int()'s 4,300 digits): the text
        # still says what was meant (pydantic's ValidationError is a ValueError too)
        return unread


def _most_first(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


_PREEMPTED = re.compile(r"^Preempted by (?:pod )?(\S+) on node (\S+?)\.?$")
"""kube-scheduler's DefaultPreemption: ``Preempted by pod <uid> on node <node>`` since 1.22,
``Preempted by <namespace>/<name> on node <node>`` before."""


def preemption_of(message: str, *, at: datetime, node: str | None) -> Preemption:
    """A Preempted message read into who preempted the pod and where; a message of another
    shape (Kueue's, a custom scheduler's) is kept as text with the event's node."""
    match = _PREEMPTED.match(message.strip())
    if match is None:
        return Preemption(at=at, node=node and _cut(node), message=_cut(message.strip()))
    who, where = match.group(1), match.group(2)
    by = who if "/" in who else f"uid:{who}"
    return Preemption(at=at, by=_cut(by), node=_cut(where))
