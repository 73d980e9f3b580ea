"""A card's health as the join keeps it: what took it out, and when the evidence cleared.

A card is faulted by new evidence only:

- a fatal XID that is new. What is new depends on what the reading's ``xid`` is
  (``GpuSample.xid_from``): an NVML event is new whenever it comes; dcgm-exporter's gauge keeps
  the last code until the driver reloads, so where the exporter counts XIDs in its window
  (``xid_counts``) only a rise of a count is new, and where it does not, only a change of the
  gauge. Read as new at every scrape, the gauge would keep a card out for good; read from the
  counts alone, an uncordon would be undone by a count still in the exporter's window.
- a rise in uncorrectable ECC errors over the card's last reading (the first reading is the
  baseline: a count since the driver loaded says nothing of when);
- a row remap turning pending or failed.

It comes back when no new evidence came for ``recover_after_s`` of event time and nothing still
says it needs a reset: a pending or failed row remap (as last reported), or an exporter that
keeps reading a fatal XID and does not count them (there only the gauge clearing, at the reset,
shows the card is fine). The check runs on the card's next reading, so a card whose readings
stopped (fallen off the bus) stays out. An operator's uncordon clears every fault of the node
at once (``acknowledged``); evidence seen before it does not count again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from models import GpuSample
from models.xid import classify_xid

__all__ = ["CardHealth", "health_step"]


@dataclass(frozen=True, slots=True)
class CardHealth:
    fault: str | None = None
    code: int | None = None
    since: datetime | None = None
    last_at: datetime | None = None
    """When the latest new evidence was read: the recovery time counts from it."""
    seen_xid: int | None = None
    """The XID gauge as last read (None: none), to tell a new code from the stale one."""
    seen_counts: tuple[tuple[int, int], ...] | None = None
    """The exporter's XID counts as last read, (code, count): only a rise is a new XID.
    None: no reading of this card has counted XIDs (the gauge is all there is)."""
    seen_ecc: int | None = None
    seen_pending: bool = False
    seen_failed: bool = False

    @property
    def faulted(self) -> bool:
        return self.fault is not None

    def acknowledged(self) -> CardHealth:
        """An operator said the card is fine (uncordon): the fault goes, what was seen stays."""
        return replace(self, fault=None, code=None, since=None, last_at=None)

    def to_json(self) -> dict[str, object]:
        return {
            "fault": self.fault,
            "code": self.code,
            "since": None if self.since is None else self.since.isoformat(),
            "last_at": None if self.last_at is None else self.last_at.isoformat(),
            "seen": [self.seen_xid, self.seen_ecc, self.seen_pending, self.seen_failed],
            "counts": None if self.seen_counts is None else [list(c) for c in self.seen_counts],
        }

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> CardHealth:
        seen = raw.get("seen")
        xid, ecc, pending, failed = seen if isinstance(seen, list) else (None, None, 0, 0)
        counts = raw.get("counts")
        return cls(
            fault=_text(raw.get("fault")),
            code=_int(raw.get("code")),
            since=_time(raw.get("since")),
            last_at=_time(raw.get("last_at")),
            seen_xid=_int(xid),
            seen_counts=(
                tuple((int(c), int(n)) for c, n in counts) if isinstance(counts, list) else None
            ),
            seen_ecc=_int(ecc),
            seen_pending=bool(pending),
            seen_failed=bool(failed),
        )


def _text(v: object) -> str | None:
    return None if v is None else str(v)


def _int(v: object) -> int | None:
    return None if v is None else int(str(v))


def _time(v: object) -> datetime | None:
    return None if v is None else datetime.fromisoformat(str(v))


def _new_xids(prev: CardHealth, s: GpuSample) -> list[int]:
    codes: list[int] = []
    if s.xid_counts is not None:
        before = dict(prev.seen_counts or ())
        codes += sorted(c for c, n in s.xid_counts.items() if n > before.get(c, 0))
    if s.xid and s.xid not in codes:
        if s.xid_from == "events":
            codes.append(s.xid)  # an event fired since the last reading
        elif s.xid_counts is None and s.xid != prev.seen_xid:
            codes.append(s.xid)  # the gauge changed, and nothing counts
    return codes


def _new_evidence(prev: CardHealth, s: GpuSample) -> tuple[str, int | None] | None:
    """The first new sign of a broken card in this reading, as (fault, XID code)."""
    for code in _new_xids(prev, s):
        info = classify_xid(code)
        if info.takes_card_out:
            return f"XID {code}: {info.meaning}", code
    ecc = s.ecc_uncorrected_volatile
    if ecc is not None and prev.seen_ecc is not None and ecc > prev.seen_ecc:
        return (
            f"{ecc - prev.seen_ecc} new uncorrectable ECC errors ({ecc} since the driver loaded)",
            None,
        )
    if s.row_remap_failed and not prev.seen_failed:
        return "HBM row remapping failed: the card needs service", None
    if s.row_remap_pending and not prev.seen_pending:
        return "HBM row remap pending: the card needs a reset", None
    return None


def _seen(prev: CardHealth, s: GpuSample) -> CardHealth:
    """What this reading says, kept to tell the next one's news; a figure the reading lacks
    (another source on the same card, an older driver) keeps its last value. A reading that
    says what the last one did (nearly all of a healthy card's) keeps the same object:
    ``replace`` was a sixth of the join's cost per GPU sample."""
    xid = prev.seen_xid if s.xid_from == "events" else (s.xid or None)
    counts = prev.seen_counts if s.xid_counts is None else tuple(sorted(s.xid_counts.items()))
    ecc = prev.seen_ecc if s.ecc_uncorrected_volatile is None else s.ecc_uncorrected_volatile
    pending = prev.seen_pending if s.row_remap_pending is None else s.row_remap_pending
    failed = prev.seen_failed if s.row_remap_failed is None else s.row_remap_failed
    if (xid, counts, ecc, pending, failed) == (
        prev.seen_xid,
        prev.seen_counts,
        prev.seen_ecc,
        prev.seen_pending,
        prev.seen_failed,
    ):
        return prev
    return replace(
        prev,
        seen_xid=xid,
        seen_counts=counts,
        seen_ecc=ecc,
        seen_pending=pending,
        seen_failed=failed,
    )


def _needs_reset(seen: CardHealth) -> bool:
    # a gauge still reading a fatal XID where nothing counts them: not reset since
    sticky = (
        seen.seen_counts is None
        and seen.seen_xid is not None
        and classify_xid(seen.seen_xid).takes_card_out
    )
    return seen.seen_pending or seen.seen_failed or sticky


def health_step(
    prev: CardHealth | None, sample: GpuSample, at: datetime, *, recover_after_s: float
) -> CardHealth:
    """The card's health after one reading."""
    prev = prev or CardHealth()
    seen = _seen(prev, sample)
    found = _new_evidence(prev, sample)
    if found is not None:
        fault, code = found
        return replace(seen, fault=fault, code=code, since=prev.since or at, last_at=at)
    if (
        prev.faulted
        and prev.last_at is not None
        and (at - prev.last_at).total_seconds() >= recover_after_s
        and not _needs_reset(seen)
    ):
        return seen.acknowledged()
    return seen
