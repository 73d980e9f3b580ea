"""A card's health as the join keeps it: what took it out, and when the evidence cleared.

A card is faulted by new evidence only: a fatal XID that is new (a code other than the last one
read, or one the exporter counted in its window), a rise in uncorrectable ECC errors, or a row
remap turning pending or failed. dcgm-exporter's XID gauge keeps the last code until the driver
reloads, so the same code read again is not a new error; read as one, a card would stay out
forever after its first fault.

It comes back when no new evidence came for ``recover_after_s`` of event time and nothing still
says it needs a reset: a pending or failed row remap, or an exporter that keeps reading the XID
and does not count them (without counts a repeat of the same code cannot be told from the stale
gauge, so only its clearing, at the reset, shows the card is fine). The check runs on the
card's next reading, so a card whose readings stopped (fallen off the bus) stays out. An
operator's uncordon clears every fault of the node at once (``acknowledged``); evidence seen
before it does not count again.
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
    """The XID the last reading reported (None: none), to tell a new code from the gauge."""
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
        }

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> CardHealth:
        seen = raw.get("seen")
        xid, ecc, pending, failed = seen if isinstance(seen, list) else (None, None, 0, 0)
        return cls(
            fault=_text(raw.get("fault")),
            code=_int(raw.get("code")),
            since=_time(raw.get("since")),
            last_at=_time(raw.get("last_at")),
            seen_xid=_int(xid),
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


def _new_evidence(prev: CardHealth, s: GpuSample) -> tuple[str, int | None] | None:
    """The first new sign of a broken card in this reading, as (fault, XID code)."""
    codes = sorted(c for c, n in (s.xid_counts or {}).items() if n > 0)
    if s.xid and s.xid != prev.seen_xid and s.xid not in codes:
        codes.append(s.xid)
    for code in codes:
        info = classify_xid(code)
        if info.takes_card_out:
            return f"XID {code}: {info.meaning}", code
    ecc = s.ecc_uncorrected_volatile
    if ecc and ecc > (prev.seen_ecc or 0):
        return f"{ecc} uncorrectable ECC errors since the driver loaded", None
    if s.row_remap_failed and not prev.seen_failed:
        return "HBM row remapping failed: the card needs service", None
    if s.row_remap_pending and not prev.seen_pending:
        return "HBM row remap pending: the card needs a reset", None
    return None


def _needs_reset(s: GpuSample) -> bool:
    sticky = s.xid_counts is None and s.xid is not None and classify_xid(s.xid).takes_card_out
    return bool(s.row_remap_pending or s.row_remap_failed or sticky)


def health_step(
    prev: CardHealth | None, sample: GpuSample, at: datetime, *, recover_after_s: float
) -> CardHealth:
    """The card's health after one reading."""
    prev = prev or CardHealth()
    seen = replace(
        prev,
        seen_xid=sample.xid or None,
        seen_ecc=(
            sample.ecc_uncorrected_volatile
            if sample.ecc_uncorrected_volatile is not None
            else prev.seen_ecc
        ),
        seen_pending=bool(sample.row_remap_pending),
        seen_failed=bool(sample.row_remap_failed),
    )
    found = _new_evidence(prev, sample)
    if found is not None:
        fault, code = found
        return replace(seen, fault=fault, code=code, since=prev.since or at, last_at=at)
    if (
        prev.faulted
        and prev.last_at is not None
        and (at - prev.last_at).total_seconds() >= recover_after_s
        and not _needs_reset(sample)
    ):
        return seen.acknowledged()
    return seen
