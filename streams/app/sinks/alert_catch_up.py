"""Where a new alerter group starts on the signals topic: at the signals open now, not at the
retained history.

The topic keeps weeks of signals. A group with no committed offset would read a partition from
its first record and post every episode, most of them long resolved, to Slack and the webhook
(Alertmanager merges them; people do not). Workers key each signal by its fingerprint, so a
signal's open and resolved records sit in one partition, in order: the latest state per
fingerprint up to the partition's end offset, taken when the partition is first seen, says
whether the signal is open now. Only those are sent, once each, in their latest state; every
other record below that end is skipped and counted. Records from the end on flow as usual.

"Latest" follows the dispatcher's rule for records that come late (``connectors/alerts/
dispatcher.py``): an open of an episode already resolved (same or earlier ``opened_at``), such
as a restarted worker's copy, does not reopen it, and a record of an episode older than the
one held does not replace it. So the open set is what a replay from the first record would
have left open in the dispatcher, without posting the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from aiokafka import TopicPartition
from prometheus_client import CollectorRegistry, Counter

from models import Signal

__all__ = ["SKIP_REASONS", "OpenSetCatchUp"]

log = logging.getLogger(__name__)

SKIP_REASONS = ("resolved", "superseded")
"""Why a history record was not sent: ``resolved``, a state of an episode resolved before the
start (or a late copy of one); ``superseded``, an earlier state of a signal still open (its
latest is sent instead), or a late record of an episode older than the one held."""


@dataclass
class _Partition:
    end: int
    """The partition's end offset when it was first seen: records below it are history."""
    open: dict[str, tuple[Signal, int]] = field(default_factory=dict)
    """Per fingerprint, the open episode's latest state and how many records it has had, in
    the order of their latest records."""
    ended: dict[str, datetime] = field(default_factory=dict)
    """Per fingerprint, the ``opened_at`` of its latest resolved episode: a later open of the
    same episode is a late copy. A datetime per resolved fingerprint, freed at the end."""
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0))


class OpenSetCatchUp:
    def __init__(self, *, registry: CollectorRegistry | None) -> None:
        self._parts: dict[TopicPartition, _Partition] = {}
        self.skipped = Counter(
            "gpufrag_alerts_history_skipped_total",
            "Signal records a new alerter group did not send: history before its start",
            ["reason"],
            registry=registry,
        )
        for reason in SKIP_REASONS:  # both series from the start, so a rate sees the first
            self.skipped.labels(reason=reason)
        self.counts = {"open_sent": 0, **dict.fromkeys(SKIP_REASONS, 0)}
        """Over every partition caught up: signals sent as open now, records skipped."""

    def begin(self, tp: TopicPartition, *, end: int) -> None:
        """Hold ``tp``'s records below ``end`` instead of sending them."""
        self._parts[tp] = _Partition(end=end)

    def end_of(self, tp: TopicPartition) -> int | None:
        """The end offset ``tp`` is being caught up to; None when it is not (any more)."""
        part = self._parts.get(tp)
        return None if part is None else part.end

    def ends(self) -> dict[TopicPartition, int]:
        return {tp: part.end for tp, part in self._parts.items()}

    def hold(self, tp: TopicPartition, signal: Signal) -> None:
        """Take one history record of ``tp`` (in offset order) in place of sending it."""
        part = self._parts[tp]
        fp = signal.fingerprint
        held, held_n = part.open.get(fp, (None, 0))
        if held is not None and signal.opened_at < held.opened_at:
            part.skipped["superseded"] += 1  # a late record of an earlier episode
            return
        if signal.state == "resolved":
            part.open.pop(fp, None)
            part.skipped["resolved"] += 1 + held_n
            part.ended[fp] = max(signal.opened_at, part.ended.get(fp, signal.opened_at))
            return
        ended = part.ended.get(fp)
        if ended is not None and signal.opened_at <= ended:
            part.skipped["resolved"] += 1  # an open of an episode already resolved
            return
        part.open.pop(fp, None)  # re-inserted last: the order of the latest records
        part.open[fp] = (signal, held_n + 1)

    def finish(self, tp: TopicPartition) -> list[Signal]:
        """``tp`` has been read up to its end: its open signals, to be sent, in the order of
        their latest records; the skipped records counted and told in one log line."""
        part = self._parts.pop(tp)
        opens = [signal for signal, _ in part.open.values()]
        part.skipped["superseded"] += sum(n - 1 for _, n in part.open.values())
        self.counts["open_sent"] += len(opens)
        for reason, n in part.skipped.items():
            self.counts[reason] += n
            self.skipped.labels(reason=reason).inc(n)
        skipped = sum(part.skipped.values())
        log.log(
            logging.WARNING if skipped else logging.INFO,
            "%s partition %d: the group had no committed offset, so alerts start at the "
            "signals open now: %d open sent, %d history records below offset %d skipped "
            "(%d of signals resolved before the start, %d earlier states of open ones); "
            "--from-beginning sends the history instead",
            tp.topic,
            tp.partition,
            len(opens),
            skipped,
            part.end,
            part.skipped["resolved"],
            part.skipped["superseded"],
        )
        return opens

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Drop what is held for ``tps`` (revoked or assigned again: their positions restart
        from the group's commit, so a catch-up begins again from nothing)."""
        for tp in tps:
            self._parts.pop(tp, None)

    @property
    def skipped_total(self) -> int:
        return sum(self.counts[reason] for reason in SKIP_REASONS)
